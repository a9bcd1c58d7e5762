"""The testee wire encoding and its documentation (conformance/TESTEE.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmckv.conformance.core.operations import CAPABILITIES
from lmckv.conformance.core.wire import (
    FIELD_TYPES,
    WireError,
    dumps_line,
    from_manifest,
    loads_line,
    to_manifest,
)

TESTEE_MD = Path(__file__).resolve().parents[1] / "conformance" / "TESTEE.md"

SAMPLE = {
    "id": 3,
    "op": "key.ipc",
    "ok": True,
    "blob": b"\x00\xffLMCKV",
    "model_name": "mödél/ü\U0001f600",
    "chunk_hashes": [b"\x01\x23", b"", b"\xde\xad"],
    "tag_names": ["a", "é", ""],
    "shape": [2, -1, 0],
    "dtypes": ["bfloat16", None],
    "worker_id": None,
    "allow_trailing": False,
}


def test_line_round_trip() -> None:
    line = dumps_line(SAMPLE)
    assert line.endswith("\n") and line.count("\n") == 1
    assert line.isascii() and "\\" not in line
    assert loads_line(line) == SAMPLE


def test_manifest_round_trip() -> None:
    assert from_manifest(to_manifest(SAMPLE)) == SAMPLE


@pytest.mark.parametrize(
    "line",
    [
        '{"blob": "zz"}',
        '{"shape": [1, true]}',
        '{"no_such_field": 1}',
        '{"id": "7"}',
        "[1, 2]",
        "not json",
    ],
)
def test_bad_lines_are_wire_errors(line: str) -> None:
    with pytest.raises(WireError):
        loads_line(line)


def test_testee_md_documents_every_operation_and_field() -> None:
    text = TESTEE_MD.read_text(encoding="utf-8")
    missing_ops = [op for op in CAPABILITIES if f"`{op}`" not in text and f"**{op}**" not in text]
    missing_fields = [f for f in FIELD_TYPES if f"`{f}`" not in text]
    assert not missing_ops, missing_ops
    assert not missing_fields, missing_fields
