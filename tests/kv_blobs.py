"""Blob builders and header-field surgery shared by the codec tests."""

from __future__ import annotations

import torch

from lmckv.conformance.core.blob_model import LENGTH_FIELDS, layout
from lmckv.reference_impl.kv_codec import AsymK16V8Codec, CodecHashes, ScaleScope

SCOPES = (ScaleScope.PER_TENSOR, ScaleScope.PER_LAYER_HEAD, ScaleScope.PER_PAGE_HEAD)
DTYPES = (torch.float16, torch.bfloat16)


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


def with_field(blob: bytes | bytearray, name: str, value: int) -> bytearray:
    """A copy of ``blob`` with one header field (a blob_model field name) rewritten; the
    payload CRC stays valid."""
    out = bytearray(blob)
    layout(blob).field(name).put(out, value)
    return out


def with_lens(blob: bytes | bytearray, k: int, v: int, s: int) -> bytearray:
    """A copy of ``blob`` with the three payload lengths rewritten."""
    out = bytearray(blob)
    found = layout(blob)
    for name, value in zip(LENGTH_FIELDS, (k, v, s), strict=True):
        found.field(name).put(out, value)
    return out


def read_lens(blob: bytes | bytearray) -> tuple[int, int, int]:
    k, v, s = (layout(blob).int_value(name) for name in LENGTH_FIELDS)
    return k, v, s
