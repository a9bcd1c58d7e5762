"""An independent model of the v1 blob header, used to build and corrupt vectors.

It is written from SPEC.md's byte table, not from the reference: the generator checks that
the reference's own output re-packs to the same bytes, so a writer bug in the reference
cannot silently become a golden vector.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from conformance.core.digests import crc32

MAGIC = b"LMCKV\x01\x00\x01"
HASH_KEYS = (
    "model_id",
    "model_revision_hash",
    "tokenizer_hash",
    "rope_config_hash",
    "attention_backend",
    "kv_layout",
)
#: (name, struct code) of the fixed part, in order; offsets follow from the codes.
FIXED_FIELDS = (
    ("magic", "8s"),
    ("version", "H"),
    ("scale_scope", "H"),
    ("k_dtype_id", "H"),
    ("v_dtype_id", "H"),
    ("scale_dtype_id", "H"),
    ("reserved", "H"),
    ("layer_id", "q"),
    ("chunk_id", "q"),
    ("chunk_size", "q"),
    ("page_size", "q"),
    ("kv_head_count", "q"),
    ("head_dim", "q"),
    ("scale_shape_n", "q"),
)


@dataclass
class Header:
    """Every header field, free to hold values a valid blob never has."""

    version: int = 1
    scale_scope: int = 0
    k_dtype_id: int = 2
    v_dtype_id: int = 7
    scale_dtype_id: int = 4
    reserved: int = 0
    layer_id: int = -1
    chunk_id: int = -1
    chunk_size: int = -1
    page_size: int = -1
    kv_head_count: int = -1
    head_dim: int = -1
    scale_shape: list[int] = field(default_factory=list)
    scale_shape_n: int | None = None
    k_payload_len: int = 0
    v_payload_len: int = 0
    scale_payload_len: int = 0
    hash_pairs: list[tuple[bytes, bytes]] = field(default_factory=list)
    hash_count: int | None = None
    magic: bytes = MAGIC
    crc: int | None = None
    big_endian: bool = False


@dataclass
class Parsed:
    """A blob split into its header model, the offset of every field, and its payload."""

    header: Header
    offsets: dict[str, tuple[int, int]]
    header_len: int
    payload: bytes


def pack(h: Header, payload: bytes) -> bytes:
    """Header bytes then ``payload``; the CRC is computed over ``payload`` unless set."""
    e = ">" if h.big_endian else "<"
    n = len(h.scale_shape) if h.scale_shape_n is None else h.scale_shape_n
    out = bytearray()
    values = {
        "magic": h.magic,
        "version": h.version,
        "scale_scope": h.scale_scope,
        "k_dtype_id": h.k_dtype_id,
        "v_dtype_id": h.v_dtype_id,
        "scale_dtype_id": h.scale_dtype_id,
        "reserved": h.reserved,
        "layer_id": h.layer_id,
        "chunk_id": h.chunk_id,
        "chunk_size": h.chunk_size,
        "page_size": h.page_size,
        "kv_head_count": h.kv_head_count,
        "head_dim": h.head_dim,
        "scale_shape_n": n,
    }
    for name, code in FIXED_FIELDS:
        out += struct.pack(e + code, values[name])
    for d in h.scale_shape:
        out += struct.pack(e + "q", d)
    out += struct.pack(e + "3q", h.k_payload_len, h.v_payload_len, h.scale_payload_len)
    count = len(h.hash_pairs) if h.hash_count is None else h.hash_count
    out += struct.pack(e + "H", count)
    for key, value in h.hash_pairs:
        out += struct.pack(e + "H", len(key)) + key + struct.pack(e + "H", len(value)) + value
    crc = crc32(payload) if h.crc is None else h.crc
    out += struct.pack(e + "I", crc)
    return bytes(out) + payload


def parse(blob: bytes) -> Parsed:
    """Split a well-formed blob (little-endian) into fields; raises on anything odd."""
    h = Header()
    offsets: dict[str, tuple[int, int]] = {}
    off = 0

    def take(name: str, code: str) -> int | bytes:
        nonlocal off
        size = struct.calcsize("<" + code)
        (value,) = struct.unpack_from("<" + code, blob, off)
        offsets[name] = (off, size)
        off += size
        return value  # type: ignore[no-any-return]

    for name, code in FIXED_FIELDS:
        setattr(h, name, take(name, code))
    n = int(h.scale_shape_n or 0)
    h.scale_shape = [int(take(f"scale_shape[{i}]", "q")) for i in range(n)]
    h.scale_shape_n = None
    for name in ("k_payload_len", "v_payload_len", "scale_payload_len"):
        setattr(h, name, take(name, "q"))
    count = int(take("hash_count", "H"))
    for i in range(count):
        klen = int(take(f"hash[{i}].key_len", "H"))
        key = blob[off : off + klen]
        offsets[f"hash[{i}].key"] = (off, klen)
        off += klen
        vlen = int(take(f"hash[{i}].value_len", "H"))
        value = blob[off : off + vlen]
        offsets[f"hash[{i}].value"] = (off, vlen)
        off += vlen
        h.hash_pairs.append((key, value))
    h.crc = int(take("crc", "I"))
    end = off + h.k_payload_len + h.v_payload_len + h.scale_payload_len
    if end != len(blob):
        raise ValueError(f"blob is {len(blob)} bytes, header says {end}")
    payload = blob[off:end]
    if crc32(payload) != h.crc:
        raise ValueError("CRC mismatch in a blob the generator expected to be valid")
    h.crc = None
    return Parsed(h, offsets, off, payload)
