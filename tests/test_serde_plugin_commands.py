"""A serde plugin through lmckv's commands: ``--serde-plugin`` on fsck, bench e2e and report
(one that cannot be loaded is one line, exit 2), and the plugin's row of the end-to-end
serde table (a skip naming why LMCache cannot use it). The contract itself is
tests/test_serde_plugins.py's, which every release runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_serde_plugins import TQAI_PLUGIN, plugins

from lmckv.bench.recommendation.serde_choice import serde_table
from lmckv.conformance.store import catalogue, serde_plugins
from lmckv.reports.inputs import serde_skips

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
