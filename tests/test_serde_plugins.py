"""The serde contract (conformance/store/serde_contract.py, SPEC.md "The serde contract") for
every serde the installed LMCache registers, and for the plugins' serdes: those of
``LMCKV_SERDE_PLUGINS`` and ``lmcache-turbo-quant-serde`` where it is installed (its serde
``tqai``). Each serde is measured in a fresh process that loads the plugins (this process's
LMCache registry stays as it is). A property that does not hold is a failure unless
conformance/known_failures/serde-plugins.txt lists it with what is observed; a listed property
that holds fails too (the list is strict, as the suite's are). Without the plugin its tests are
skipped, saying so, and nothing else needs it. Every release runs this file (``nox -s
upstream_versions``): it needs nothing of the bench and report extras (the plugin's commands
and its row of the report's serde table are tests/test_serde_plugin_commands.py's).
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

from lmckv.conformance.store import catalogue, serde_contract, serde_plugins

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
