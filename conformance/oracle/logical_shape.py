"""The shape and axes a decoder dequantizes V in, rebuilt from header fields
(SPEC.md KV-LOGICAL-SHAPE, KV-LAYOUT-NAME)."""

from __future__ import annotations

from typing import NamedTuple

from .fp8_quant import OracleRefusal, Scope


class LogicalShape(NamedTuple):
    shape: tuple[int, ...]
    head_axis: int
    page_axis: int | None


def logical_shape(
    *,
    elements: int,
    scope: Scope,
    kv_head_count: int,
    head_dim: int,
    page_size: int,
    scale_shape: tuple[int, ...],
    kv_layout: str,
) -> LogicalShape | None:
    """KV-LOGICAL-SHAPE: H = kv_head_count (else the last scale dimension in the per-head
    scopes), D = head_dim, tokens = elements / (H x D); pages = PER_PAGE_HEAD's first
    scale dimension when positive, else tokens / page_size when that divides a positive
    token count. None (a flat V) when H or D is unknown; OracleRefusal for a kv_layout
    other than "", "NHD" and "HND"."""
    if kv_layout not in ("", "NHD", "HND"):
        raise OracleRefusal(f"kv_layout {kv_layout!r} names no known axis order")
    heads = kv_head_count
    if heads <= 0 and scope in (Scope.PER_LAYER_HEAD, Scope.PER_PAGE_HEAD):
        heads = scale_shape[-1]
    if heads <= 0 or head_dim <= 0 or elements % (heads * head_dim):
        return None
    tokens = elements // (heads * head_dim)
    pages = 0
    if scope == Scope.PER_PAGE_HEAD and scale_shape[0] > 0:
        pages = scale_shape[0]
    elif page_size > 0 and tokens > 0 and tokens % page_size == 0:
        pages = tokens // page_size
    head_major = kv_layout == "HND"
    if pages == 0:
        if head_major:
            return LogicalShape((heads, tokens, head_dim), 0, None)
        return LogicalShape((tokens, heads, head_dim), 1, None)
    per_page = tokens // pages
    if head_major:
        return LogicalShape((pages, heads, per_page, head_dim), 1, 0)
    return LogicalShape((pages, per_page, heads, head_dim), 2, 0)
