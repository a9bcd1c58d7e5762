"""Protocol vectors: ClientMetaMessage, ServerMetaMessage, RemoteMetadata
(golden_blobs/v1/protocol.json and protocol/).

Valid messages come in pairs: ``-write`` (fields -> the golden bytes) and ``-read`` (the
golden bytes -> fields). Hand-packed messages cover what no writer produces: unknown ids,
wrong lengths, bad key padding. Invalid writes cover what a writer must refuse.
"""

from __future__ import annotations

import struct
from typing import Any

from .common import FileSet
from .op_vectors import OpVectors

PROTOCOL = "ProtocolError"
INT32_MAX = 2**31 - 1
COMMANDS = {1: "put", 2: "get", 3: "exist", 4: "list", 5: "health"}
DTYPES = [
    None,
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "uint8",
    "float8_e4m3fn",
    "float8_e5m2",
]
LOCATIONS = [None, "LocalCPUBackend", "LocalDiskBackend"]
FMTS = list(range(9))
SHAPES = [
    [2, 32, 256, 1024],
    [9],
    [16, 2, 128],
    [2, 7],
    [2, 1, 16, 576],
    [0],
    [4, 0, 0, 0],
    [INT32_MAX, 1, 1, 1],
    [3, 5, 7],
]
KEYS = [
    "meta-llama/Llama-3.1-8B@8@3@1a2b3c4d5e6f@bfloat16",
    "org/m@4@1@abc@bfloat16",
    "m@1@0@-7f3a@half@12",
    "m@2@1@ff@half@lmcache.x%1@sess%a%b",
    "Qwen/Qwen2.5-7B@1@0@0@float@0@tenant%42",
    "mödél/ünïcødé@1@0@deadbeef@fp8_e4m3fn",
]

NOTES = {
    "command": "Covers a client command.",
    "code": "Covers a server return code.",
    "dtype": "Covers dtype ids.",
    "location": "Covers location ids.",
    "fmt": "Covers memory formats.",
    "rank": "Covers a shape rank (0-4 dims, with padding).",
    "lossy-padding": "A trailing zero dimension is indistinguishable from padding "
    "(PROTO-SHAPE-PAD): [4, 0] reads back as [4].",
    "binary": "BINARY/BINARY_BUFFER keep all four slots.",
    "extreme": "int32 extremes.",
    "key": "Key field content: layers, tags, UTF-8, 150 bytes.",
    "groups": "RemoteMetadata group count.",
    "hand-packed": "Bytes no conforming writer produces.",
    "length": "Buffer length.",
    "legacy-dtype": "Dtype id 1, the legacy float16 alias (read only).",
    "padding": "Key-field padding and whitespace.",
    "byte-order": "Fields written big-endian.",
    "assert-only": "Upstream checks this with assert only (gone under python -O).",
    "truncation": "Upstream would silently cut or wrap the value.",
}


def client_bytes(
    command: int,
    length: int,
    fmt: int,
    dtype: int,
    location: int,
    shape: list[int],
    key: bytes,
    order: str = "<",
) -> bytes:
    """A ClientMetaMessage packed by hand (PROTO-CLIENT-LAYOUT)."""
    return struct.pack(f"{order}9i", command, length, fmt, dtype, location, *shape) + key


def server_bytes(
    code: int, length: int, fmt: int, dtype: int, shape: list[int], location: int
) -> bytes:
    """A ServerMetaMessage packed by hand (PROTO-SERVER-LAYOUT)."""
    return struct.pack("<9i", code, length, fmt, dtype, *shape, location)


#: ClientMetaMessage fields in wire order (SPEC.md, "ClientMetaMessage").
CLIENT_FIELDS = (
    "command",
    "length",
    "fmt",
    "dtype",
    "location",
    "shape[0]",
    "shape[1]",
    "shape[2]",
    "shape[3]",
    "key",
)


def client_fields(msg: bytes, order: str = "<") -> dict[str, object]:
    """A 186-byte ClientMetaMessage split into its fields."""
    return dict(zip(CLIENT_FIELDS, struct.unpack(f"{order}9i150s", msg), strict=True))


def client_edit(parent: bytes, child: bytes) -> dict[str, Any]:
    """The ``edit`` of a hand-packed client message made from ``parent``."""
    if len(child) < len(parent) and parent.startswith(child):
        return {"truncated_at": len(child)}
    if len(child) > len(parent) and child.startswith(parent):
        return {"appended": len(child) - len(parent)}
    if child == struct.pack(">9i", *struct.unpack("<9i", parent[:36])) + parent[36:]:
        return {"fields": ["byte_order"]}
    old, new = client_fields(parent), client_fields(child)
    return {"fields": [name for name in CLIENT_FIELDS if old[name] != new[name]]}


def _pad(key: str) -> bytes:
    return key.encode().ljust(150, b" ")


def _pair(
    ov: OpVectors,
    vid: str,
    rule: str,
    comment: str,
    op: str,
    req: dict[str, Any],
    flags: list[str],
    read_extra: dict[str, Any] | None = None,
) -> None:
    """A write vector and the read vector of its output."""
    got = ov.add(f"{vid}-write", rule, comment, f"{op}.write", req, flags=flags)
    ov.add(
        f"{vid}-read",
        rule,
        comment,
        f"{op}.read",
        {**(read_extra or {}), "msg": got["msg"]},
        flags=flags,
    )


def client_messages(ov: OpVectors) -> None:
    rule = "PROTO-CLIENT-LAYOUT"
    for i in range(18):
        command = 1 + i % 5
        fmt = FMTS[i % 9]
        shape = SHAPES[i % len(SHAPES)]
        dtype = DTYPES[i % len(DTYPES)]
        location = LOCATIONS[i % 3]
        key = KEYS[i % len(KEYS)]
        flags = ["command", "dtype", "location", "fmt", "rank", "key"]
        if fmt in (4, 5):
            flags.append("binary")
        elif len(shape) > 1 and shape[-1] == 0:
            flags.append("lossy-padding")
        _pair(
            ov,
            f"proto-client-{i:02d}-{COMMANDS[command]}",
            rule,
            f"{COMMANDS[command].upper()} key {key!r}, fmt {fmt}, dtype {dtype}, location "
            f"{location}, shape {shape}",
            "proto.client",
            {
                "command": command,
                "key": key,
                "length": 4096 * i,
                "fmt": fmt,
                "dtype": dtype,
                "location": location,
                "shape": shape,
            },
            flags,
        )
    _pair(
        ov,
        "proto-client-extremes",
        "PROTO-INT32",
        "length and dims at int32 max",
        "proto.client",
        {
            "command": 1,
            "key": KEYS[1],
            "length": INT32_MAX,
            "fmt": 4,
            "dtype": "uint8",
            "location": None,
            "shape": [INT32_MAX, 0, 0, 0],
        },
        ["extreme", "binary"],
    )
    _pair(
        ov,
        "proto-client-lossy-4-0",
        "PROTO-SHAPE-PAD",
        "shape [4, 0] is written 4 0 0 0 and reads back as [4] (documented loss)",
        "proto.client",
        {
            "command": 1,
            "key": KEYS[1],
            "length": 0,
            "fmt": 3,
            "dtype": "float16",
            "location": None,
            "shape": [4, 0],
        },
        ["lossy-padding"],
    )
    _pair(
        ov,
        "proto-client-rank-0",
        "PROTO-SHAPE-PAD",
        "a 0-d shape is written 0 0 0 0 and reads back as [0]",
        "proto.client",
        {
            "command": 2,
            "key": KEYS[1],
            "length": 0,
            "fmt": 0,
            "dtype": None,
            "location": None,
            "shape": [],
        },
        ["lossy-padding", "rank"],
    )
    max_key = "m@1@0@" + "a" * 139 + "@half"
    assert len(max_key) == 150
    _pair(
        ov,
        "proto-client-key-150-bytes",
        "PROTO-KEY-LENGTH",
        "a key of exactly 150 bytes fills the field without padding",
        "proto.client",
        {
            "command": 1,
            "key": max_key,
            "length": 1,
            "fmt": 1,
            "dtype": "float16",
            "location": None,
            "shape": [1],
        },
        ["key"],
    )
    multi = "m" + "é" * 69 + "@1@0@5@half"
    _pair(
        ov,
        "proto-client-key-multibyte",
        "PROTO-KEY-LENGTH",
        f"a {len(multi)}-character key of {len(multi.encode())} UTF-8 bytes",
        "proto.client",
        {
            "command": 1,
            "key": multi,
            "length": 1,
            "fmt": 1,
            "dtype": "float16",
            "location": None,
            "shape": [1],
        },
        ["key"],
    )


def client_read_only(ov: OpVectors) -> None:
    """Hand-packed messages: valid ones no writer emits, and invalid ones."""
    key = _pad(KEYS[1])
    ok = [
        (
            "proto-client-read-legacy-dtype-1",
            "PROTO-DTYPE-ID",
            "dtype id 1 reads as float16",
            client_bytes(1, 8, 1, 1, 0, [2, 4, 0, 0], key),
            ["legacy-dtype", "hand-packed"],
        ),
        (
            "proto-client-read-leading-space",
            "PROTO-KEY-FIELD",
            "key ' m@...': only trailing 0x20 is padding, the leading space is part of the model",
            client_bytes(2, 0, 0, 0, 0, [1, 0, 0, 0], _pad(" m@1@0@5@half")),
            ["padding", "hand-packed"],
        ),
        (
            "proto-client-read-leading-tab",
            "PROTO-KEY-FIELD",
            "key '\\tm@...': a tab is not padding",
            client_bytes(2, 0, 0, 0, 0, [1, 0, 0, 0], _pad("\tm@1@0@5@half")),
            ["padding", "hand-packed"],
        ),
    ]
    for vid, rule, comment, msg, flags in ok:
        ov.add(vid, rule, comment, "proto.client.read", {"msg": msg}, flags=flags)
    good = client_bytes(2, 64, 1, 2, 1, [2, 4, 0, 0], key)
    bad: list[tuple[str, str, str, bytes, list[str]]] = [
        ("length-185", "PROTO-EXACT-LENGTH", "185 bytes", good[:-1], ["length"]),
        ("length-187", "PROTO-EXACT-LENGTH", "187 bytes", good + b" ", ["length"]),
        ("length-36", "PROTO-EXACT-LENGTH", "only the 36 integer bytes", good[:36], ["length"]),
        ("length-0", "PROTO-EXACT-LENGTH", "empty buffer", b"", ["length"]),
        (
            "command-0",
            "PROTO-COMMAND-ID",
            "command 0",
            client_bytes(0, 64, 1, 2, 1, [2, 4, 0, 0], key),
            [],
        ),
        (
            "command-6",
            "PROTO-COMMAND-ID",
            "command 6",
            client_bytes(6, 64, 1, 2, 1, [2, 4, 0, 0], key),
            [],
        ),
        ("fmt-9", "PROTO-FMT-ID", "fmt 9", client_bytes(2, 64, 9, 2, 1, [2, 4, 0, 0], key), []),
        (
            "fmt-minus-1",
            "PROTO-FMT-ID",
            "fmt -1",
            client_bytes(2, 64, -1, 2, 1, [2, 4, 0, 0], key),
            [],
        ),
        (
            "dtype-9",
            "PROTO-DTYPE-ID",
            "dtype 9",
            client_bytes(2, 64, 1, 9, 1, [2, 4, 0, 0], key),
            [],
        ),
        (
            "dtype-minus-1",
            "PROTO-DTYPE-ID",
            "dtype -1",
            client_bytes(2, 64, 1, -1, 1, [2, 4, 0, 0], key),
            [],
        ),
        (
            "location-3",
            "PROTO-LOCATION-ID",
            "location 3",
            client_bytes(2, 64, 1, 2, 3, [2, 4, 0, 0], key),
            [],
        ),
        (
            "length-negative",
            "PROTO-LENGTH-NONNEG",
            "length -5",
            client_bytes(2, -5, 1, 2, 1, [2, 4, 0, 0], key),
            [],
        ),
        (
            "shape-negative",
            "PROTO-SHAPE-DIMS",
            "shape [-3]",
            client_bytes(2, 64, 1, 2, 1, [-3, 0, 0, 0], key),
            [],
        ),
        (
            "key-all-padding",
            "PROTO-KEY-FIELD",
            "key field of 150 spaces",
            client_bytes(2, 64, 1, 2, 1, [2, 4, 0, 0], b" " * 150),
            ["padding"],
        ),
        (
            "key-nul-padded",
            "PROTO-KEY-FIELD",
            "key padded with NUL bytes instead of spaces",
            client_bytes(2, 64, 1, 2, 1, [2, 4, 0, 0], KEYS[1].encode().ljust(150, b"\0")),
            ["padding"],
        ),
        (
            "key-not-utf8",
            "PROTO-KEY-FIELD",
            "key bytes ff fe",
            client_bytes(2, 64, 1, 2, 1, [2, 4, 0, 0], b"\xff\xfe".ljust(150, b" ")),
            [],
        ),
        (
            "key-split-utf8",
            "PROTO-KEY-FIELD",
            "a multi-byte character cut by the 150-byte limit",
            client_bytes(
                2, 64, 1, 2, 1, [2, 4, 0, 0], ("m@1@0@5@half@t%" + "é" * 68).encode()[:150]
            ),
            ["truncation"],
        ),
        (
            "key-too-few-fields",
            "KEY-CACHE-FORM",
            "key 'm@1@0' (three fields)",
            client_bytes(2, 64, 1, 2, 1, [2, 4, 0, 0], _pad("m@1@0")),
            [],
        ),
        (
            "big-endian",
            "PROTO-BYTE-ORDER",
            "all integers big-endian. Two rules apply: read little-endian, fmt 1 becomes "
            "0x01000000, so a reader may report PROTO-FMT-ID (or another id rule) first",
            client_bytes(2, 64, 1, 2, 1, [2, 4, 0, 0], key, ">"),
            ["byte-order"],
        ),
    ]
    parent = "proto-client-read-parent"
    ov.add(
        parent,
        "PROTO-CLIENT-LAYOUT",
        "the valid message the hand-packed invalid ones below are edited from",
        "proto.client.read",
        {"msg": good},
        flags=["hand-packed"],
    )
    for name, rule, comment, msg, flags in bad:
        ov.add(
            f"proto-client-read-{name}",
            rule,
            comment,
            "proto.client.read",
            {"msg": msg},
            result="invalid",
            error=PROTOCOL,
            flags=["hand-packed", *flags],
            parent=parent,
            edit=client_edit(good, msg),
            alt_rules=["PROTO-FMT-ID", "PROTO-COMMAND-ID"] if name == "big-endian" else None,
        )
    for name, op, msg in [
        ("client-ff", "proto.client.read", b"\xff" * 186),
        ("server-ff", "proto.server.read", b"\xff" * 36),
        ("client-zero", "proto.client.read", bytes(186)),
    ]:
        ov.add(
            f"proto-typed-errors-{name}",
            "PROTO-TYPED-ERRORS",
            f"{len(msg)} bytes of 0x{msg[0]:02x}: every field invalid at once, still a "
            "ProtocolError. Every field rule applies; the vector is about the error being "
            "typed, so a reader may name any of them",
            op,
            {"msg": msg},
            result="invalid",
            error=PROTOCOL,
            flags=["hand-packed"],
            alt_rules=[
                "PROTO-COMMAND-ID",
                "PROTO-CODE-ID",
                "PROTO-LENGTH-NONNEG",
                "PROTO-FMT-ID",
                "PROTO-DTYPE-ID",
                "PROTO-LOCATION-ID",
                "PROTO-SHAPE-DIMS",
                "PROTO-KEY-FIELD",
            ],
        )


def client_refusals(ov: OpVectors) -> None:
    base = {
        "command": 1,
        "key": KEYS[1],
        "length": 16,
        "fmt": 1,
        "dtype": "float16",
        "location": None,
        "shape": [2, 8],
    }
    cases: list[tuple[str, str, str, dict[str, Any], list[str]]] = [
        (
            "key-151-bytes",
            "PROTO-KEY-LENGTH",
            "a 151-byte ASCII key",
            {"key": "m@1@0@" + "a" * 140 + "@half"},
            ["assert-only"],
        ),
        (
            "key-150-chars-200-bytes",
            "PROTO-KEY-LENGTH",
            "150 characters but 200+ UTF-8 bytes: the limit counts bytes",
            {"key": "m" + "é" * 100 + "@1@0@5@half"},
            ["truncation"],
        ),
        (
            "key-trailing-space",
            "PROTO-KEY-FIELD",
            "a key ending in a space cannot be told from padding",
            {"key": "m@1@0@5@half@t%v "},
            ["padding"],
        ),
        (
            "shape-rank-5",
            "PROTO-SHAPE-RANK",
            "a 5-d shape",
            {"shape": [1, 2, 3, 4, 5]},
            ["assert-only"],
        ),
        ("shape-negative", "PROTO-SHAPE-DIMS", "dimension -1", {"shape": [-1]}, []),
        ("shape-int32-overflow", "PROTO-SHAPE-DIMS", "dimension 2^31", {"shape": [2**31]}, []),
        ("length-int32-overflow", "PROTO-INT32", "length 2^31", {"length": 2**31}, []),
        ("length-negative", "PROTO-LENGTH-NONNEG", "length -1", {"length": -1}, []),
        ("dtype-no-id", "PROTO-DTYPE-ID", "dtype int16 has no id", {"dtype": "int16"}, []),
        (
            "location-unknown",
            "PROTO-LOCATION-ID",
            "location 'S3Backend' has no id",
            {"location": "S3Backend"},
            [],
        ),
    ]
    for name, rule, comment, change, flags in cases:
        ov.add(
            f"proto-client-write-{name}",
            rule,
            comment,
            "proto.client.write",
            {**base, **change},
            result="invalid",
            error=PROTOCOL,
            flags=flags,
        )


def server_messages(ov: OpVectors) -> None:
    for i in range(12):
        code = (200, 400)[i % 2]
        fmt = FMTS[(i * 2) % 9]
        shape = SHAPES[(i + 3) % len(SHAPES)]
        dtype = DTYPES[(i + 1) % len(DTYPES)]
        location = LOCATIONS[i % 3]
        flags = ["code", "dtype", "location", "fmt", "rank"]
        _pair(
            ov,
            f"proto-server-{i:02d}-{code}",
            "PROTO-SERVER-LAYOUT",
            f"code {code}, fmt {fmt}, dtype {dtype}, location {location}, shape {shape}",
            "proto.server",
            {
                "code": code,
                "length": 1000 * i,
                "fmt": fmt,
                "dtype": dtype,
                "location": location,
                "shape": shape,
            },
            flags,
        )
    _pair(
        ov,
        "proto-server-rank-0",
        "PROTO-SHAPE-PAD",
        "a 0-d shape is written 0 0 0 0 and reads back as [0]",
        "proto.server",
        {"code": 400, "length": 0, "fmt": 0, "dtype": None, "location": None, "shape": []},
        ["lossy-padding", "rank"],
    )
    good = server_bytes(200, 64, 1, 2, [9, 0, 0, 0], 2)
    ov.add(
        "proto-server-read-legacy-dtype-1",
        "PROTO-DTYPE-ID",
        "dtype id 1 reads as float16",
        "proto.server.read",
        {"msg": server_bytes(200, 64, 1, 1, [9, 0, 0, 0], 2)},
        flags=["legacy-dtype", "hand-packed"],
    )
    bad = [
        ("length-35", "PROTO-EXACT-LENGTH", "35 bytes", good[:-1]),
        ("length-37", "PROTO-EXACT-LENGTH", "37 bytes", good + b"\0"),
        ("length-5", "PROTO-EXACT-LENGTH", "5 bytes", good[:5]),
        ("code-201", "PROTO-CODE-ID", "code 201", server_bytes(201, 64, 1, 2, [9, 0, 0, 0], 2)),
        ("code-0", "PROTO-CODE-ID", "code 0", server_bytes(0, 64, 1, 2, [9, 0, 0, 0], 2)),
        (
            "location-3",
            "PROTO-LOCATION-ID",
            "location 3",
            server_bytes(200, 64, 1, 2, [9, 0, 0, 0], 3),
        ),
        ("dtype-99", "PROTO-DTYPE-ID", "dtype 99", server_bytes(200, 64, 1, 99, [9, 0, 0, 0], 2)),
        ("fmt-10", "PROTO-FMT-ID", "fmt 10", server_bytes(200, 64, 10, 2, [9, 0, 0, 0], 2)),
        (
            "length-negative",
            "PROTO-LENGTH-NONNEG",
            "length -1",
            server_bytes(200, -1, 1, 2, [9, 0, 0, 0], 2),
        ),
        (
            "shape-negative",
            "PROTO-SHAPE-DIMS",
            "shape [9, -1]",
            server_bytes(200, 64, 1, 2, [9, -1, 0, 0], 2),
        ),
    ]
    for name, rule, comment, msg in bad:
        ov.add(
            f"proto-server-read-{name}",
            rule,
            comment,
            "proto.server.read",
            {"msg": msg},
            result="invalid",
            error=PROTOCOL,
            flags=["hand-packed"],
        )
    base = {
        "code": 200,
        "length": 16,
        "fmt": 1,
        "dtype": "float16",
        "location": None,
        "shape": [2, 8],
    }
    server_refusals: list[tuple[str, str, str, dict[str, Any]]] = [
        ("shape-rank-5", "PROTO-SHAPE-RANK", "a 5-d shape", {"shape": [1, 1, 1, 1, 1]}),
        ("length-negative", "PROTO-LENGTH-NONNEG", "length -3", {"length": -3}),
        ("dtype-no-id", "PROTO-DTYPE-ID", "dtype int32 has no id", {"dtype": "int32"}),
    ]
    for name, rule, comment, change in server_refusals:
        ov.add(
            f"proto-server-write-{name}",
            rule,
            comment,
            "proto.server.write",
            {**base, **change},
            result="invalid",
            error=PROTOCOL,
            flags=[],
        )


def remote_metadata(ov: OpVectors) -> None:
    groups = [
        (1, 1, ["bfloat16"], [[2, 32, 256, 1024]]),
        (2, 1, ["bfloat16", "uint8"], [[2, 8], [16]]),
        (3, 6, ["float16", "float8_e4m3fn", "float32"], [[1, 4, 64, 576], [9], [3, 3, 3]]),
        (
            4,
            4,
            ["uint8", "uint8", "float64", "float8_e5m2"],
            [[128, 0, 0, 0], [7, 0, 0, 0], [1, 2, 3, 4], [5, 0, 0, 0]],
        ),
    ]
    for n, fmt, dtypes, shapes in groups:
        flags = ["groups", "dtype", "fmt", "rank"]
        if fmt in (4, 5):
            flags.append("binary")
        _pair(
            ov,
            f"proto-remote-{n}-groups",
            "PROTO-RMETA-LAYOUT",
            f"{n} group(s), fmt {fmt}, dtypes {dtypes}, shapes {shapes}",
            "proto.remote",
            {
                "num_groups": n,
                "length": 1024 * n,
                "fmt": fmt,
                "dtypes": dtypes,
                "shape_ranks": [len(s) for s in shapes],
                "shape_dims": [d for s in shapes for d in s],
            },
            flags,
            read_extra={"num_groups": n},
        )
    one = struct.pack("<7i", 64, 1, 3, 2, 8, 0, 0)
    ov.add(
        "proto-remote-read-with-payload",
        "PROTO-RMETA-GROUPS",
        "a 1-group header followed by payload bytes: the reader takes the first 28 bytes",
        "proto.remote.read",
        {"num_groups": 1, "msg": one + b"\x5a" * 64},
        flags=["groups", "hand-packed"],
    )
    ov.add(
        "proto-remote-read-binary-buffer-dtype-0",
        "PROTO-RMETA-DTYPE",
        "a BINARY_BUFFER object of 64 bytes with dtype id 0, as upstream's fs_connector "
        "writes it: a byte object needs no dtype",
        "proto.remote.read",
        {"num_groups": 1, "msg": struct.pack("<7i", 64, 5, 0, 64, 0, 0, 0)},
        flags=["groups", "hand-packed"],
    )
    bad = [
        ("short", "PROTO-RMETA-GROUPS", "2 groups configured, 1 group of bytes", 2, one),
        (
            "dtype-0",
            "PROTO-RMETA-DTYPE",
            "a group with dtype id 0",
            1,
            struct.pack("<7i", 64, 1, 0, 2, 8, 0, 0),
        ),
        (
            "dtype-9",
            "PROTO-DTYPE-ID",
            "a group with dtype id 9",
            1,
            struct.pack("<7i", 64, 1, 9, 2, 8, 0, 0),
        ),
        ("fmt-99", "PROTO-FMT-ID", "fmt 99", 1, struct.pack("<7i", 64, 99, 3, 2, 8, 0, 0)),
        (
            "length-negative",
            "PROTO-LENGTH-NONNEG",
            "length -1",
            1,
            struct.pack("<7i", -1, 1, 3, 2, 8, 0, 0),
        ),
        (
            "shape-negative",
            "PROTO-SHAPE-DIMS",
            "dimension -2",
            1,
            struct.pack("<7i", 64, 1, 3, -2, 8, 0, 0),
        ),
        ("groups-0", "PROTO-RMETA-GROUPS", "0 groups configured", 0, one),
    ]
    for name, rule, comment, n, msg in bad:
        ov.add(
            f"proto-remote-read-{name}",
            rule,
            comment,
            "proto.remote.read",
            {"num_groups": n, "msg": msg},
            result="invalid",
            error=PROTOCOL,
            flags=["hand-packed", "groups"],
        )
    base = {
        "num_groups": 2,
        "length": 64,
        "fmt": 1,
        "dtypes": ["bfloat16", "uint8"],
        "shape_ranks": [2, 1],
        "shape_dims": [2, 8, 16],
    }
    remote_refusals: list[tuple[str, str, str, dict[str, Any]]] = [
        (
            "dtype-none",
            "PROTO-RMETA-DTYPE",
            "a group without dtype",
            {"dtypes": ["bfloat16", None]},
        ),
        (
            "groups-mismatch",
            "PROTO-RMETA-GROUPS",
            "3 groups configured, 2 given",
            {"num_groups": 3},
        ),
        (
            "rank-5",
            "PROTO-SHAPE-RANK",
            "a 5-d group shape",
            {"shape_ranks": [5, 1], "shape_dims": [1, 1, 1, 1, 1, 16]},
        ),
    ]
    ov.add(
        "proto-remote-write-binary-buffer-dtype-none",
        "PROTO-RMETA-DTYPE",
        "a BINARY_BUFFER object without dtype (written as id 0), as upstream's fs_connector "
        "writes it",
        "proto.remote.write",
        {
            "num_groups": 1,
            "length": 64,
            "fmt": 5,
            "dtypes": [None],
            "shape_ranks": [4],
            "shape_dims": [64, 0, 0, 0],
        },
        flags=["groups"],
    )
    for name, rule, comment, change in remote_refusals:
        ov.add(
            f"proto-remote-write-{name}",
            rule,
            comment,
            "proto.remote.write",
            {**base, **change},
            result="invalid",
            error=PROTOCOL,
            flags=["groups"],
        )


def build(files: FileSet, driver: Any) -> OpVectors:
    ov = OpVectors(files, "protocol", driver)
    client_messages(ov)
    client_read_only(ov)
    client_refusals(ov)
    server_messages(ov)
    remote_metadata(ov)
    return ov
