"""The report builder's reader: format detection and clear errors on bad results files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmckv.bench.common.rows import UnknownKinds, read
from lmckv.reports.inputs import (
    BenchRun,
    ConformanceRun,
    ReportInputError,
    load_inputs,
    load_results,
)
from lmckv.reports.report_command import main

FIXTURES = Path(__file__).parent / "fixtures" / "report"
HEADER = {
    "kind": "header",
    "schema_version": 2,
    "run_id": "bench-x",
    "mode": "quick",
    "started_utc": "2025-03-01T10:15:00Z",
    "env": {
        "cpu_model": "x",
        "cpu_count": 1,
        "python": "3.11.7",
        "torch": "2.13.0+cpu",
        "platform": "Linux",
        "git_commit": None,
        "lmcache": None,
        "gpu": None,
    },
    "machine": {
        "host_id": "0123456789abcdef",
        "cpu_model": "x",
        "cpu_usable": 1,
        "cpu_logical": 1,
        "governor": None,
        "ram_bytes": None,
        "gpu": None,
    },
    "machine_id": "0123456789abcdef",
}


def write_lines(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_detects_bench_jsonl_by_header_record() -> None:
    run = load_results(FIXTURES / "bench-cpu.jsonl")
    assert isinstance(run, BenchRun)
    assert run.run_id == "bench-20250301T101500Z-3f2a9c1"
    throughput = run.table("throughput")
    assert set(throughput["op"]) == {
        "encode",
        "parse",
        "decode_fp8",
        "decode_dequant",
        "copy",
        "crc32",
        "store",
        "load",
    }
    assert (throughput["run_id"] == run.run_id).all()
    skipped = list(run.table("skip")["what"])
    assert skipped == ["cuda", "store path fs:turboquant", "store path fs_native:turboquant"]
    assert run.table("telemetry").empty


def test_detects_conformance_json_by_tests_key() -> None:
    run = load_results(FIXTURES / "conformance.json")
    assert isinstance(run, ConformanceRun)
    assert set(run.tables["tests"]["impl"]) == {"reference", "upstream"}
    assert run.meta["git_commit"].startswith("3f2a9c1")


def test_detection_does_not_depend_on_file_suffix(tmp_path: Path) -> None:
    renamed = tmp_path / "results.txt"
    renamed.write_text((FIXTURES / "conformance.json").read_text().replace("\n", " "))
    assert isinstance(load_results(renamed), ConformanceRun)


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([HEADER, "not an object"], ":2: a record must be a JSON object"),
        ([{**HEADER, "schema_version": 1}], "results file version 1; this lmckv reads version 2"),
        ([HEADER, {"kind": "throughput", "op": "encode"}], "missing field(s) impl"),
        ([HEADER, {"kind": "skip", "what": "cuda"}], ":2: missing field(s) reason"),
        ([{k: v for k, v in HEADER.items() if k != "env"}], "missing field(s) env"),
    ],
)
def test_bad_bench_records_name_file_and_line(
    tmp_path: Path, records: list[object], message: str
) -> None:
    path = write_lines(tmp_path / "bench.jsonl", records)
    with pytest.raises(ReportInputError) as caught:
        load_results(path)
    assert message in str(caught.value)
    assert str(path) in str(caught.value)


def test_a_version_1_file_is_one_error_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1 = {k: v for k, v in HEADER.items() if k not in ("machine", "machine_id")}
    row = {"kind": "skip", "what": "cuda", "reason": "no GPU"}  # v1 rows carry no machine_id
    path = write_lines(tmp_path / "bench-old.jsonl", [{**v1, "schema_version": 1}, row])
    assert main([str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: {path}:1: results file version 1; this lmckv reads version 2: "
        "re-run lmckv bench run"
    ]


def test_truncated_json_line_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "bench.jsonl"
    path.write_text(json.dumps(HEADER) + '\n{"kind": "skip", "what"\n')
    with pytest.raises(ReportInputError, match=r"bench\.jsonl:2: not JSON"):
        load_results(path)


def test_non_numeric_gbps_is_rejected(tmp_path: Path) -> None:
    row = json.loads((FIXTURES / "bench-cpu.jsonl").read_text().splitlines()[1])
    path = write_lines(tmp_path / "bench.jsonl", [HEADER, {**row, "gbps": "fast"}])
    with pytest.raises(ReportInputError, match="'gbps' must be numeric"):
        load_results(path)


def test_unknown_record_kinds_are_counted_not_fatal(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "bench.jsonl", [HEADER, {"kind": "future"}, {"kind": "future"}])
    run = load_results(path)
    assert isinstance(run, BenchRun)
    assert run.ignored_kinds == {"future": 2}


def test_neither_format_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text('{"rows": []}')
    with pytest.raises(ReportInputError, match="neither a bench results file"):
        load_results(path)


def test_unknown_conformance_outcome_is_rejected(tmp_path: Path) -> None:
    document = json.loads((FIXTURES / "conformance.json").read_text())
    document["tests"][0]["outcome"] = "flaky"
    path = tmp_path / "c.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ReportInputError, match=r"unknown test outcome\(s\) \['flaky'\]"):
        load_results(path)


def test_baseline_must_be_a_bench_file() -> None:
    with pytest.raises(ReportInputError, match="--baseline must be a bench results file"):
        load_inputs([FIXTURES / "bench-cpu.jsonl"], FIXTURES / "conformance.json")


def test_cli_reports_bad_input_with_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.jsonl"
    assert main([str(missing), "--out", str(tmp_path / "out")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["bench-cpu.jsonl", "bench-cuda.jsonl", "bench-baseline.jsonl"])
def test_bench_fixtures_follow_the_producers_schema(name: str) -> None:
    """The fixtures pass bench.common.rows' own validator, so the report reads what bench writes."""
    records = read(FIXTURES / name, unknown=UnknownKinds.REFUSE).records
    run = load_results(FIXTURES / name)
    assert isinstance(run, BenchRun)
    assert sum(len(t) for t in run.tables.values()) == len(records)
