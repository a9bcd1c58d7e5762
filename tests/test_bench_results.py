"""The results file: a tiny real run holds every row the format promises, and never
overwrites an earlier run."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lmckv.bench.accuracy.formats import FORMATS
from lmckv.bench.accuracy.reconstruction import ACCURACY_SCOPES
from lmckv.bench.common.rows import (
    METRICS,
    SCOPES,
    ResultsWriter,
    SchemaError,
    UnknownKinds,
    VersionMismatch,
    load,
    parse,
    read,
    results_name,
    validate_record,
)
from lmckv.bench.throughput.measure import CPU_OPS, Case, ThroughputPlan
from lmckv.bench.throughput.runner import run_benchmarks

TINY = ThroughputPlan(
    cpu_cases=(Case("tiny", layers=2, pages=2, heads=2, head_dim=16),),
    cuda_cases=(Case("tiny", layers=1, pages=2, heads=2, head_dim=16),),
    dtypes=("float16", "bfloat16"),
    rounds=2,
    warmup=0,
    min_sample_s=0.0005,
    processes=3,
)
FAMILIES = ("gaussian", "page_scale")


@pytest.fixture(scope="module")
def tiny_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("bench")
    path, counts, _ = run_benchmarks(
        out, mode="quick", plan=TINY, families=FAMILIES, real=False, progress=False
    )
    assert path.parent == out and path.suffix == ".jsonl"
    header, records = load(path)  # validates every record
    assert counts["header"] == 1 and counts["throughput"] == len(
        [r for r in records if r["kind"] == "throughput"]
    )
    return header, records


def test_header_carries_environment_and_schema(tiny_run: tuple[dict[str, Any], list]) -> None:
    header, _ = tiny_run
    assert header["schema_version"] == 2 and header["mode"] == "quick"
    assert header["machine"]["host_id"] and len(header["machine_id"]) == 16
    env = header["env"]
    assert env["cpu_count"] >= 1 and env["torch"] and env["python"]
    assert header["run_id"].startswith("bench-")


def test_every_op_impl_scope_has_a_row_or_a_skip(tiny_run: tuple[dict[str, Any], list]) -> None:
    _, records = tiny_run
    rows = [r for r in records if r["kind"] == "throughput"]
    skips = [r["what"] for r in records if r["kind"] == "skip"]
    impls = {r["impl"] for r in rows} & {"reference", "upstream"}
    assert "reference" in impls
    for dtype in TINY.dtypes:
        for impl in impls:
            for scope in SCOPES:
                for op in CPU_OPS:
                    found = [
                        r
                        for r in rows
                        if (r["op"], r["impl"], r["scope"], r["dtype"]) == (op, impl, scope, dtype)
                    ]
                    skipped = f"throughput {op} {impl} cpu {scope} {dtype} tiny" in skips
                    assert len(found) == 1 or skipped, (op, impl, scope, dtype)
                    if found:
                        row = found[0]
                        assert row["gbps"] > 0 and row["median_s"] > 0 and row["iqr_s"] >= 0
                        assert row["ratio_to_limit"] is not None
                        assert row["limit"] == ("crc32" if op == "parse" else "memcpy")
                        has_up = any(
                            r["impl"] == "upstream"
                            and (r["op"], r["scope"], r["dtype"]) == (op, scope, dtype)
                            for r in rows
                        )
                        if impl == "reference":
                            assert (row["ratio_to_upstream"] is not None) == has_up
                        else:
                            assert row["ratio_to_upstream"] is None


def test_limits_are_measured_in_the_same_run(tiny_run: tuple[dict[str, Any], list]) -> None:
    _, records = tiny_run
    rows = [r for r in records if r["kind"] == "throughput"]
    for dtype in TINY.dtypes:
        limits = {r["impl"]: r for r in rows if r["scope"] is None and r["dtype"] == dtype}
        assert set(limits) == {"memcpy", "crc32", "alloc"}
        assert limits["memcpy"]["op"] == "copy" and limits["crc32"]["op"] == "crc32"
        # alloc: fresh output buffers, counted in encode's unit (K+V bytes)
        assert limits["alloc"]["op"] == "alloc" and limits["alloc"]["limit"] is None
        assert limits["alloc"]["bytes"] == limits["memcpy"]["bytes"]
        enc = next(
            r
            for r in rows
            if (r["op"], r["impl"], r["scope"], r["dtype"])
            == ("encode", "reference", "PER_TENSOR", dtype)
        )
        assert enc["bytes"] == limits["memcpy"]["bytes"] == 2 * 2 * 2 * 16 * 2 * 16 * 2
        assert enc["ratio_to_limit"] == pytest.approx(enc["gbps"] / limits["memcpy"]["gbps"])


def test_cuda_and_real_data_absence_are_skip_rows(tiny_run: tuple[dict[str, Any], list]) -> None:
    _, records = tiny_run
    skips = {r["what"]: r["reason"] for r in records if r["kind"] == "skip"}
    import torch

    if not torch.cuda.is_available():
        assert skips["throughput cuda (all cases)"]
    assert skips["accuracy real:*"] == "--no-real given"


def test_accuracy_table_covers_every_scope_format_metric(
    tiny_run: tuple[dict[str, Any], list],
) -> None:
    _, records = tiny_run
    acc = {
        (r["data"], r["scope"], r["fmt"], r["metric"]) for r in records if r["kind"] == "accuracy"
    }
    for family in FAMILIES:
        for scope in ACCURACY_SCOPES:
            for fmt, spec in FORMATS.items():
                for metric in METRICS:
                    expected = not (
                        (metric == "subnormal" and not spec.is_float)
                        or (metric == "bytes_per_token" and fmt != "e4m3")
                    )
                    assert ((f"synthetic:{family}", scope, fmt, metric) in acc) == expected


def test_pandas_reads_the_file(tiny_run: tuple[dict[str, Any], list], tmp_path: Path) -> None:
    pandas = pytest.importorskip("pandas", reason="pandas (bench extra) not installed")
    header, records = tiny_run
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [header, *records]) + "\n")
    frame = pandas.read_json(path, lines=True)
    assert len(frame) == 1 + len(records)
    assert set(frame["kind"]) >= {"header", "throughput", "accuracy", "skip"}


def test_runs_never_overwrite_each_other(tmp_path: Path) -> None:
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    env = {
        "cpu_model": "x",
        "cpu_count": 1,
        "python": "3",
        "torch": "2",
        "platform": "p",
        "git_commit": "0123456789abcdef",
        "lmcache": None,
        "gpu": None,
    }
    machine = {
        "host_id": "0123456789abcdef",
        "cpu_model": "x",
        "cpu_usable": 1,
        "cpu_logical": 1,
        "governor": None,
        "ram_bytes": None,
        "gpu": None,
    }
    first = ResultsWriter(tmp_path, mode="quick", env=env, machine=machine, started=started)
    first.write({"kind": "skip", "what": "a", "reason": "first run"})
    first.close()
    before = first.path.read_text()
    with ResultsWriter(tmp_path, mode="quick", env=env, machine=machine, started=started) as second:
        second.write({"kind": "skip", "what": "b", "reason": "second run"})
    assert first.path.name == results_name(started, "0123456789abcdef")
    assert first.path.name == "bench-20260102T030405Z-0123456.jsonl"
    assert second.path.name == "bench-20260102T030405Z-0123456-1.jsonl"
    assert first.path.read_text() == before
    assert load(second.path)[1] == [
        {"kind": "skip", "what": "b", "reason": "second run", "machine_id": second.machine_id}
    ]


@pytest.mark.parametrize(
    "record",
    [
        {"kind": "nope"},
        {"kind": "skip", "what": "x"},
        {"kind": "telemetry", "t_s": 0.0, "power_w": float("nan"), "util_pct": 1.0},
        {
            "kind": "accuracy",
            "scope": "PER_TENSOR",
            "data": "d",
            "fmt": "fp4",
            "metric": "rel_fro",
            "value": 1.0,
        },
        {
            "kind": "accuracy",
            "scope": "PER_TENSOR",
            "data": "d",
            "fmt": "e4m3",
            "metric": "rel_fro",
            "value": True,
        },
    ],
)
def test_validation_rejects_malformed_records(record: dict[str, Any]) -> None:
    with pytest.raises(SchemaError):
        validate_record(record)


def test_reader_rejects_a_file_without_header(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"kind": "skip", "what": "a", "reason": "b"}) + "\n")
    with pytest.raises(SchemaError, match="header"):
        load(path)


def _written(tmp_path: Path, *extra: str) -> Path:
    """A results file with one skip row, then ``extra`` lines appended."""
    env = {"git_commit": None, "cpu_model": "x", "cpu_count": 1, "python": "3.11", "torch": "t"}
    env |= {"platform": "Linux", "lmcache": None, "gpu": None}
    machine = {"host_id": "0123456789abcdef", "cpu_model": "x", "cpu_usable": 1}
    machine |= {"cpu_logical": 1, "governor": None, "ram_bytes": None, "gpu": None}
    with ResultsWriter(tmp_path, mode="quick", env=env, machine=machine) as out:
        out.write({"kind": "skip", "what": "a", "reason": "r"})
    with open(out.path, "a", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in extra))
    return out.path


def test_the_reader_refuses_or_skips_unknown_kinds_as_told(tmp_path: Path) -> None:
    future = json.dumps({"kind": "future", "x": 1})
    path = _written(tmp_path, future, "", future)
    with pytest.raises(SchemaError, match=rf"{path.name}:3: .*kind"):
        read(path, unknown=UnknownKinds.REFUSE)
    found = read(path, unknown=UnknownKinds.SKIP)
    assert found.skipped == {"future": 2}
    assert [r["kind"] for r in found.records] == ["skip"] and found.header["kind"] == "header"
    # anything else off the schema is refused under either policy
    bad = _written(tmp_path, json.dumps({"kind": "skip", "what": "x"}))
    for policy in UnknownKinds:
        with pytest.raises(SchemaError, match=rf"{bad.name}:3: .*reason"):
            read(bad, unknown=policy)


def test_the_reader_names_another_format_version(tmp_path: Path) -> None:
    path = _written(tmp_path)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0]) | {"schema_version": 1}
    with pytest.raises(VersionMismatch, match=r":1: .*results file version 1; this lmckv reads"):
        parse(path, [json.dumps(header), *lines[1:]], unknown=UnknownKinds.SKIP)
    with pytest.raises(SchemaError, match="empty results file"):
        parse(path, ["", " "], unknown=UnknownKinds.SKIP)
    with pytest.raises(SchemaError, match="a record must be a JSON object"):
        parse(path, [lines[0], "[1]"], unknown=UnknownKinds.SKIP)
