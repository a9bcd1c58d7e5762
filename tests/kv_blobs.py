"""Blob builders and header-field surgery shared by the codec tests."""

from __future__ import annotations

import struct

import torch

from reference_impl.kv_codec import AsymK16V8Codec, CodecHashes, ScaleScope

SCOPES = (ScaleScope.PER_TENSOR, ScaleScope.PER_LAYER_HEAD, ScaleScope.PER_PAGE_HEAD)
DTYPES = (torch.float16, torch.bfloat16)

#: Offsets of the fixed header fields (SPEC.md, "Blob header").
FIELD = {
    "version": (8, "<H"),
    "scale_scope": (10, "<H"),
    "k_dtype": (12, "<H"),
    "v_dtype": (14, "<H"),
    "scale_dtype": (16, "<H"),
    "reserved": (18, "<H"),
    "layer_id": (20, "<q"),
    "chunk_id": (28, "<q"),
    "chunk_size": (36, "<q"),
    "page_size": (44, "<q"),
    "kv_head_count": (52, "<q"),
    "head_dim": (60, "<q"),
    "scale_shape_n": (68, "<q"),
}


def kv(
    shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0, scale: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded K and V of one shape."""
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(shape, generator=g).to(dtype)
    v = (torch.randn(shape, generator=g) * scale).to(dtype)
    return k, v


def paged_blob(
    scope: ScaleScope = ScaleScope.PER_PAGE_HEAD,
    dtype: torch.dtype = torch.float16,
    pages: int = 2,
    page_size: int = 4,
    heads: int = 2,
    head_dim: int = 8,
    hashes: CodecHashes | None = None,
    seed: int = 0,
) -> bytearray:
    """A token-major [pages, page_size, heads, head_dim] blob with every geometry field set."""
    k, v = kv((pages, page_size, heads, head_dim), dtype, seed)
    codec = AsymK16V8Codec(scale_scope=scope)
    enc = codec.encode(
        k,
        v,
        hashes=hashes,
        layer_id=1,
        chunk_id=2,
        chunk_size=pages * page_size,
        page_size=page_size,
        kv_head_count=heads,
        head_dim=head_dim,
        page_axis=0,
    )
    return bytearray(codec.to_bytes(enc))


def lens_offset(blob: bytes | bytearray) -> int:
    """Offset of k_payload_len (after the scale_shape dims)."""
    (n,) = struct.unpack_from("<q", blob, 68)
    return 76 + 8 * n


def with_field(blob: bytes | bytearray, name: str, value: int) -> bytearray:
    """A copy of ``blob`` with one fixed header field rewritten (the payload CRC stays valid)."""
    out = bytearray(blob)
    offset, fmt = FIELD[name]
    struct.pack_into(fmt, out, offset, value)
    return out


def with_lens(blob: bytes | bytearray, k: int, v: int, s: int) -> bytearray:
    """A copy of ``blob`` with the three payload lengths rewritten."""
    out = bytearray(blob)
    struct.pack_into("<3q", out, lens_offset(blob), k, v, s)
    return out


def read_lens(blob: bytes | bytearray) -> tuple[int, int, int]:
    k, v, s = struct.unpack_from("<3q", blob, lens_offset(blob))
    return k, v, s
