"""The serde contract (conformance/store/serde_contract.py, SPEC.md "The serde contract") for
every serde the installed LMCache registers, and for the plugins' serdes: those of
``LMCKV_SERDE_PLUGINS`` and ``lmcache-turbo-quant-serde`` where it is installed (its serde
``tqai``). Each serde is measured in a fresh process that loads the plugins (this process's
LMCache registry stays as it is). A property that does not hold is a failure unless
conformance/known_failures/serde-plugins.txt lists it with what is observed; a listed property
that holds fails too (the list is strict, as the suite's are). Without the plugin its tests are
skipped, saying so, and nothing else needs it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lmckv.bench.recommendation.serde_choice import serde_table
from lmckv.conformance.store import catalogue, serde_contract, serde_plugins
from lmckv.reports.inputs import serde_skips

pytest.importorskip("lmcache.v1.distributed.serde")

KNOWN = Path(__file__).parents[1] / "conformance" / "known_failures" / "serde-plugins.txt"
TQAI_PLUGIN = "lmcache_turbo_quant_serde:register"
#: The serdes whose frames need CUDA: measured where a GPU is.
CUDA_ONLY = {catalogue.TURBOQUANT.name}
_OBSERVED: dict[str, list[serde_contract.Observation]] = {}


def _digits(text: str) -> str:
    return re.sub(r"\d+", "#", text)


def known() -> dict[tuple[str, str], str]:
    """(serde, property) -> the observation the list records."""
    out = {}
    for line in KNOWN.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            serde, prop, rest = line.split(" ", 2)
            observed = re.search(r"\[observed: (.*)\]$", rest)
            assert observed, f"{KNOWN.name}: no [observed: ...] in {line!r}"
            out[(serde, prop)] = observed.group(1)
    return out


def plugins() -> list[str]:
    """The run's plugins, and the turbo-quant plugin where it is installed."""
    inherited = [p for p in os.environ.get(serde_plugins.PLUGINS_ENV, "").split(",") if p]
    found = importlib.util.find_spec("lmcache_turbo_quant_serde") is not None
    return list(dict.fromkeys([*inherited, *([TQAI_PLUGIN] if found else [])]))


SERDES = serde_contract.registered_with(plugins())


def observe(name: str, tmp: Path) -> list[serde_contract.Observation]:
    if name not in _OBSERVED:
        key = tmp / "master.key"
        key.write_bytes(os.urandom(32))
        _OBSERVED[name] = serde_contract.observe(name, plugins(), key)
    return _OBSERVED[name]


@pytest.mark.parametrize("prop", serde_contract.PROPERTIES)
@pytest.mark.parametrize("serde", SERDES)
def test_serde_contract(serde: str, prop: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    if serde in CUDA_ONLY:
        pytest.skip(f"{serde}: its kernels need CUDA; measured where a GPU is")
    (seen,) = [o for o in observe(serde, tmp_path_factory.mktemp(serde)) if o.prop == prop]
    listed = known().get((serde, prop))
    if seen.ok:
        assert listed is None, f"{serde} {prop} holds ({seen.seen}): remove its line"
        return
    assert listed is not None, f"{serde} breaks {prop}: {seen.seen}"
    assert _digits(seen.seen) == listed, f"{serde} {prop}: observed {seen.seen!r}"


def test_every_listed_line_names_a_property_and_a_known_serde() -> None:
    """A line of the list names a property of the contract and a serde that is measured here
    or has a catalogue row naming the plugin it comes from."""
    for serde, prop in known():
        assert prop in serde_contract.PROPERTIES
        row = catalogue.SERDES.get(serde)
        assert serde in SERDES or (row is not None and row.origin), serde


def test_the_plugin_is_measured_where_installed() -> None:
    if TQAI_PLUGIN not in plugins():
        pytest.skip("lmcache-turbo-quant-serde is not installed: its serde tqai is not measured")
    assert catalogue.TQAI.name in SERDES


ROWS_SCRIPT = """
import json, sys, torch
from types import SimpleNamespace
from lmckv.bench.accuracy import e2e
g = torch.Generator().manual_seed(1)
kv = [tuple(torch.randn(1, 2, 32, 128, generator=g) for _ in range(2)) for _ in range(2)]
rows = list(e2e._registered_rows("m", 32, SimpleNamespace(windows=[SimpleNamespace(kv=kv)])))
print(json.dumps([r for r in rows if r.get("serde") == sys.argv[1]]))
"""


def test_the_end_to_end_table_gives_the_plugin_a_row(tmp_path: Path) -> None:
    """With the plugin loaded (``LMCKV_SERDE_PLUGINS``, as ``--serde-plugin`` sets it), the
    end-to-end measurement tries ``tqai`` through LMCache's factory and, since it fails there,
    gives it a skip row naming the failure; the report's serde table shows that row."""
    if TQAI_PLUGIN not in plugins():
        pytest.skip("lmcache-turbo-quant-serde is not installed")
    env = {**os.environ, serde_plugins.PLUGINS_ENV: TQAI_PLUGIN}
    done = subprocess.run(
        [sys.executable, "-c", ROWS_SCRIPT, catalogue.TQAI.name],
        capture_output=True, text=True, env=env, timeout=300, check=True,
    )  # fmt: skip
    (row,) = json.loads(done.stdout.splitlines()[-1])
    assert row["kind"] == "skip" and row["what"] == "e2e serde tqai", row
    assert "TypeError: TqaiSerializer.serialize() takes 3 positional arguments" in row["reason"]
    e2e = pd.DataFrame(
        [{"serde": "none", "scope": "NONE", "metric": "l2_bytes_per_token", "value": 1.0,
          "layer": None, "cache_dtype": "bfloat16", "ci_low": None, "ci_high": None}]
    )  # fmt: skip
    table = serde_table(e2e, pd.DataFrame(), serde_skips(pd.DataFrame([row])))
    shown = table[table["serde"] == catalogue.TQAI.name]
    assert len(shown) == 1 and "TypeError" in shown.iloc[0]["skipped"]


@pytest.mark.parametrize(
    "command",
    [
        ["fsck", "/nonexistent-store"],
        ["bench", "e2e", "--model", "/nonexistent", "--out", "/nonexistent"],
        ["report", "/nonexistent.jsonl", "--out", "/nonexistent"],
    ],
)
@pytest.mark.parametrize(
    ("plugin", "said"),
    [
        ("not a name", "expected MODULE[:FUNCTION]"),
        ("lmckv_no_such_plugin:go", "ModuleNotFoundError"),
    ],
)
def test_every_command_takes_a_plugin_and_refuses_one_it_cannot_load(
    command: list[str], plugin: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """fsck, bench e2e and report load ``--serde-plugin`` before anything else; one that
    cannot be loaded is one line on standard error and exit 2."""
    from lmckv import cli

    assert cli.main([*command, "--serde-plugin", plugin]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0] and "Traceback" not in err[0]
