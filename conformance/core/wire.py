"""Field types of the testee operations and their JSON-lines wire encoding (TESTEE.md).

Every request and response field has one type, whatever the operation, so one table
describes the whole protocol. Inside the suite, BYTES fields are ``bytes`` and TEXT fields
are ``str``; on the wire both are lowercase hex strings (TEXT as the hex of its UTF-8
bytes), lists of them are comma-joined hex, so a C testee never unescapes a JSON string.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

from lmckv.base.untrusted_json import JSONLimits, UntrustedJSONError, loads

PROTOCOL_VERSION = 1


class FieldType(Enum):
    """How one field travels on the wire (TESTEE.md, "Field types")."""

    INT = "int"
    BOOL = "bool"
    INTS = "ints"
    BYTES = "bytes"
    TEXT = "text"
    BYTES_LIST = "bytes_list"
    TEXT_LIST = "text_list"
    NAME = "name"
    NAMES = "names"


T = FieldType

#: Every field name the protocol uses, with its type. A field may also be ``null``
#: where TESTEE.md says so (an unset optional value).
FIELD_TYPES: dict[str, FieldType] = {
    # framing
    "id": T.INT,
    "op": T.NAME,
    "ok": T.BOOL,
    "error": T.NAME,
    "message": T.NAME,
    # hello
    "name": T.NAME,
    "version": T.NAME,
    "protocol": T.INT,
    "capabilities": T.NAMES,
    # codec
    "blob": T.BYTES,
    "allow_trailing": T.BOOL,
    "expect_model_id": T.TEXT,
    "expect_model_revision_hash": T.TEXT,
    "expect_tokenizer_hash": T.TEXT,
    "expect_rope_config_hash": T.TEXT,
    "expect_attention_backend": T.TEXT,
    "expect_kv_layout": T.TEXT,
    "scale_scope": T.INT,
    "k_dtype": T.NAME,
    "v_dtype": T.NAME,
    "scale_dtype": T.NAME,
    "layer_id": T.INT,
    "chunk_id": T.INT,
    "chunk_size": T.INT,
    "page_size": T.INT,
    "kv_head_count": T.INT,
    "head_dim": T.INT,
    "scale_shape": T.INTS,
    "k_payload_len": T.INT,
    "v_payload_len": T.INT,
    "scale_payload_len": T.INT,
    "header_len": T.INT,
    "model_id": T.TEXT,
    "model_revision_hash": T.TEXT,
    "tokenizer_hash": T.TEXT,
    "rope_config_hash": T.TEXT,
    "attention_backend": T.TEXT,
    "kv_layout": T.TEXT,
    "out_v_dtype": T.NAME,
    "k": T.BYTES,
    "k_shape": T.INTS,
    "v": T.BYTES,
    "v_shape": T.INTS,
    "scales": T.BYTES,
    "scales_dtype": T.NAME,
    "scales_shape": T.INTS,
    "dtype": T.NAME,
    "shape": T.INTS,
    "head_axis": T.INT,
    "page_axis": T.INT,
    "v_scales": T.BYTES,
    # protocol
    "msg": T.BYTES,
    "command": T.INT,
    "code": T.INT,
    "key": T.TEXT,
    "key_kind": T.NAME,
    "length": T.INT,
    "fmt": T.INT,
    "location": T.NAME,
    "num_groups": T.INT,
    "dtypes": T.NAMES,
    "shape_ranks": T.INTS,
    "shape_dims": T.INTS,
    # keys
    "model_name": T.TEXT,
    "world_size": T.INT,
    "worker_id": T.INT,
    "global_rank": T.INT,
    "local_world_size": T.INT,
    "local_rank": T.INT,
    "kv_rank": T.INT,
    "chunk_hash": T.BYTES,
    "chunk_hash_int": T.NAME,
    "object_group_id": T.INT,
    "cache_salt": T.TEXT,
    "tag_names": T.TEXT_LIST,
    "tag_values": T.TEXT_LIST,
    "json_text": T.TEXT,
    "filename": T.TEXT,
    "object_name": T.TEXT,
    "chunk_hashes": T.BYTES_LIST,
    "object_group_ids": T.INTS,
    "group_sizes": T.INTS,
    "keys_chunk_hash": T.BYTES_LIST,
    "keys_kv_rank": T.INTS,
    "keys_object_group_id": T.INTS,
    "keys_model_name": T.TEXT_LIST,
    "keys_cache_salt": T.TEXT_LIST,
    # descriptors
    "windows": T.INTS,
    "num_object_groups": T.INT,
    "full_attention": T.BOOL,
    "num_prefix_chunks": T.INT,
    "required_chunks": T.INTS,
    # serde (TESTEE.md, "Serde operations")
    "mode": T.NAME,
    "k_dtype_tag": T.NAME,
    "capacity": T.INT,
    "fill": T.INT,
    "written": T.INT,
    "dst": T.BYTES,
    "src": T.BYTES,
    "k_out_dtype": T.NAME,
    "k_out_shape": T.INTS,
    "v_out_dtype": T.NAME,
    "v_out_shape": T.INTS,
    "k_out": T.BYTES,
    "v_out": T.BYTES,
    "k_layout_dtypes": T.NAMES,
    "k_layout_ranks": T.INTS,
    "k_layout_dims": T.INTS,
    "v_layout_dtypes": T.NAMES,
    "v_layout_ranks": T.INTS,
    "v_layout_dims": T.INTS,
    "size": T.INT,
}


class WireError(ValueError):
    """A testee sent a line that does not follow TESTEE.md."""


def _hex_list(items: list[bytes]) -> str:
    return ",".join(item.hex() for item in items)


def _unhex_list(text: str) -> list[bytes]:
    return [] if text == "" else [bytes.fromhex(part) for part in text.split(",")]


def to_wire(fields: dict[str, Any]) -> dict[str, Any]:
    """Suite values -> JSON values (bytes and text become hex)."""
    out: dict[str, Any] = {}
    for name, value in fields.items():
        kind = FIELD_TYPES.get(name)
        if kind is None:
            raise WireError(f"field {name!r} is not in the protocol's field table")
        if value is None:
            out[name] = None
        elif kind is T.BYTES:
            out[name] = bytes(value).hex()
        elif kind is T.TEXT:
            out[name] = value.encode("utf-8", "surrogatepass").hex()
        elif kind is T.BYTES_LIST:
            out[name] = _hex_list([bytes(v) for v in value])
        elif kind is T.TEXT_LIST:
            out[name] = _hex_list([v.encode("utf-8", "surrogatepass") for v in value])
        elif kind is T.NAMES:
            out[name] = list(value)
        elif kind is T.INTS:
            out[name] = [int(v) for v in value]
        else:
            out[name] = value
    return out


def _check(name: str, value: Any, ok: bool) -> None:
    if not ok:
        raise WireError(f"field {name!r} has a value of the wrong type: {value!r}")


def from_wire(fields: dict[str, Any]) -> dict[str, Any]:
    """JSON values -> suite values, checking every field's type."""
    out: dict[str, Any] = {}
    for name, value in fields.items():
        kind = FIELD_TYPES.get(name)
        if kind is None:
            raise WireError(f"unknown field {name!r}")
        if value is None:
            out[name] = None
            continue
        try:
            if kind is T.INT:
                _check(name, value, isinstance(value, int) and not isinstance(value, bool))
                out[name] = value
            elif kind is T.BOOL:
                _check(name, value, isinstance(value, bool))
                out[name] = value
            elif kind is T.INTS:
                _check(name, value, isinstance(value, list))
                for v in value:
                    _check(name, value, isinstance(v, int) and not isinstance(v, bool))
                out[name] = list(value)
            elif kind is T.NAME:
                _check(name, value, isinstance(value, str))
                out[name] = value
            elif kind is T.NAMES:
                _check(name, value, isinstance(value, list))
                for v in value:
                    _check(name, value, v is None or isinstance(v, str))
                out[name] = list(value)
            elif kind is T.BYTES:
                _check(name, value, isinstance(value, str))
                out[name] = bytes.fromhex(value)
            elif kind is T.TEXT:
                _check(name, value, isinstance(value, str))
                out[name] = bytes.fromhex(value).decode("utf-8", "surrogatepass")
            elif kind is T.BYTES_LIST:
                _check(name, value, isinstance(value, str))
                out[name] = _unhex_list(value)
            else:
                _check(name, value, isinstance(value, str))
                out[name] = [b.decode("utf-8", "surrogatepass") for b in _unhex_list(value)]
        except ValueError as exc:
            if isinstance(exc, WireError):
                raise
            raise WireError(f"field {name!r}: {exc}") from None
    return out


def dumps_line(fields: dict[str, Any]) -> str:
    """One request or response line: compact JSON, sorted keys, newline-terminated."""
    return json.dumps(to_wire(fields), sort_keys=True, separators=(",", ":")) + "\n"


#: What one line from the other side may hold (lmckv/base/untrusted_json.py): as many bytes
#: as the harness reads for a reply line (MAX_REPLY_LINE), a blob's hex in one string, no
#: deeper nesting or longer numbers than any operation's fields need; NaN and infinities as
#: ``dumps_line`` writes them (Python's json does).
LINE_LIMITS = JSONLimits(
    max_bytes=256 << 20, max_depth=16, max_number_chars=40, max_string_chars=256 << 20,
    allow_nan=True,
)  # fmt: skip


def loads_line(line: str | bytes) -> dict[str, Any]:
    """Parse one line sent by the other side, within :data:`LINE_LIMITS`."""
    try:
        obj = loads(line, LINE_LIMITS, what="a wire line")
    except UntrustedJSONError as exc:
        raise WireError(f"not a JSON line lmckv accepts: {exc}") from None
    if not isinstance(obj, dict):
        raise WireError(f"a line must hold one JSON object: {line[:200]!r}")
    return from_wire(obj)


def to_manifest(fields: dict[str, Any]) -> dict[str, Any]:
    """Suite values -> golden-manifest JSON: bytes as hex, text as plain JSON strings."""
    out: dict[str, Any] = {}
    for name, value in fields.items():
        kind = FIELD_TYPES[name]
        if value is None:
            out[name] = None
        elif kind is T.BYTES:
            out[name] = bytes(value).hex()
        elif kind is T.BYTES_LIST:
            out[name] = [bytes(v).hex() for v in value]
        else:
            out[name] = list(value) if isinstance(value, (list, tuple)) else value
    return out


def from_manifest(fields: dict[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`to_manifest`."""
    out: dict[str, Any] = {}
    for name, value in fields.items():
        kind = FIELD_TYPES[name]
        if value is None:
            out[name] = None
        elif kind is T.BYTES:
            out[name] = bytes.fromhex(value)
        elif kind is T.BYTES_LIST:
            out[name] = [bytes.fromhex(v) for v in value]
        else:
            out[name] = value
    return out
