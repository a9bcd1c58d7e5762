"""The operations table (conformance/core/operations.py) and what is derived from it: the
reply check of the drivers, the case builders' field lists, the shipped JSON Schema of the
testee messages, TESTEE.md's table, and one run whose every exchange follows the schema."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from upstream_required import upstream_missing

from lmckv.base.resources import package_path
from lmckv.base.schemas import SchemaError, validate
from lmckv.conformance.core import operations as ops
from lmckv.conformance.core import testee_schema
from lmckv.conformance.core.golden_vectors import vectors
from lmckv.conformance.core.wire import FIELD_TYPES
from lmckv.conformance.drivers import DriverError, schema_check
from lmckv.conformance.drivers.exec_driver import ExecDriver
from lmckv.conformance.drivers.python_driver import load_package
from lmckv.conformance.drivers.schema_check import ENV, SchemaCheckedDriver
from lmckv.conformance.runner.subprocess_suite import run_suite
from lmckv.conformance.suite.codec_cases import ENCODE_FIELDS, ENCODE_FILES, encode_capabilities
from lmckv.conformance.testees.c.build import compiler

PY = sys.executable
KV_RANK = {"world_size": 8, "global_rank": 5, "local_world_size": 4, "local_rank": 1}


def test_the_committed_schema_is_what_the_generator_writes() -> None:
    committed = package_path("lmckv.base.schemas", "testee.schema.json")
    assert Path(committed).read_text(encoding="utf-8") == testee_schema.text(), (
        "run python -m lmckv.conformance.core.testee_schema --write"
    )
    assert testee_schema.main([]) == 0


def test_testee_md_holds_the_table() -> None:
    text = Path(package_path("lmckv.conformance", "TESTEE.md")).read_text(encoding="utf-8")
    rows = testee_schema.markdown_rows()
    assert len(rows) == len(ops.TABLE) == len(ops.OPERATIONS)
    missing = [row for row in rows if row not in text.splitlines()]
    assert not missing, f"TESTEE.md's operations table lacks or differs in: {missing}"
    listed = [line for line in text.splitlines() if line.startswith("| `")]
    assert listed == rows, "TESTEE.md's operations table has rows the table does not"
    for op in ops.OPERATIONS:  # every operation has its prose section too
        assert f"**{op}**" in text or f"**{op}** /" in text or f"/ **{op}**" in text, op


def test_every_field_has_one_wire_type_and_flags_cover_optional_fields() -> None:
    for op in ops.TABLE:
        for name in (*op.request, *op.reply):
            assert name in FIELD_TYPES, f"{op.name}: {name} has no wire type"
        assert len(set(op.request)) == len(op.request), op.name
        for flag, names in op.flags.items():
            assert set(names) <= set(op.optional), (op.name, flag)
    assert ops.CAPABILITY_FLAGS == {
        "codec.hash_gate": "codec.parse",
        "codec.v2": "codec.parse",
        "codec.dequant": "codec.decode",
        "codec.encode_scales": "codec.encode",
    }
    assert (*ops.OPERATIONS, *ops.CAPABILITY_FLAGS) == ops.CAPABILITIES


def test_encode_field_lists_come_from_the_table() -> None:
    """Every field an encode vector gives is a codec.encode request field, inline or by
    file; the flags a vector needs are those covering the fields it gives."""
    assert set(ENCODE_FIELDS) | set(ENCODE_FILES) == set(ops.OPS["codec.encode"].request)
    assert ENCODE_FILES == ("k", "v", "v_scales")
    seen_flag = False
    for vector in vectors("codec"):
        enc = vector.get("encode")
        if enc is None:
            continue
        for key in enc:
            name = key.removesuffix("_file")
            if not key.endswith("_sha256"):
                assert name in ENCODE_FIELDS or name in ENCODE_FILES, (vector["id"], key)
        caps = encode_capabilities(vector)
        assert ("codec.encode_scales" in caps) == ("v_scales_file" in enc), vector["id"]
        seen_flag |= "codec.encode_scales" in caps
    assert seen_flag


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ({"ok": True, "kv_rank": 3}, None),
        ({"ok": False, "error": "KVRankFieldError", "message": "x"}, None),
        ({"ok": True}, "field 'kv_rank' is missing"),
        ({"ok": True, "kv_rank": "3"}, "field 'kv_rank' is not of type int (got str)"),
        ({"ok": True, "kv_rank": True}, "field 'kv_rank' is not of type int (got bool)"),
        ({"ok": True, "kv_rank": None}, "field 'kv_rank' is null"),
        ({"ok": True, "kv_rank": 3, "extra": 1}, "field 'extra' is not a field of this reply"),
        ({"ok": False}, "field 'error' is missing or not a string"),
        ({"kv_rank": 3}, "field 'ok' is missing or not a bool"),
    ],
)
def test_reply_problem_names_the_field(reply: dict[str, Any], problem: str | None) -> None:
    found = ops.reply_problem("key.kv_rank", reply)
    if problem is None:
        assert found is None
    else:
        assert found is not None and found.endswith(problem), found
        assert found.startswith("reply to key.kv_rank: ")


def test_null_and_list_items_follow_the_table() -> None:
    parse = {name: 0 for name in ops.OPS["codec.parse"].reply}
    parse |= {"scale_shape": [], "scale_dtype": None, "k_dtype": "float16", "v_dtype": None}
    parse |= {name: "" for name in ops.HASH_FIELDS}
    assert ops.reply_problem("codec.parse", {"ok": True, **parse}) is None  # "no dtype"
    remote = {"length": 1, "fmt": 1, "dtypes": [None], "shape_ranks": [], "shape_dims": []}
    assert ops.reply_problem("proto.remote.read", {"ok": True, **remote}) is None
    bad = {**remote, "shape_dims": [1, "2"]}
    assert "'shape_dims' is not of type ints" in str(
        ops.reply_problem("proto.remote.read", {"ok": True, **bad})
    )
    ipc = {name: [] for name in ops.OPS["key.ipc"].reply} | {"keys_chunk_hash": ["00"]}
    assert "'keys_chunk_hash'" in str(ops.reply_problem("key.ipc", {"ok": True, **ipc}))


def _exchange(request: dict[str, Any], reply: dict[str, Any] | None = None) -> None:
    document: dict[str, Any] = {"request": {"id": 2, **request}}
    if reply is not None:
        document["reply"] = {"id": 2, **reply}
    validate(document, "testee")


def test_the_schema_holds_requests_and_replies_to_the_table() -> None:
    _exchange({"op": "key.kv_rank", **KV_RANK}, {"ok": True, "kv_rank": 134546433})
    _exchange({"op": "key.kv_rank", **KV_RANK}, {"ok": False, "error": "KVRankFieldError"})
    hello = {"ok": True, "name": "t", "version": None, "protocol": 1, "capabilities": []}
    _exchange({"op": "hello", "protocol": 1}, hello)
    _exchange({"op": "codec.decode", "blob": "4c4d", "out_v_dtype": None})
    _exchange(
        {"op": "key.ipc", **dict.fromkeys(ops.OPS["key.ipc"].required, "")}
        | {"world_size": 1, "worker_id": None, "object_group_ids": [0], "chunk_hashes": "00,"}
    )
    cases = [
        ({"op": "key.kv_rank", **KV_RANK}, {"ok": True}, "$.reply", "missing field(s) kv_rank"),
        ({"op": "key.kv_rank", "world_size": 8}, None, "$.request", "missing field(s) global"),
        ({"op": "codec.parse", "blob": "4C4D"}, None, "$.request.blob", "does not match"),
        ({"op": "codec.parse", "blob": "4c4", "x": 1}, None, "$.request", ""),
        ({"op": "key.nope"}, None, "$.request.op", "unknown op 'key.nope'"),
        ({"op": "key.kv_rank", **KV_RANK}, {"ok": False}, "$.reply", "missing field(s) error"),
        ({"op": "key.kv_rank", **KV_RANK}, {"ok": True, "kv_rank": 1.5}, "$.reply.kv_rank", ""),
    ]
    for request, reply, path, problem in cases:
        with pytest.raises(SchemaError) as caught:
            _exchange(request, reply)
        assert caught.value.path.startswith(path) and problem in caught.value.problem, (
            request,
            str(caught.value),
        )
    with pytest.raises(SchemaError, match=r"missing field\(s\) version, protocol, capabilities"):
        _exchange({"op": "hello", "protocol": 1}, {"ok": True, "name": "t"})


def test_an_in_process_driver_breaking_the_table_is_a_harness_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    driver = load_package("lmckv.reference_impl", name="reference")
    assert driver.call("key.kv_rank", **KV_RANK) == {"ok": True, "kv_rank": 134546433}
    monkeypatch.setattr(driver, "op_key_kv_rank", lambda **_: {"rank": 1})
    with pytest.raises(DriverError, match=r"reply to key\.kv_rank: field 'kv_rank' is missing"):
        driver.call("key.kv_rank", **KV_RANK)


def test_an_exec_reply_breaking_the_table_fails_the_request(tmp_path: Path) -> None:
    script = tmp_path / "sloppy.py"
    script.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    req = json.loads(line)\n"
        "    if req['op'] == 'hello':\n"
        "        out = {'ok': True, 'name': 'sloppy', 'version': None, 'protocol': 1,\n"
        "               'capabilities': ['key.kv_rank']}\n"
        "    else:\n"
        "        out = {'ok': True, 'filename': '00'}\n"
        "    print(json.dumps({'id': req['id'], **out}), flush=True)\n"
    )
    driver = ExecDriver(f"{PY} {script}")
    try:
        reply = driver.call("key.kv_rank", **KV_RANK)
        assert reply["ok"] is False and reply["error"] == "raw:testee-protocol"
        assert reply["message"] == "reply to key.kv_rank: field 'kv_rank' is missing"
        assert driver.stopped is None  # it answered: the circuit breaker does not count it
    finally:
        driver.close()


def test_the_checked_driver_counts_and_logs(tmp_path: Path) -> None:
    log = tmp_path / "schema.jsonl"
    driver = SchemaCheckedDriver(load_package("lmckv.reference_impl", name="reference"), log)
    assert driver.call("key.kv_rank", **KV_RANK)["ok"]
    assert not driver.call("key.kv_rank", **{**KV_RANK, "global_rank": 256})["ok"]
    driver.call("key.kv_rank", world_size="8", **{k: 0 for k in KV_RANK if k != "world_size"})
    assert driver.name == "reference" and driver.supports("key.kv_rank")
    driver.close()
    (line,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["impl"] == "reference" and line["validated"] == 3 and line["violations"] == 1
    assert "$.request.world_size" in line["first_violations"][0]


def test_every_exchange_of_a_run_follows_the_schema(tmp_path: Path) -> None:
    """A run over the reference, upstream and the C testee (the key tests, the header parse
    and the decode of the logical shapes: every operation those tests use, on one process)
    with every exchange validated (the in-process drivers through the wire form, the C
    testee also line by line in the transcript): no violation, and every implementation
    validated many messages. ``nox -s tests`` validates the whole suite's runs the same way
    and checks the log with ``python -m lmckv.conformance.drivers.schema_check``."""
    if importlib.util.find_spec("lmcache") is None:
        upstream_missing("lmcache is not installed, so upstream cannot be run")
    if shutil.which(compiler()) is None:
        pytest.skip(f"no C compiler {compiler()!r} on PATH: the C testee cannot be built")
    log, transcript = tmp_path / "schema.jsonl", tmp_path / "transcript.jsonl"
    run = run_suite(
        ["reference", "upstream", "c"],
        "-p",
        "no:xdist",
        "-k",
        "test_keys or test_parse or test_decode_logical_shape",
        "--transcript",
        str(transcript),
        env={ENV: str(log)},
    )
    assert run.results.get("tests"), run.output[-3000:]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    violations = [v for line in lines for v in line["first_violations"]]
    assert sum(line["violations"] for line in lines) == 0, violations
    validated: dict[str, int] = {}
    for line in lines:
        validated[line["impl"]] = validated.get(line["impl"], 0) + line["validated"]
    assert set(validated) == {"reference", "upstream", "c"}
    assert min(validated.values()) > 200, validated
    assert schema_check.main([str(log), "--impl", "c", "--min", "200"]) == 0
    exchanges = [json.loads(line) for line in transcript.read_text().splitlines()]
    replied = [e for e in exchanges if "reply" in e]
    assert len(replied) > 200 and {e["impl"] for e in replied} == {"c"}
    for exchange in replied:
        validate(exchange, "testee")
    ops_seen = {e["request"]["op"] for e in replied}
    assert "hello" in ops_seen and len(ops_seen) > len(ops.OPERATIONS) // 2, ops_seen


def test_the_log_check_fails_on_a_violation_or_a_missing_implementation(tmp_path: Path) -> None:
    log = tmp_path / "schema.jsonl"
    line = {"impl": "reference", "pid": 1, "validated": 600, "violations": 0}
    log.write_text(json.dumps({**line, "first_violations": []}) + "\n")
    assert schema_check.main([str(log), "--impl", "reference", "--min", "500"]) == 0
    assert schema_check.main([str(log), "--impl", "c"]) == 1  # c validated nothing
    bad = {**line, "violations": 1, "first_violations": ["codec.parse: $.blob is not bytes"]}
    log.write_text(log.read_text() + json.dumps(bad) + "\n")
    assert schema_check.main([str(log), "--impl", "reference"]) == 1
