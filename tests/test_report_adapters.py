"""The report's L2 adapter matrix (reports/adapter_section.py): one row per implementation,
adapter and fault, one column per serde; a cell says what the damaged object's read gave, is
coloured by the worst outcome of its tests, marks a change the serde cannot detect, and names
intact objects that were not served exactly."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_report_build import FIXTURES, section

from lmckv.reports.report_command import main

PREFIX = "conformance/suite/test_store_load.py::test_store_load[upstream-"
SERVE = "conformance/suite/test_store_load.py::test_store_serve[upstream-"


def record(
    cell: str, rule: str, outcome: str, observed: str, prefix: str = PREFIX
) -> dict[str, object]:
    return {
        "id": f"{prefix}{cell}]", "impl": "upstream", "level": "MUST", "observed": observed,
        "outcome": outcome, "producer": None, "reason": None, "rule": rule,
    }  # fmt: skip


def test_the_adapter_matrix_shows_each_cell(tmp_path: Path) -> None:
    results = json.loads((FIXTURES / "conformance.json").read_text())
    results["tests"] += [
        record("s3-none-grown-target", "STORE-LOAD-SIZE", "known_failure", "exact"),
        record("s3-none-grown-neighbours", "STORE-LOAD-NEIGHBOURS", "pass", "exact, exact, exact"),
        record("s3-fp8-flip-k-target", "STORE-LOAD-CHANGED", "pass", "wrong-bytes"),
        record("s3-fp8-flip-k-neighbours", "STORE-LOAD-NEIGHBOURS", "pass", "exact, miss, exact"),
        record("s3-aesgcm-flip-k-target", "STORE-LOAD-CHANGED", "fail", "exact"),
        # A serving case: a row after the faults, its cell the task's chunks per key group.
        record(
            "s3-none-task-grown-middle",
            "STORE-SERVE-PREFIX",
            "known_failure",
            "E E E / E E W",
            SERVE,
        ),
    ]
    (tmp_path / "conformance.json").write_text(json.dumps(results))
    assert main([str(tmp_path / "conformance.json"), "--out", str(tmp_path / "out")]) == 0
    text = section((tmp_path / "out" / "index.html").read_text(encoding="utf-8"), "adapters")
    rows = re.findall(r"<tr>(.*?)</tr>", text, re.S)
    cells = {
        tuple(re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S))[2]: r
        for r in rows[1:]
    }
    # The faults in their order, not alphabetical, then the serving cases.
    assert list(cells) == ["grown", "flip-k", "task-grown-middle"]
    assert 'class="o-known">exact (known failure)</td>' in cells["grown"]
    assert "not run" in cells["grown"]  # fp8 and aesgcm of grown have no tests here
    assert ">wrong-bytes (undetectable here); intact: exact, miss, exact</td>" in cells["flip-k"]
    assert 'class="o-fail">exact (FAIL)</td>' in cells["flip-k"]
    assert 'class="o-known">E E E / E E W (known failure)</td>' in cells["task-grown-middle"]
    assert (tmp_path / "out" / "adapter_matrix.csv").read_text().count("\n") == 7
