"""Seed inputs of every fuzz target: the golden vectors (golden_blobs/v1, and v2's codec
blobs) plus a few valid
inputs the reference writes, so that mutation starts from every rule's boundary cases."""

from __future__ import annotations

import functools
import json
from typing import Any

import torch

from ..core.golden_vectors import GOLDEN_DIR, golden_file

#: Seeds larger than this are left out: the fuzzers mutate small inputs quickly.
MAX_SEED_BYTES = 8192


def _manifest_vectors(name: str, vector_set: str = "v1") -> list[dict[str, Any]]:
    path = GOLDEN_DIR / vector_set / f"{name}.json"
    if not path.is_file():
        return []
    with path.open(encoding="ascii") as f:
        vectors: list[dict[str, Any]] = json.load(f)["vectors"]
    return vectors


def _files(vectors: list[dict[str, Any]], *keys: str) -> list[bytes]:
    out = []
    for vector in vectors:
        for key in keys:
            section: Any = vector
            for part in key.split("."):
                section = section.get(part, {}) if isinstance(section, dict) else {}
            if isinstance(section, str) and section:
                data = golden_file(section)
                if len(data) <= MAX_SEED_BYTES:
                    out.append(data)
    return out


def _generated_blobs() -> list[bytes]:
    """Valid blobs of every scope, written by the reference (small shapes)."""
    from ...reference_impl.kv_codec import AsymK16V8Codec, CodecHashes, ScaleScope
    from ...reference_impl.kv_codec.header_fields import SCALE_AWARE_SCOPES

    gen = torch.Generator().manual_seed(7)
    out = []
    for scope in SCALE_AWARE_SCOPES:
        for dtype in (torch.float16, torch.bfloat16):
            kv = torch.randn(2, 4, 2, 8, generator=gen).to(dtype)
            codec = AsymK16V8Codec(scale_scope=scope)
            kwargs: dict[str, Any] = {"kv_head_count": 2, "head_dim": 8, "page_size": 4}
            if scope == ScaleScope.PER_PAGE_HEAD:
                kwargs["page_axis"] = 0
            if scope == ScaleScope.EXTERNAL:
                kwargs["precomputed_v_scales"] = torch.full((2, 1), 0.05)
            hashes = CodecHashes(model_id="m", kv_layout="NHD" if dtype == torch.float16 else "")
            enc = codec.encode(kv, kv, hashes=hashes, **kwargs)
            out.append(bytes(codec.to_bytes(enc)))
    return out


@functools.cache
def codec_blobs() -> tuple[bytes, ...]:
    vectors = _manifest_vectors("codec") + _manifest_vectors("codec", "v2")
    return tuple(_files(vectors, "blob") + _generated_blobs())


def _op_vectors(name: str, op: str) -> list[dict[str, Any]]:
    return [v for v in _manifest_vectors(name) if v.get("op") == op]


@functools.cache
def protocol_messages(kind: str) -> tuple[bytes, ...]:
    """Messages of ``kind`` (client, server, remote) read or written by the vectors."""
    vectors = _op_vectors("protocol", f"proto.{kind}.read")
    written = _op_vectors("protocol", f"proto.{kind}.write")
    found = _files(vectors, "request.msg_file") + _files(written, "expected.fields.msg_file")
    return tuple(found) or _generated_messages(kind)


def _generated_messages(kind: str) -> tuple[bytes, ...]:
    from ...reference_impl import protocol as p

    shape = torch.Size([2, 32, 256, 1024])
    if kind == "client":
        key = p.parse_cache_key("org/m@4@1@abc@bfloat16@3@a%b")
        msg = p.ClientMetaMessage(
            p.ClientCommand.GET, key, 4096, p.MemoryFormat.KV_2LTD, torch.bfloat16, shape
        )
        return (msg.serialize(),)
    if kind == "server":
        reply = p.ServerMetaMessage(
            p.ServerReturnCode.SUCCESS, 9, p.MemoryFormat.BINARY, torch.float16, shape
        )
        return (reply.serialize(),)
    meta = p.RemoteMetadata(
        1024, [shape, torch.Size([16])], [torch.bfloat16, torch.uint8], p.MemoryFormat.KV_2LTD
    )
    return (meta.serialize(),)


@functools.cache
def remote_group_counts() -> tuple[tuple[int, bytes], ...]:
    """(num_groups, message) pairs of the RemoteMetadata vectors."""
    out = []
    for v in _op_vectors("protocol", "proto.remote.read"):
        req = v["request"]
        if isinstance(req.get("num_groups"), int) and "msg_file" in req:
            out.append((req["num_groups"], golden_file(req["msg_file"])))
    return tuple(out) or ((2, _generated_messages("remote")[0]),)


@functools.cache
def key_texts(op: str, field: str) -> tuple[str, ...]:
    """Text inputs of key vectors: the read requests' field and the write results' field."""
    write_op = op.replace(".read", ".write")
    found = [v["request"][field] for v in _op_vectors("keys", op) if field in v["request"]]
    for v in _op_vectors("keys", write_op):
        value = v.get("expected", {}).get("fields", {}).get(field)
        if isinstance(value, str):
            found.append(value)
    defaults = {
        "key": "org/m@4@1@abc@bfloat16@3@tag%value",
        "object_name": "org/m@08050401@1@0123456789abcdef@salt",
        "filename": "org-SEP-m@0x08050401@1@0123456789abcdef@salt.data",
        "json_text": '{"cache_salt": "s", "chunk_hash_hex": "0123", "kv_rank": 5, '
        '"model_name": "m/x", "object_group_id": 2}',
    }
    found.append(defaults[field])
    return tuple(dict.fromkeys(found))
