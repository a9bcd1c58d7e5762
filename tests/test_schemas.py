"""The three output formats' JSON Schemas: what is written today passes, and a missing
field, a wrong type or a wrong version fails with a SchemaError naming the JSON path."""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from lmckv.base import schemas
from lmckv.base.schemas import FAST_PATTERNS, SCHEMA_NAMES, SchemaError, validate
from lmckv.bench.common import rows as bench_results
from lmckv.bench.common.rows import ResultsWriter, load

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = sorted((ROOT / "golden_blobs" / "v1").glob("*.json"))
FIXTURES = ROOT / "tests" / "fixtures" / "report"
ENV = {
    "cpu_model": "x",
    "cpu_count": 1,
    "python": "3.11.7",
    "torch": "2.13.0+cpu",
    "platform": "Linux",
    "git_commit": None,
    "lmcache": None,
    "gpu": None,
}
MACHINE = {
    "host_id": "0123456789abcdef",
    "cpu_model": "x",
    "cpu_usable": 1,
    "cpu_logical": 2,
    "governor": None,
    "ram_bytes": 2**30,
    "gpu": None,
}
MACHINE_ID = "fedcba9876543210"
THROUGHPUT = {
    "kind": "throughput",
    "op": "encode",
    "impl": "reference",
    "device": "cpu",
    "scope": "PER_TENSOR",
    "dtype": "float16",
    "case": "page16",
    "bytes": 65536,
    "rounds": 5,
    "median_s": 1e-4,
    "iqr_s": 1e-5,
    "gbps": 0.65,
    "limit": "memcpy",
    "ratio_to_limit": 0.1,
    "ratio_to_upstream": None,
    "q25_s": 9e-5,
    "q75_s": 1.1e-4,
    "samples_s": [1e-4, 1e-4],
    "samples_by_process": [[1e-4], [1e-4]],
    "processes": 2,
    "machine_id": MACHINE_ID,
    "started_utc": "2026-01-02T03:04:05.000+00:00",
    "ended_utc": "2026-01-02T03:04:06.000+00:00",
}


def fails(document: Any, schema_name: str, path: str, problem: str = "") -> SchemaError:
    with pytest.raises(SchemaError) as caught:
        validate(document, schema_name)
    error = caught.value
    assert error.schema == schema_name and error.path == path, str(error)
    assert problem in error.problem
    assert f"{schema_name}.schema.json" in str(error) and path in str(error)
    return error


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_files_are_valid_draft_2020_12(name: str) -> None:
    document = schemas.schema(name)
    Draft202012Validator.check_schema(document)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert document["$id"] and document["title"] and document["description"]


def test_versions_are_the_schemas_consts() -> None:
    assert schemas.VECTORS_VERSION == schemas.RESULTS_VERSION == 1
    assert bench_results.SCHEMA_VERSION == schemas.BENCH_SCHEMA_VERSION == 2
    header = schemas.schema("bench-row")["$defs"]["header"]["properties"]["schema_version"]
    assert header["const"] == bench_results.SCHEMA_VERSION


def test_unknown_schema_name() -> None:
    with pytest.raises(KeyError, match="unknown schema"):
        validate({}, "nope")


# ---- vectors: golden_blobs/v1/*.json


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_every_committed_manifest_validates(path: Path) -> None:
    validate(json.loads(path.read_text(encoding="ascii")), "vectors")


@pytest.fixture(scope="module")
def codec_manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "golden_blobs/v1/codec.json").read_text())
    return data


def test_manifest_missing_field(codec_manifest: dict[str, Any]) -> None:
    doc = copy.deepcopy(codec_manifest)
    del doc["vectors"][0]["rule"]
    fails(doc, "vectors", "$.vectors[0]", "missing field(s) rule")


def test_manifest_wrong_type(codec_manifest: dict[str, Any]) -> None:
    doc = copy.deepcopy(codec_manifest)
    doc["number_of_vectors"] = "290"
    fails(doc, "vectors", "$.number_of_vectors", "must be an integer")


def test_manifest_wrong_version(codec_manifest: dict[str, Any]) -> None:
    fails({**codec_manifest, "format_version": 2}, "vectors", "$.format_version", "expected 1")


def test_manifest_is_closed(codec_manifest: dict[str, Any]) -> None:
    doc = copy.deepcopy(codec_manifest)
    doc["vectors"][0]["surprise"] = 1
    fails(doc, "vectors", "$.vectors[0]", "surprise")


def test_manifest_builder_validates() -> None:
    from lmckv.conformance.golden.common import manifest

    vector = {"id": "a", "rule": "KV-MAGIC", "result": "valid", "comment": "c", "flags": []}
    doc = manifest(
        "lmckv-keys",
        "d",
        {},
        [{**vector, "op": "key.ipc", "request": {}, "expected": {"fields": {}}}],
    )
    assert doc["number_of_vectors"] == 1
    with pytest.raises(SchemaError, match=r"\$\.vectors\[0\]"):
        manifest("lmckv-keys", "d", {}, [vector])


# ---- results: the conformance results file


@pytest.fixture(scope="module")
def results_doc() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "conformance.json").read_text())
    return data


def test_results_fixture_validates(results_doc: dict[str, Any]) -> None:
    validate(results_doc, "results")


def test_freshly_written_results_file_validates(tmp_path: Path) -> None:
    from lmckv.conformance.drivers.base import ImplInfo
    from lmckv.conformance.runner.results_file import write_results

    record = {
        "id": "t::a",
        "rule": "KV-MAGIC",
        "level": "MUST",
        "impl": "reference",
        "producer": None,
        "outcome": "pass",
        "reason": None,
    }
    path = tmp_path / "results.json"
    write_results(  # validates before writing
        path,
        started_utc="2026-01-02T03:04:05+00:00",
        wall_s=0.0,
        impls=[ImplInfo("reference", "python", None, ["codec.parse"])],
        tests=[record],
        summary=[],
        matrix=[],
    )
    validate(json.loads(path.read_text()), "results")


def test_results_missing_field(results_doc: dict[str, Any]) -> None:
    doc = copy.deepcopy(results_doc)
    del doc["tests"][2]["outcome"]
    fails(doc, "results", "$.tests[2]", "missing field(s) outcome")


def test_results_wrong_type(results_doc: dict[str, Any]) -> None:
    doc = copy.deepcopy(results_doc)
    doc["summary"][0]["pass"] = "10"
    fails(doc, "results", "$.summary[0].pass", "'pass' must be an integer")


def test_results_wrong_version(results_doc: dict[str, Any]) -> None:
    fails({**results_doc, "schema_version": 2}, "results", "$.schema_version", "2, expected 1")


def test_results_unknown_outcome(results_doc: dict[str, Any]) -> None:
    doc = copy.deepcopy(results_doc)
    doc["tests"][0]["outcome"] = "flaky"
    fails(doc, "results", "$.tests[0].outcome", "unknown outcome 'flaky'")


# ---- bench-row: one line of a bench-*.jsonl file


@pytest.mark.parametrize(
    "name", ["bench-cpu.jsonl", "bench-cuda.jsonl", "bench-baseline.jsonl", "bench-e2e.jsonl"]
)
def test_bench_fixture_rows_validate(name: str) -> None:
    for line in (FIXTURES / name).read_text().splitlines():
        if line.strip():
            validate(json.loads(line), "bench-row")


def test_freshly_written_rows_validate(tmp_path: Path) -> None:
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    with ResultsWriter(tmp_path, mode="quick", env=ENV, machine=MACHINE, started=started) as out:
        out.write(THROUGHPUT)
        out.write({"kind": "telemetry", "t_s": 0.1, "power_w": 400.0, "util_pct": 97.0})
    lines = out.path.read_text().splitlines()
    for line in lines:
        validate(json.loads(line), "bench-row")
    header, rows = load(out.path)
    assert header["schema_version"] == schemas.BENCH_SCHEMA_VERSION and len(rows) == 2
    assert {r["machine_id"] for r in rows} == {header["machine_id"]}  # stamped on every row


def test_every_row_kind_the_writer_stamps_requires_machine_id() -> None:
    defs = schemas.schema("bench-row")["$defs"]
    for kind in schemas.schema("bench-row")["properties"]["kind"]["enum"]:
        assert "machine_id" in defs[kind]["required"], kind  # the header's too
        assert defs[kind]["properties"]["machine_id"]["pattern"] == "^[0-9a-f]{16}$", kind


def test_bench_writer_refuses_an_invalid_row(tmp_path: Path) -> None:
    with (
        ResultsWriter(tmp_path, mode="quick", env=ENV, machine=MACHINE) as out,
        pytest.raises(SchemaError, match=r"\$\.gbps"),
    ):
        out.write({**THROUGHPUT, "gbps": "fast"})
    assert len(out.path.read_text().splitlines()) == 1  # the header only


def test_bench_row_missing_field() -> None:
    row = {k: v for k, v in THROUGHPUT.items() if k != "case"}
    fails(row, "bench-row", "$", "missing field(s) case")


def test_bench_row_wrong_type() -> None:
    fails({**THROUGHPUT, "bytes": 1.5}, "bench-row", "$.bytes", "'bytes' must be an integer")
    fails({**THROUGHPUT, "rounds": True}, "bench-row", "$.rounds", "must be an integer")


def test_bench_header_wrong_version_and_env() -> None:
    header = {
        "kind": "header",
        "schema_version": 2,
        "run_id": "bench-x",
        "mode": "quick",
        "started_utc": "2026-01-02T03:04:05+00:00",
        "env": ENV,
        "machine": MACHINE,
        "machine_id": MACHINE_ID,
    }
    validate(header, "bench-row")
    fails({**header, "schema_version": 1}, "bench-row", "$.schema_version", "1, expected 2")
    no_machine = {k: v for k, v in header.items() if k != "machine_id"}
    fails(no_machine, "bench-row", "$", "missing field(s) machine_id")
    fails({**THROUGHPUT, "machine_id": "host-a"}, "bench-row", "$.machine_id")
    env = {k: v for k, v in ENV.items() if k != "torch"}
    fails({**header, "env": env}, "bench-row", "$.env", "missing field(s) torch")
    gpu = {"name": "H200", "driver": "570", "memory_total_bytes": "big"}
    fails(
        {**header, "env": {**ENV, "gpu": gpu}},
        "bench-row",
        "$.env.gpu.memory_total_bytes",
        "must be an integer",
    )


def test_bench_row_nan_is_rejected() -> None:
    fails({**THROUGHPUT, "samples_s": [1.0, float("inf")]}, "bench-row", "$.samples_s[1]", "NaN")


def test_bench_rows_are_open_but_known_kinds_only() -> None:
    validate({**THROUGHPUT, "future_field": 1}, "bench-row")
    fails({"kind": "future"}, "bench-row", "$.kind", "unknown record kind 'future'")


def test_bench_allowed_values_come_from_the_schema() -> None:
    throughput = schemas.schema("bench-row")["$defs"]["throughput"]["properties"]
    assert tuple(throughput["op"]["enum"]) == bench_results.THROUGHPUT_OPS
    assert set(bench_results.CODEC_IMPLS + bench_results.LIMIT_IMPLS) == set(
        throughput["impl"]["enum"]
    )
    assert bench_results.SCOPES == ("PER_TENSOR", "PER_LAYER_HEAD", "PER_PAGE_HEAD", "EXTERNAL")


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="0123456789abcdefABG,\n", max_size=40))
def test_fast_patterns_decide_as_the_pattern_does(text: str) -> None:
    """Each FAST_PATTERNS predicate agrees with its pattern under ECMA-262 semantics (``$``
    is the end of the string, which Python spells ``\\Z``)."""
    for pattern, fast in FAST_PATTERNS.items():
        ecma = pattern.removesuffix("$") + r"\Z"
        assert fast(text) == bool(re.search(ecma, text)), (pattern, text)


def test_a_long_malformed_hex_field_is_named_without_quoting_it_whole() -> None:
    blob = "ab" * 100_000 + "G"
    exchange = {
        "request": {
            "id": 1,
            "op": "codec.encode",
            "k": "00",
            "v": "00",
            "dtype": "fp16",
            "shape": [1],
            "scale_scope": 0,
        },
        "reply": {"id": 1, "ok": True, "blob": blob},
    }
    with pytest.raises(SchemaError) as caught:
        validate(exchange, "testee")
    assert caught.value.path == "$.reply.blob" and len(str(caught.value)) < 1000
