"""The table of testee operations (TESTEE.md, "Operations" and "hello").

One :class:`Operation` per operation: the request fields it requires and the ones it may
take, the fields of its ``ok`` reply, the fields that may be ``null``, and the capability
flags that cover optional request fields. Everything else is derived from this table: the
capability list a hello may declare, the drivers' reply check (:func:`reply_problem`), the
case builders' field lists, the JSON Schema of the testee messages
(conformance/core/testee_schema.py, shipped as schemas/testee.schema.json) and TESTEE.md's
tables (held to it by tests/test_testee_operations.py). Field types are the protocol's one
table, conformance/core/wire.py.

Adding an operation is one entry in :data:`TABLE` (plus its driver method and TESTEE.md
section); then regenerate the schema with ``python -m lmckv.conformance.core.testee_schema
--write``.

An operation's name is also the capability that declares it. A capability flag is not an
operation: it declares that an operation honours an optional part of its request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .blob_model import HASH_KEYS as HASH_FIELDS
from .wire import FIELD_TYPES, FieldType

#: The hash gate's request fields: this prefix and a hash name.
EXPECT_PREFIX = "expect_"
EXPECT_FIELDS = tuple(EXPECT_PREFIX + name for name in HASH_FIELDS)
#: The header's ids and geometry (SPEC KV-IDS, KV-GEOMETRY), as codec fields.
HEADER_GEOMETRY = ("layer_id", "chunk_id", "chunk_size", "page_size", "kv_head_count", "head_dim")
#: An object key: required fields, then the ones with defaults (TESTEE.md, "Key operations").
OBJECT_KEY = ("chunk_hash", "model_name", "kv_rank")
OBJECT_KEY_DEFAULTED = ("object_group_id", "cache_salt")
#: The fields of a hello reply (TESTEE.md, "hello").
HELLO_REPLY = ("name", "version", "protocol", "capabilities")
#: Framing fields every reply may hold besides the operation's own.
REPLY_FRAMING = ("id", "ok")
ERROR_FIELDS = ("error", "message")


@dataclass(frozen=True)
class Operation:
    """One testee operation: its request and reply fields (types: wire.FIELD_TYPES)."""

    name: str
    #: request fields that must be present
    required: tuple[str, ...]
    #: request fields that may be absent (or null)
    optional: tuple[str, ...] = ()
    #: the fields of an ``ok`` reply, all present
    reply: tuple[str, ...] = ()
    #: fields (request or reply) whose value may be null although required (besides the
    #: dtype names, :data:`DTYPE_FIELDS`)
    nullable: frozenset[str] = frozenset()
    #: ``names`` fields whose items may be null (besides :data:`DTYPE_LISTS`)
    null_items: frozenset[str] = frozenset()
    #: capability flag -> the optional request fields it covers
    flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: fields a failed reply carries beside ``error`` and ``message`` (each may be null)
    on_error: tuple[str, ...] = ()

    @property
    def request(self) -> tuple[str, ...]:
        """Every request field, required first."""
        return (*self.required, *self.optional)


def _op(name: str, required: tuple[str, ...], reply: tuple[str, ...], **more: Any) -> Operation:
    return Operation(name, required, reply=reply, **more)


#: Dtype name fields: any may be null, "no dtype" (a reply says what the reader found; the
#: suite, not the table, judges whether that is right).
DTYPE_FIELDS = frozenset(
    {"dtype", "k_dtype", "v_dtype", "scale_dtype", "scales_dtype", "out_v_dtype"}
)
#: Dtype name lists: their items may be null.
DTYPE_LISTS = frozenset({"dtypes"})
_LOCATION = frozenset({"location"})
_KEY_OPTIONAL = {"optional": OBJECT_KEY_DEFAULTED}
_KEY_REPLY = (*OBJECT_KEY, *OBJECT_KEY_DEFAULTED)
#: serde.deserialize's output slots (dtype and shape of each; null: no slot).
_SLOTS = ("k_out_dtype", "k_out_shape", "v_out_dtype", "v_out_shape")
#: serde.estimate's layouts, as key.layout's fields (null: no layout).
_LAYOUTS = tuple(f"{s}_layout_{n}" for s in "kv" for n in ("dtypes", "ranks", "dims"))

#: Every operation of protocol version 1, in TESTEE.md's order.
TABLE: tuple[Operation, ...] = (
    _op(
        "codec.parse",
        ("blob",),
        (
            "scale_scope",
            "k_dtype",
            "v_dtype",
            "scale_dtype",
            *HEADER_GEOMETRY,
            "scale_shape",
            "k_payload_len",
            "v_payload_len",
            "scale_payload_len",
            "header_len",
            *HASH_FIELDS,
        ),
        optional=("allow_trailing", *EXPECT_FIELDS),
        # codec.v2 covers no field: the blob may be a v2 (RAW_UNIT) one, which the reader
        # reads; without it the reader is a v1 reader and refuses every v2 blob (KV-VERSION).
        flags={"codec.hash_gate": EXPECT_FIELDS, "codec.v2": ()},
    ),
    _op(
        "codec.decode",
        ("blob",),
        (
            "k",
            "v",
            "scales",
            "k_dtype",
            "v_dtype",
            "scales_dtype",
            "k_shape",
            "v_shape",
            "scales_shape",
        ),
        optional=("out_v_dtype",),
        flags={"codec.dequant": ("out_v_dtype",)},
    ),
    _op(
        "codec.encode",
        ("k", "v", "dtype", "shape", "scale_scope"),
        ("blob",),
        optional=(
            "head_axis",
            "page_axis",
            "scale_dtype",
            *HEADER_GEOMETRY,
            *HASH_FIELDS,
            "v_scales",
            "scales_shape",
        ),
        flags={"codec.encode_scales": ("v_scales",)},
    ),
    _op(
        "proto.client.write",
        ("command", "key", "length", "fmt", "dtype", "location", "shape"),
        ("msg",),
        nullable=_LOCATION,
    ),
    _op(
        "proto.client.read",
        ("msg",),
        ("command", "length", "fmt", "key", "key_kind", "dtype", "location", "shape"),
        nullable=_LOCATION,
    ),
    _op(
        "proto.server.write",
        ("code", "length", "fmt", "dtype", "location", "shape"),
        ("msg",),
        nullable=_LOCATION,
    ),
    _op(
        "proto.server.read",
        ("msg",),
        ("code", "length", "fmt", "dtype", "location", "shape"),
        nullable=_LOCATION,
    ),
    _op(
        "proto.remote.write",
        ("num_groups", "length", "fmt", "dtypes", "shape_ranks", "shape_dims"),
        ("msg",),
    ),
    _op(
        "proto.remote.read",
        ("num_groups", "msg"),
        ("length", "fmt", "dtypes", "shape_ranks", "shape_dims"),
    ),
    _op(
        "key.cache.write",
        ("model_name", "world_size", "worker_id", "chunk_hash_int", "dtype"),
        ("key",),
        optional=("layer_id", "tag_names", "tag_values"),
    ),
    _op(
        "key.cache.read",
        ("key",),
        (
            "key_kind",
            "model_name",
            "world_size",
            "worker_id",
            "chunk_hash_int",
            "dtype",
            "layer_id",
            "tag_names",
            "tag_values",
        ),
        nullable=frozenset({"layer_id"}),
    ),
    _op("key.object.new", OBJECT_KEY, _KEY_REPLY, **_KEY_OPTIONAL),
    _op(
        "key.kv_rank",
        ("world_size", "global_rank", "local_world_size", "local_rank"),
        ("kv_rank",),
    ),
    _op("key.encoded.write", OBJECT_KEY, ("json_text",), **_KEY_OPTIONAL),
    _op("key.encoded.read", ("json_text",), _KEY_REPLY),
    _op("key.fs.write", OBJECT_KEY, ("filename",), **_KEY_OPTIONAL),
    _op("key.fs.read", ("filename",), _KEY_REPLY),
    _op("key.s3.write", OBJECT_KEY, ("object_name",), **_KEY_OPTIONAL),
    _op("key.s3.read", ("object_name",), _KEY_REPLY),
    _op(
        "key.ipc",
        ("model_name", "world_size", "worker_id", "cache_salt", "chunk_hashes", "object_group_ids"),
        (
            "group_sizes",
            "keys_chunk_hash",
            "keys_kv_rank",
            "keys_object_group_id",
            "keys_model_name",
            "keys_cache_salt",
        ),
        nullable=frozenset({"worker_id"}),
    ),
    _op("key.window", ("windows", "object_group_id"), ("num_object_groups", "full_attention")),
    _op(
        "key.window.hit",
        ("windows", "object_group_id", "num_prefix_chunks"),
        ("required_chunks",),
    ),
    _op(
        "key.layout",
        ("dtypes", "shape_ranks", "shape_dims"),
        ("dtypes", "shape_ranks", "shape_dims"),
    ),
    # -- serde (TESTEE.md, "Serde operations"): one (K, V) group <-> one blob; a failed
    # call's reply also carries the destination or slots, so that a refusal is seen to
    # have written nothing
    _op(
        "serde.serialize",
        ("mode", "scale_scope", "dtype", "shape", "k", "v", "capacity", "fill", "k_dtype_tag"),
        ("written", "dst"),
        optional=("scale_dtype",),
        nullable=frozenset({"k", "v", "k_dtype_tag"}),
        on_error=("dst",),
    ),
    _op(
        "serde.deserialize",
        ("mode", "scale_scope", "src", "fill", *_SLOTS),
        ("k_out", "v_out"),
        optional=("scale_dtype",),
        nullable=frozenset({*_SLOTS, "k_out", "v_out"}),
        on_error=("k_out", "v_out"),
    ),
    _op(
        "serde.estimate",
        ("mode", "scale_scope", "k_dtype_tag", *_LAYOUTS),
        ("size",),
        optional=("scale_dtype",),
        nullable=frozenset({"k_dtype_tag", *_LAYOUTS}),
    ),
)

#: Operation name -> its entry.
OPS: dict[str, Operation] = {op.name: op for op in TABLE}
#: Every operation of the protocol; its name is also the capability that declares it.
OPERATIONS: tuple[str, ...] = tuple(OPS)
#: Flag -> the operation whose optional request fields it covers.
CAPABILITY_FLAGS: dict[str, str] = {flag: op.name for op in TABLE for flag in op.flags}
#: Everything a hello may declare: operations, then flags.
CAPABILITIES: tuple[str, ...] = (*OPERATIONS, *CAPABILITY_FLAGS)


def field_type(name: str) -> FieldType:
    """The wire type of a field (one type per name, whatever the operation)."""
    return FIELD_TYPES[name]


def nullable(op: Operation, name: str) -> bool:
    """Field ``name`` of ``op`` may be null: an optional request field, one the table says
    may be null, or a dtype name (``null`` means "no dtype", TESTEE.md "Field types")."""
    return name in op.optional or name in op.nullable or name in DTYPE_FIELDS


def null_items(op: Operation, name: str) -> bool:
    """The items of ``names`` field ``name`` may be null (dtype lists: "no dtype")."""
    return name in op.null_items or name in DTYPE_LISTS


def _value_problem(op: Operation, name: str, value: Any) -> str | None:
    """Why a suite value does not fit field ``name`` of ``op`` (None: it fits)."""
    if value is None:
        return None if nullable(op, name) else "is null"
    kind = FIELD_TYPES[name]
    if kind in (FieldType.INT, FieldType.BOOL):
        want: type | tuple[type, ...] = bool if kind is FieldType.BOOL else int
        ok = isinstance(value, want) and (kind is FieldType.BOOL or not isinstance(value, bool))
    elif kind is FieldType.INTS:
        ok = isinstance(value, (list, tuple)) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        )
    elif kind is FieldType.BYTES:
        ok = isinstance(value, (bytes, bytearray, memoryview))
    elif kind in (FieldType.TEXT, FieldType.NAME):
        ok = isinstance(value, str)
    elif kind is FieldType.BYTES_LIST:
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, bytes) for v in value)
    elif kind is FieldType.TEXT_LIST:
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
    else:  # NAMES
        ok = isinstance(value, (list, tuple)) and all(
            isinstance(v, str) or (v is None and null_items(op, name)) for v in value
        )
    return None if ok else f"is not of type {kind.value} (got {type(value).__name__})"


def reply_problem(op_name: str, reply: Mapping[str, Any]) -> str | None:
    """Why ``reply`` (suite values, as a driver returns it) is not a well-formed reply to
    ``op_name``, naming the field; None when it is. An ``ok`` reply holds exactly the
    operation's reply fields, each of its type; a failed one holds ``error`` (a string)
    and optionally ``message``."""
    op = OPS.get(op_name)
    if op is None:
        return None  # not an operation of the table (a driver's own refusal): nothing to hold
    ok = reply.get("ok")
    if not isinstance(ok, bool):
        return f"reply to {op_name}: field 'ok' is missing or not a bool"
    if not ok:
        if not isinstance(reply.get("error"), str):
            return f"reply to {op_name}: field 'error' is missing or not a string"
        known = {*REPLY_FRAMING, *ERROR_FIELDS, *op.on_error}
        extra = sorted(set(reply) - known)
        if extra:
            return f"reply to {op_name}: field {extra[0]!r} is not a field of an error reply"
        for name in op.on_error:
            if reply.get(name) is not None:
                problem = _value_problem(op, name, reply[name])
                if problem is not None:
                    return f"reply to {op_name}: field {name!r} {problem}"
        return None
    own = {name: value for name, value in reply.items() if name not in REPLY_FRAMING}
    for name in op.reply:
        if name not in own:
            return f"reply to {op_name}: field {name!r} is missing"
        problem = _value_problem(op, name, own[name])
        if problem is not None:
            return f"reply to {op_name}: field {name!r} {problem}"
    extra = sorted(set(own) - set(op.reply))
    if extra:
        return f"reply to {op_name}: field {extra[0]!r} is not a field of this reply"
    return None
