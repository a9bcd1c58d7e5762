"""Key vectors (golden_blobs/v1/keys.json): CacheEngineKey strings, ObjectKey invariants,
kv_rank packing, EncodedObjectKey JSON, FS filenames, S3/native object names, IPC fan-out,
pairs of keys that must not share a name, and the attention-window and memory-layout
descriptors that travel with keys.
"""

from __future__ import annotations

import json
from typing import Any

from .common import FileSet
from .op_vectors import OpVectors

PROTOCOL = "ProtocolError"
KEYS = "KeyFormatError"
H1 = bytes.fromhex("0123456789abcdef")
H2 = bytes.fromhex("deadbeef00")

NOTES = {
    "layer": "LayerCacheEngineKey (sixth field is a layer id).",
    "tags": "Tags from lmcache.tag.* request configs.",
    "unicode": "Non-ASCII text.",
    "lenient-parse": "A non-canonical spelling a lenient parser (int(), fromhex) accepts.",
    "unparsable-write": "A key a writer must refuse because no reader could parse it back.",
    "invariant": "An ObjectKey field invariant.",
    "overflow": "A kv_rank field outside 0..255 that would spill into its neighbour.",
    "salt": "A cache_salt.",
    "collision": "Two different keys that must not share one name.",
    "sep-alias": "The '/' -> '-SEP-' escape of FS filenames.",
    "fanout": "IPC fan-out of one key over workers and object groups.",
    "json": "EncodedObjectKey JSON members and types.",
    "name-max": "Filename length limit (NAME_MAX).",
    "above-int64": "A value above 2^63 - 1, which fixed-width implementations cannot hold.",
    "not-unicode": "Text that is not Unicode (a lone surrogate: filename bytes that are not "
    "UTF-8, as os.listdir returns them).",
    "allocation": "A count an unchecked implementation would allocate by.",
    "window": "Per-object-group attention windows (AttnWindowDesc).",
    "layout": "Per-group shapes and dtypes (MemoryLayoutDesc).",
}
INT64_MAX = 2**63 - 1


def okey(
    chunk_hash: bytes = H1,
    model_name: str = "meta-llama/Llama-3.1-8B",
    kv_rank: int = 0x08050401,
    object_group_id: int = 0,
    cache_salt: str = "",
) -> dict[str, Any]:
    return {
        "chunk_hash": chunk_hash,
        "model_name": model_name,
        "kv_rank": kv_rank,
        "object_group_id": object_group_id,
        "cache_salt": cache_salt,
    }


def ckey(
    model_name: str = "org/m",
    world_size: int = 4,
    worker_id: int = 1,
    chunk_hash_int: str = "abc",
    dtype: str = "bfloat16",
    layer_id: int | None = None,
    tags: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    return {
        "model_name": model_name,
        "world_size": world_size,
        "worker_id": worker_id,
        "chunk_hash_int": chunk_hash_int,
        "dtype": dtype,
        "layer_id": layer_id,
        "tag_names": [n for n, _ in tags or []],
        "tag_values": [v for _, v in tags or []],
    }


def cache_keys(vectors: OpVectors) -> None:
    valid = [
        ("plain", "KEY-CACHE-FORM", "five fields", ckey(), []),
        ("layer", "KEY-CACHE-LAYER", "layer id 31", ckey(layer_id=31), ["layer"]),
        ("layer-0", "KEY-CACHE-LAYER", "layer id 0", ckey(layer_id=0, dtype="float16"), ["layer"]),
        (
            "tags",
            "KEY-CACHE-TAG",
            "two tags, one value holding '%'",
            ckey(tags=[("sess", "a%b"), ("tenant", "42")]),
            ["tags"],
        ),
        (
            "layer-tags",
            "KEY-CACHE-TAG",
            "layer and a tag",
            ckey(layer_id=3, tags=[("t", "v")]),
            ["layer", "tags"],
        ),
        (
            "negative-hash",
            "KEY-CACHE-HASH",
            "a negative integer hash",
            ckey(chunk_hash_int="-7f3a"),
            [],
        ),
        (
            "unicode-model",
            "KEY-CACHE-MODEL",
            "a non-ASCII model name",
            ckey(model_name="mödél/ünï"),
            ["unicode"],
        ),
        ("fp8-dtype", "KEY-CACHE-DTYPE", "dtype name fp8_e4m3fn", ckey(dtype="float8_e4m3fn"), []),
        (
            "int64-max",
            "KEY-CACHE-INT",
            "world_size int64 max, worker_id negative",
            ckey(world_size=2**63 - 1, worker_id=-1),
            [],
        ),
    ]
    for name, rule, comment, fields, flags in valid:
        got = vectors.add(
            f"key-cache-write-{name}", rule, comment, "key.cache.write", fields, flags=flags
        )
        vectors.add(
            f"key-cache-read-{name}",
            rule,
            comment,
            "key.cache.read",
            {"key": got["key"]},
            flags=flags,
        )
    bad_reads = [
        ("too-few-fields", "KEY-CACHE-FORM", "four fields", "m@1@0@ab", []),
        ("plus-sign", "KEY-CACHE-INT", "world_size '+1'", "m@+1@0@ab@half", ["lenient-parse"]),
        ("space", "KEY-CACHE-INT", "worker_id ' 0'", "m@1@ 0@ab@half", ["lenient-parse"]),
        ("underscore", "KEY-CACHE-INT", "world_size '1_0'", "m@1_0@0@ab@half", ["lenient-parse"]),
        (
            "arabic-digit",
            "KEY-CACHE-INT",
            "world_size U+0661 (Arabic-Indic one)",
            "m@\u0661@0@ab@half",
            ["lenient-parse", "unicode"],
        ),
        ("hash-uppercase", "KEY-CACHE-HASH", "hash 'AB'", "m@1@0@AB@half", ["lenient-parse"]),
        ("hash-0x", "KEY-CACHE-HASH", "hash '0xab'", "m@1@0@0xab@half", ["lenient-parse"]),
        ("hash-empty", "KEY-CACHE-HASH", "empty hash field", "m@1@0@@half", []),
        (
            "dtype-float16",
            "KEY-CACHE-DTYPE",
            "dtype 'float16' (the key table says 'half')",
            "m@1@0@ab@float16",
            [],
        ),
        ("layer-leading-zero", "KEY-CACHE-LAYER", "layer '01'", "m@1@0@ab@half@01", ["layer"]),
        (
            "layer-superscript",
            "KEY-CACHE-LAYER",
            "layer U+00B2 (superscript two)",
            "m@1@0@ab@half@\u00b2",
            ["layer", "unicode"],
        ),
        ("tag-no-percent", "KEY-CACHE-TAG", "tag 'x' without '%'", "m@1@0@ab@half@3@x", ["tags"]),
        ("tag-duplicate", "KEY-CACHE-TAG", "tag 'a' twice", "m@1@0@ab@half@a%1@a%2", ["tags"]),
        (
            "trailing-space",
            "KEY-CACHE-INT",
            "layer '3 ' (readers strip nothing). Two rules apply: the field is the layer, so "
            "a reader may name KEY-CACHE-LAYER",
            "m@1@0@ab@half@3 ",
            ["lenient-parse"],
        ),
    ]
    for name, rule, comment, text, flags in bad_reads:
        vectors.add(
            f"key-cache-read-{name}",
            rule,
            comment,
            "key.cache.read",
            {"key": text},
            result="invalid",
            error=PROTOCOL,
            flags=flags,
            alt_rules=["KEY-CACHE-LAYER"] if name == "trailing-space" else None,
        )
    bad_writes = [
        ("model-at", "KEY-CACHE-MODEL", "model name 'a@b'", ckey(model_name="a@b")),
        (
            "layer-minus-1",
            "KEY-CACHE-LAYER",
            "layer id -1 (its own reader rejects '-1')",
            ckey(layer_id=-1),
        ),
        ("tag-value-at", "KEY-CACHE-TAG", "tag value 'x@y'", ckey(tags=[("t", "x@y")])),
        ("tag-name-percent", "KEY-CACHE-TAG", "tag name 'a%b'", ckey(tags=[("a%b", "1")])),
    ]
    for name, rule, comment, fields in bad_writes:
        vectors.add(
            f"key-cache-write-{name}",
            rule,
            comment,
            "key.cache.write",
            fields,
            result="invalid",
            error=PROTOCOL,
            flags=["unparsable-write"],
        )


def object_keys(vectors: OpVectors) -> None:
    valid = [
        ("default", "KEY-MODEL-CHARS", "an ordinary key", okey(), []),
        ("empty-hash", "KEY-HASH-BYTES", "an empty chunk hash", okey(chunk_hash=b""), []),
        (
            "salt-128",
            "KEY-SALT-LENGTH",
            "a 128-character salt",
            okey(cache_salt="s" * 128),
            ["salt"],
        ),
        (
            "unicode",
            "KEY-MODEL-CHARS",
            "non-ASCII model and salt",
            okey(model_name="mödél/ü", cache_salt="ß-salt"),
            ["unicode", "salt"],
        ),
        ("rank-max", "KEY-KVRANK-WIDTH", "kv_rank 2^32-1", okey(kv_rank=2**32 - 1), []),
        ("group-large", "KEY-GROUP-RANGE", "object_group_id 2^40", okey(object_group_id=2**40), []),
    ]
    for name, rule, comment, fields, flags in valid:
        vectors.add(f"key-object-{name}", rule, comment, "key.object.new", fields, flags=flags)
    invalid = [
        ("model-at", "KEY-MODEL-CHARS", "model name with '@'", okey(model_name="a@b")),
        ("model-nul", "KEY-MODEL-CHARS", "model name with NUL", okey(model_name="a\0b")),
        ("salt-at", "KEY-SALT-CHARS", "salt with '@'", okey(cache_salt="a@b")),
        ("salt-slash", "KEY-SALT-CHARS", "salt with '/'", okey(cache_salt="a/b")),
        ("salt-backslash", "KEY-SALT-CHARS", "salt with '\\'", okey(cache_salt="a\\b")),
        ("salt-nul", "KEY-SALT-CHARS", "salt with NUL", okey(cache_salt="a\0b")),
        ("salt-129", "KEY-SALT-LENGTH", "a 129-character salt", okey(cache_salt="s" * 129)),
        ("group-negative", "KEY-GROUP-RANGE", "object_group_id -1", okey(object_group_id=-1)),
        ("rank-negative", "KEY-KVRANK-WIDTH", "kv_rank -1", okey(kv_rank=-1)),
        ("rank-33-bits", "KEY-KVRANK-WIDTH", "kv_rank 2^32", okey(kv_rank=2**32)),
    ]
    for name, rule, comment, fields in invalid:
        vectors.add(
            f"key-object-{name}",
            rule,
            comment,
            "key.object.new",
            fields,
            result="invalid",
            error=KEYS,
            flags=["invariant"],
        )


def kv_ranks(vectors: OpVectors) -> None:
    valid = [
        ("tp4-pp2-worker5", (8, 5, 4, 1), "TP=4 PP=2, TP worker 1 on node 1: 0x08050401"),
        ("single", (1, 0, 1, 0), "one worker"),
        ("max", (255, 254, 255, 254), "every field at its largest sensible value"),
        ("zeros", (0, 0, 0, 0), "all zero"),
    ]
    for name, (ws, gr, lws, lr), comment in valid:
        vectors.add(
            f"key-kv-rank-{name}",
            "KEY-KVRANK-PACK",
            comment,
            "key.kv_rank",
            {"world_size": ws, "global_rank": gr, "local_world_size": lws, "local_rank": lr},
        )
    invalid = [
        ("world-256", (256, 0, 1, 0), "world_size 256 needs 33 bits"),
        ("global-256", (1, 256, 1, 0), "global_rank 256 collides with (1, 0, 1, 0) + 1 world"),
        ("local-world-256", (1, 0, 256, 0), "local_world_size 256 equals (1, 1, 0, 0)"),
        ("local-rank-256", (1, 0, 1, 256), "local_rank 256 spills into local_world_size"),
        ("negative", (-1, 0, 1, 0), "world_size -1"),
    ]
    for name, (ws, gr, lws, lr), comment in invalid:
        vectors.add(
            f"key-kv-rank-{name}",
            "KEY-KVRANK-RANGE",
            comment,
            "key.kv_rank",
            {"world_size": ws, "global_rank": gr, "local_world_size": lws, "local_rank": lr},
            result="invalid",
            error=KEYS,
            flags=["overflow"],
        )


def encoded_keys(vectors: OpVectors) -> None:
    for name, fields in [("default", okey()), ("salted", okey(cache_salt="u1", object_group_id=3))]:
        vectors.add(
            f"key-encoded-write-{name}",
            "KEY-ENCODED-FIELDS",
            "ObjectKey -> EncodedObjectKey JSON object",
            "key.encoded.write",
            fields,
            flags=["json"],
        )

    def doc(**members: Any) -> str:
        return json.dumps(members, sort_keys=True)

    full = {
        "chunk_hash_hex": H1.hex(),
        "model_name": "m/x",
        "kv_rank": 5,
        "object_group_id": 2,
        "cache_salt": "s",
    }
    valid = [
        ("full", "all five members", doc(**full)),
        (
            "defaults",
            "only the three required members: group 0, empty salt",
            doc(chunk_hash_hex="00ff", model_name="m", kv_rank=1),
        ),
    ]
    for name, comment, text in valid:
        vectors.add(
            f"key-encoded-read-{name}",
            "KEY-ENCODED-FIELDS",
            comment,
            "key.encoded.read",
            {"json_text": text},
            flags=["json"],
        )
    invalid = [
        (
            "hex-odd",
            "KEY-HEX-CANONICAL",
            "chunk_hash_hex 'abc'",
            doc(**{**full, "chunk_hash_hex": "abc"}),
        ),
        (
            "hex-upper",
            "KEY-HEX-CANONICAL",
            "chunk_hash_hex 'AB'",
            doc(**{**full, "chunk_hash_hex": "AB"}),
        ),
        (
            "hex-space",
            "KEY-HEX-CANONICAL",
            "chunk_hash_hex 'ab cd'",
            doc(**{**full, "chunk_hash_hex": "ab cd"}),
        ),
        (
            "hex-0x",
            "KEY-HEX-CANONICAL",
            "chunk_hash_hex '0xab'",
            doc(**{**full, "chunk_hash_hex": "0xab"}),
        ),
        (
            "missing-rank",
            "KEY-ENCODED-FIELDS",
            "no kv_rank member",
            doc(chunk_hash_hex="ab", model_name="m"),
        ),
        (
            "unknown-member",
            "KEY-ENCODED-FIELDS",
            "an extra member 'tier'",
            doc(**{**full, "tier": 1}),
        ),
        (
            "rank-string",
            "KEY-ENCODED-FIELDS",
            "kv_rank as the string '5'",
            doc(**{**full, "kv_rank": "5"}),
        ),
        ("rank-bool", "KEY-ENCODED-FIELDS", "kv_rank true", doc(**{**full, "kv_rank": True})),
        ("model-at", "KEY-MODEL-CHARS", "model_name 'a@b'", doc(**{**full, "model_name": "a@b"})),
    ]
    for name, rule, comment, text in invalid:
        vectors.add(
            f"key-encoded-read-{name}",
            rule,
            comment,
            "key.encoded.read",
            {"json_text": text},
            result="invalid",
            error=KEYS,
            flags=["json"],
        )


def fs_and_s3(vectors: OpVectors) -> None:
    keys = [
        ("default", okey(), []),
        ("salted", okey(cache_salt="tenant-7", object_group_id=0x1F), ["salt"]),
        ("empty-hash", okey(chunk_hash=b"", model_name="m", kv_rank=0), []),
        ("nested-model", okey(model_name="org/sub/model.v2", chunk_hash=H2), []),
        ("unicode", okey(model_name="mödél/ü", cache_salt="ß"), ["unicode"]),
        ("rank-max", okey(kv_rank=2**32 - 1), []),
    ]
    for form, write_op, read_op, out, rule in [
        ("fs", "key.fs.write", "key.fs.read", "filename", "KEY-FS-FORM"),
        ("s3", "key.s3.write", "key.s3.read", "object_name", "KEY-STRING-FORM"),
    ]:
        for name, fields, flags in keys:
            got = vectors.add(
                f"key-{form}-write-{name}",
                rule,
                f"{form} form of the {name} key",
                write_op,
                fields,
                flags=flags,
            )
            vectors.add(
                f"key-{form}-read-{name}",
                rule,
                f"{form} form of the {name} key read back",
                read_op,
                {out: got[out]},
                flags=flags,
            )
    fs_bad = [
        ("no-0x", "KEY-FS-FORM", "rank without '0x'", "m@08050401@0@0123.data"),
        ("upper-0x", "KEY-HEX-CANONICAL", "rank prefix '0X'", "m@0X08050401@0@0123.data"),
        ("short-rank", "KEY-HEX-CANONICAL", "rank '0x1'", "m@0x1@0@0123.data"),
        ("upper-hash", "KEY-HEX-CANONICAL", "hash 'AB'", "m@0x08050401@0@AB.data"),
        ("odd-hash", "KEY-HEX-CANONICAL", "hash '012'", "m@0x08050401@0@012.data"),
        ("group-leading-zero", "KEY-HEX-CANONICAL", "group '01'", "m@0x08050401@01@0123.data"),
        ("group-plus", "KEY-HEX-CANONICAL", "group '+1'", "m@0x08050401@+1@0123.data"),
        ("empty-salt", "KEY-SALT-FIELD", "an empty fifth field", "m@0x08050401@0@0123@.data"),
        ("six-fields", "KEY-FS-FORM", "six fields", "m@0x08050401@0@0123@s@t.data"),
        ("no-suffix", "KEY-FS-FORM", "no '.data' suffix", "m@0x08050401@0@0123"),
        ("raw-slash", "KEY-FS-FORM", "a raw '/' in the model field", "a/b@0x08050401@0@0123.data"),
    ]
    for name, rule, comment, text in fs_bad:
        vectors.add(
            f"key-fs-read-{name}",
            rule,
            comment,
            "key.fs.read",
            {"filename": text},
            result="invalid",
            error=KEYS,
            flags=["lenient-parse"],
        )
    vectors.add(
        "key-fs-read-sep-unescaped",
        "KEY-FS-FORM",
        "'-SEP-' in a filename reads as '/'",
        "key.fs.read",
        {"filename": "org-SEP-m@0x00000001@0@01.data"},
        flags=["sep-alias"],
    )
    s3_bad = [
        ("short-rank", "KEY-HEX-CANONICAL", "rank '1' (not 8 digits)", "m@1@0@0123"),
        ("rank-0x", "KEY-HEX-CANONICAL", "rank '0x000001'", "m@0x000001@0@0123"),
        ("upper-hash", "KEY-HEX-CANONICAL", "hash 'ABCD'", "m@08050401@0@ABCD"),
        ("hash-space", "KEY-HEX-CANONICAL", "hash '01 23'", "m@08050401@0@01 23"),
        ("empty-salt", "KEY-SALT-FIELD", "an empty fifth field", "m@08050401@0@0123@"),
        ("three-fields", "KEY-STRING-FORM", "three fields", "m@08050401@0"),
        ("six-fields", "KEY-STRING-FORM", "six fields", "m@08050401@0@0123@s@t"),
    ]
    for name, rule, comment, text in s3_bad:
        vectors.add(
            f"key-s3-read-{name}",
            rule,
            comment,
            "key.s3.read",
            {"object_name": text},
            result="invalid",
            error=KEYS,
            flags=["lenient-parse"],
        )
    vectors.add(
        "key-fs-write-sep-in-model",
        "KEY-FS-SEP-ALIAS",
        "model 'a-SEP-b' would read back as 'a/b'",
        "key.fs.write",
        okey(model_name="a-SEP-b"),
        result="invalid",
        error=KEYS,
        flags=["sep-alias"],
    )
    vectors.add(
        "key-fs-write-sep-touching-slash",
        "KEY-FS-SEP-ALIAS",
        "model 'a-SEP/b' escapes to 'a-SEP-SEP-b', which reads back as 'a/SEP-b'",
        "key.fs.write",
        okey(model_name="a-SEP/b"),
        result="invalid",
        error=KEYS,
        flags=["sep-alias"],
    )
    vectors.add(
        "key-fs-write-name-max",
        "KEY-FS-NAME-MAX",
        "a filename of more than 255 bytes",
        "key.fs.write",
        okey(model_name="m" * 240),
        result="invalid",
        error=KEYS,
        flags=["name-max"],
    )
    vectors.add_distinct(
        "key-fs-distinct-sep-vs-slash",
        "KEY-FS-SEP-ALIAS",
        "'a-SEP-b' and 'a/b' must not share a filename",
        "key.fs.write",
        [okey(model_name="a-SEP-b"), okey(model_name="a/b")],
        "filename",
        ["collision", "sep-alias"],
    )
    vectors.add_distinct(
        "key-fs-distinct-sep-touching",
        "KEY-FS-SEP-ALIAS",
        "'a-SEP/b' and 'a/SEP-b' must not share a filename",
        "key.fs.write",
        [okey(model_name="a-SEP/b"), okey(model_name="a/SEP-b")],
        "filename",
        ["collision", "sep-alias"],
    )
    vectors.add_distinct(
        "key-kv-rank-distinct-wrap",
        "KEY-KVRANK-RANGE",
        "ranks packed from (1, 256, 1, 0) and (1, 0, 1, 0) must not share a file",
        "key.kv_rank",
        [
            {"world_size": 1, "global_rank": 256, "local_world_size": 1, "local_rank": 0},
            {"world_size": 1, "global_rank": 0, "local_world_size": 1, "local_rank": 0},
        ],
        "kv_rank",
        ["collision", "overflow"],
    )


def ipc(vectors: OpVectors) -> None:
    valid: list[tuple[str, str, dict[str, Any]]] = [
        (
            "lookup-ws2",
            "lookup key (no worker_id), world 2, 2 chunks, groups [0, 1]",
            {"world_size": 2, "worker_id": None, "object_group_ids": [0, 1]},
        ),
        (
            "worker-1-of-4",
            "worker 1 of 4, groups [3, 0] kept in order",
            {"world_size": 4, "worker_id": 1, "object_group_ids": [3, 0]},
        ),
        (
            "world-1-salted",
            "world 1 with a salt, one group",
            {"world_size": 1, "worker_id": 0, "object_group_ids": [0], "cache_salt": "u9"},
        ),
        (
            "no-groups",
            "no object groups: an empty list of lists",
            {"world_size": 2, "worker_id": None, "object_group_ids": []},
        ),
        (
            "world-255",
            "lookup over 255 workers, one chunk",
            {"world_size": 255, "worker_id": None, "object_group_ids": [0], "chunk_hashes": [H1]},
        ),
    ]
    base = {"model_name": "org/m", "cache_salt": "", "chunk_hashes": [H1, H2]}
    for name, comment, fields in valid:
        vectors.add(
            f"key-ipc-{name}",
            "KEY-IPC-FANOUT",
            comment,
            "key.ipc",
            {**base, **fields},
            flags=["fanout"],
        )
    invalid: list[tuple[str, str, dict[str, Any]]] = [
        ("world-0", "world_size 0", {"world_size": 0, "worker_id": None}),
        ("worker-outside", "worker_id 2 in a world of 2", {"world_size": 2, "worker_id": 2}),
        ("world-256", "world_size 256", {"world_size": 256, "worker_id": 0}),
    ]
    for name, comment, fields in invalid:
        vectors.add(
            f"key-ipc-{name}",
            "KEY-IPC-WORKER",
            comment,
            "key.ipc",
            {**base, "object_group_ids": [0], **fields},
            result="invalid",
            error=KEYS,
            flags=["fanout"],
        )


def group_and_world_limits(vectors: OpVectors) -> None:
    """object_group_id above 2^63 - 1 in every form (KEY-GROUP-RANGE), and a fan-out over an
    absurd world size that must be refused before anything is sized by it (KEY-IPC-WORKER)."""
    above = INT64_MAX + 1
    group_cases: list[tuple[str, str, str, dict[str, Any], list[str]]] = [
        (
            "key-object-group-above-int64",
            "object_group_id 2^63",
            "key.object.new",
            okey(chunk_hash=b"\0", model_name="m", kv_rank=1, object_group_id=above),
            ["invariant"],
        ),
        (
            "key-s3-group-above-int64",
            "group field 8000000000000000 (2^63) in an object name",
            "key.s3.read",
            {"object_name": f"m@00000001@{above:x}@00"},
            [],
        ),
        (
            "key-fs-group-above-int64",
            "group field 8000000000000000 (2^63) in a filename",
            "key.fs.read",
            {"filename": f"m@0x00000001@{above:x}@00.data"},
            [],
        ),
        (
            "key-encoded-group-above-int64",
            "object_group_id 9223372036854775808 (2^63) in EncodedObjectKey JSON",
            "key.encoded.read",
            {
                "json_text": json.dumps(
                    {
                        "chunk_hash_hex": "00",
                        "kv_rank": 1,
                        "model_name": "m",
                        "object_group_id": above,
                    },
                    sort_keys=True,
                )
            },
            ["json"],
        ),
    ]
    for vid, comment, op, request, flags in group_cases:
        vectors.add(
            vid,
            "KEY-GROUP-RANGE",
            comment,
            op,
            request,
            result="invalid",
            error=KEYS,
            flags=["above-int64", *flags],
        )
    vectors.add(
        "key-ipc-world-size-huge",
        "KEY-IPC-WORKER",
        "lookup key (no worker_id) in a world of 10^10: refused before a fan-out list of "
        "that size is built",
        "key.ipc",
        {
            "model_name": "m",
            "world_size": 10**10,
            "worker_id": None,
            "cache_salt": "",
            "chunk_hashes": [b"\x01"],
            "object_group_ids": [0],
        },
        result="invalid",
        error=KEYS,
        flags=["fanout", "allocation"],
    )


def text_unicode(vectors: OpVectors) -> None:
    """KEY-TEXT-UNICODE: model_name and cache_salt are Unicode text, UTF-8 in every form.
    Text that is not (a lone surrogate, as os.listdir hands over filename bytes that are
    not UTF-8) is refused by ObjectKey and rejected by every reader; a character outside
    the Basic Multilingual Plane (4 UTF-8 bytes) round-trips."""
    astral = okey(model_name="org/m\U0001f600", cache_salt="s\U0001d11e")
    for form, write_op, read_op, out in [
        ("fs", "key.fs.write", "key.fs.read", "filename"),
        ("s3", "key.s3.write", "key.s3.read", "object_name"),
    ]:
        got = vectors.add(
            f"key-{form}-write-astral",
            "KEY-TEXT-UNICODE",
            f"{form} form of a key whose model and salt hold characters above U+FFFF",
            write_op,
            astral,
            flags=["unicode", "salt"],
        )
        vectors.add(
            f"key-{form}-read-astral",
            "KEY-TEXT-UNICODE",
            f"{form} form of a key whose model and salt hold characters above U+FFFF, read back",
            read_op,
            {out: got[out]},
            flags=["unicode", "salt"],
        )
    lone = "\udce1"
    invalid: list[tuple[str, str, str, dict[str, Any], list[str]]] = [
        (
            "key-object-model-surrogate",
            "model_name 'm' U+DCE1 'x': a lone surrogate is not Unicode text",
            "key.object.new",
            okey(model_name=f"m{lone}x"),
            ["invariant"],
        ),
        (
            "key-object-salt-surrogate",
            "cache_salt 's' U+DCE1: a lone surrogate is not Unicode text",
            "key.object.new",
            okey(cache_salt=f"s{lone}"),
            ["invariant", "salt"],
        ),
        (
            "key-fs-salt-not-utf8",
            "filename m@0x00000001@0@00@s<e1>lt.data: the salt byte e1 is not UTF-8 (read by "
            "os.listdir as the lone surrogate U+DCE1), so the name is not a key file",
            "key.fs.read",
            {"filename": f"m@0x00000001@0@00@s{lone}lt.data"},
            ["salt"],
        ),
        (
            "key-fs-model-not-utf8",
            "filename m<e1>@0x00000001@0@00.data: the model byte e1 is not UTF-8",
            "key.fs.read",
            {"filename": f"m{lone}@0x00000001@0@00.data"},
            [],
        ),
        (
            "key-s3-model-not-utf8",
            "object name m<e1>@00000001@0@00: the model byte e1 is not UTF-8",
            "key.s3.read",
            {"object_name": f"m{lone}@00000001@0@00"},
            [],
        ),
        (
            "key-encoded-model-surrogate",
            "EncodedObjectKey JSON whose model_name is the escape \\udce1 (a lone surrogate)",
            "key.encoded.read",
            {
                "json_text": json.dumps(
                    {"chunk_hash_hex": "00", "kv_rank": 1, "model_name": f"m{lone}"},
                    sort_keys=True,
                )
            },
            ["json"],
        ),
    ]
    for vid, comment, op, request, flags in invalid:
        vectors.add(
            vid,
            "KEY-TEXT-UNICODE",
            comment,
            op,
            request,
            result="invalid",
            error=KEYS,
            flags=["not-unicode", *flags],
        )


def windows(vectors: OpVectors) -> None:
    """AttnWindowDesc: window values and group indices (KEY-WINDOW-VALUES) and the chunks
    a group needs for a hit (KEY-WINDOW-HIT)."""
    mixed = [-1, 4, 1]
    for group, comment in [
        (0, "group 0 of [-1, 4, 1]: full attention"),
        (1, "group 1 of [-1, 4, 1]: a sliding window of 4 chunks"),
        (2, "group 2 of [-1, 4, 1]: a recurrent state (window 1)"),
    ]:
        vectors.add(
            f"key-window-group-{group}",
            "KEY-WINDOW-VALUES",
            comment,
            "key.window",
            {"windows": mixed, "object_group_id": group},
            flags=["window"],
        )
    bad_windows: list[tuple[str, str, list[int], int]] = [
        ("zero", "window 0 (neither full attention nor a window)", [0], 0),
        ("minus-2", "window -2", [-2], 0),
        ("zero-after-valid", "windows [-1, 0]: the second is 0", [-1, 0], 0),
        ("group-past-end", "group 3 of a 3-group descriptor", mixed, 3),
        ("group-negative", "group -1 (not 'the last group')", mixed, -1),
    ]
    for name, comment, values, group in bad_windows:
        vectors.add(
            f"key-{name}",
            "KEY-WINDOW-VALUES",
            comment,
            "key.window",
            {"windows": values, "object_group_id": group},
            result="invalid",
            error=KEYS,
            flags=["window"],
        )
    hits: list[tuple[str, str, list[int], int, int]] = [
        ("full", "full attention, 5-chunk prefix: every chunk", [-1], 0, 5),
        ("window-2-of-5", "window 2, 5-chunk prefix: chunks 3 and 4", [-1, 2], 1, 5),
        ("window-8-of-3", "window 8, 3-chunk prefix: min(8, 3) = all 3", [8], 0, 3),
        ("recurrent", "window 1, 4-chunk prefix: the last chunk only", [1], 0, 4),
        ("empty-prefix", "window 2, empty prefix: no chunk", [2], 0, 0),
        ("full-empty-prefix", "full attention, empty prefix: no chunk", [-1], 0, 0),
    ]
    for name, comment, values, group, prefix in hits:
        vectors.add(
            f"key-window-hit-{name}",
            "KEY-WINDOW-HIT",
            comment,
            "key.window.hit",
            {"windows": values, "object_group_id": group, "num_prefix_chunks": prefix},
            flags=["window"],
        )
    vectors.add(
        "key-hit-group-past-end",
        "KEY-WINDOW-VALUES",
        "the hit of group 1 of a 1-group descriptor",
        "key.window.hit",
        {"windows": [2], "object_group_id": 1, "num_prefix_chunks": 3},
        result="invalid",
        error=KEYS,
        flags=["window"],
    )


def layouts(vectors: OpVectors) -> None:
    """MemoryLayoutDesc: one dtype per shape (KEY-LAYOUT-LENGTHS)."""
    valid: list[tuple[str, str, list[str], list[int], list[int]]] = [
        (
            "two-groups",
            "bfloat16 [2, 8] and uint8 [16]",
            ["bfloat16", "uint8"],
            [2, 1],
            [2, 8, 16],
        ),
        ("one-group", "float16 [4, 2, 16, 128]", ["float16"], [4], [4, 2, 16, 128]),
        ("empty", "no groups", [], [], []),
    ]
    for name, comment, dtypes, ranks, dims in valid:
        vectors.add(
            f"key-layout-{name}",
            "KEY-LAYOUT-LENGTHS",
            comment,
            "key.layout",
            {"dtypes": dtypes, "shape_ranks": ranks, "shape_dims": dims},
            flags=["layout"],
        )
    invalid: list[tuple[str, str, list[str], list[int], list[int]]] = [
        ("more-dtypes", "two dtypes, one shape", ["bfloat16", "uint8"], [2], [2, 8]),
        ("more-shapes", "one dtype, two shapes", ["bfloat16"], [2, 1], [2, 8, 16]),
        ("no-dtypes", "no dtype, one shape", [], [1], [16]),
    ]
    for name, comment, dtypes, ranks, dims in invalid:
        vectors.add(
            f"key-{name}",
            "KEY-LAYOUT-LENGTHS",
            comment,
            "key.layout",
            {"dtypes": dtypes, "shape_ranks": ranks, "shape_dims": dims},
            result="invalid",
            error=KEYS,
            flags=["layout"],
        )


def build(files: FileSet, driver: Any) -> OpVectors:
    vectors = OpVectors(files, "keys", driver)
    cache_keys(vectors)
    object_keys(vectors)
    kv_ranks(vectors)
    encoded_keys(vectors)
    fs_and_s3(vectors)
    ipc(vectors)
    group_and_world_limits(vectors)
    text_unicode(vectors)
    windows(vectors)
    layouts(vectors)
    return vectors
