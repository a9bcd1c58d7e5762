"""The results file (conformance/SCHEMAS.md), merged over xdist workers, and the pair count."""

from __future__ import annotations

import re
from types import SimpleNamespace

from lmckv.conformance.runner.impl_specs import load_driver
from lmckv.conformance.runner.plugin import OUTCOMES, ConformancePlugin
from lmckv.conformance.runner.subprocess_suite import run_suite
from lmckv.conformance.runner.terminal_summary import write_summary
from lmckv.conformance.suite.matrix import matrix_cases, matrix_checks

SELECTION = "enc-per_tensor-f16-nhd-2x4x2x8 or key-kv-rank or proto-server-00"


def test_results_file_follows_the_schema_and_merges_xdist_workers() -> None:
    run = run_suite(["reference", "upstream"], "-k", SELECTION, "-n", "2")
    data = run.results
    final = next(
        line
        for line in reversed(run.output.splitlines())
        if re.search(r"\d+ (passed|failed)", line) and " in " in line
    )
    counts = re.findall(r"(\d+) (?:passed|failed|xfailed|skipped|error)", final)
    assert len(data["tests"]) == sum(map(int, counts)) > 20, final
    assert data["schema_version"] == 1
    assert isinstance(data["wall_s"], float) and data["started_utc"].endswith("+00:00")
    assert {i["name"] for i in data["impls"]} == {"reference", "upstream"}
    for impl in data["impls"]:
        assert impl["kind"] == "python" and impl["capabilities"]
    lists = {i["name"]: i["known_failures"] for i in data["impls"]}
    assert lists["reference"] is None
    assert lists["upstream"].startswith("conformance/known_failures/upstream-")
    assert f"known failures of upstream: {lists['upstream']}" in run.output
    for rule in data["rules"]:
        assert set(rule) == {"id", "level", "spec_anchor", "summary"}
    for test in data["tests"]:
        fields = {"id", "rule", "level", "impl", "producer", "outcome", "reason", "observed"}
        assert set(test) == fields
        assert test["outcome"] in OUTCOMES
        failed = test["outcome"] in ("fail", "known_failure")
        assert (test["observed"] is not None) == failed, test
    levels = {(row["impl"], row["level"]) for row in data["summary"]}
    assert levels == {(i, lv) for i in ("reference", "upstream") for lv in ("MUST", "SHOULD")}
    for row in data["summary"]:
        assert set(row) == {"impl", "level", *OUTCOMES}
    for row in data["matrix"]:
        assert set(row) == {"producer", "consumer", "cases", "pass", "fail", "known_failure"}


def test_pair_count_detects_a_lost_pair() -> None:
    drivers = {"reference": load_driver("reference")}
    assert matrix_checks(drivers) == 2 * len(matrix_cases())  # payload + dequantized V
    records = {
        f"m{i}": {"producer": "reference", "impl": "reference", "outcome": "pass"}
        for i in range(matrix_checks(drivers))
    }
    plugin = SimpleNamespace(drivers=drivers, records=records)
    matrix, problem = ConformancePlugin._pair_check(plugin)  # type: ignore[arg-type]
    assert problem is None and matrix[0]["cases"] == len(records)
    records.pop("m0")
    _, problem = ConformancePlugin._pair_check(plugin)  # type: ignore[arg-type]
    assert problem is not None and "expected" in problem


def test_the_summary_table_keeps_every_name_apart_from_its_level() -> None:
    lines: list[str] = []
    reporter = SimpleNamespace(section=lambda title: None, write_line=lines.append)
    rows = [
        {"impl": name, "level": level, **dict.fromkeys(OUTCOMES, 1)}
        for name in ("reference", "reference-server-long")  # over the 16 columns it had
        for level in ("MUST", "SHOULD")
    ]
    write_summary(reporter, rows, [], [], [])
    header, *body = lines[:5]
    assert header.split()[:2] == ["impl", "level"]
    assert [line.split()[:2] for line in body] == [[r["impl"], r["level"]] for r in rows]
