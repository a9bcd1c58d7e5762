"""The logical shape of K and V, which the blob does not record (SPEC.md, "Logical shape").

The payload is K and V flattened in C order. Their shape is rebuilt from the header's
``kv_head_count`` (H), ``head_dim`` (D) and ``page_size``, the PER_PAGE_HEAD scale shape, and
the ``kv_layout`` hash string (KV-LAYOUT-NAME):

- ``""`` or ``"NHD"`` (token-major, the canonical layout): ``[n_pages, page_size, H, D]``, or
  ``[tokens, H, D]`` when no page count is known;
- ``"HND"`` (head-major within a page): ``[n_pages, H, page_size, D]``, or ``[H, tokens, D]``.

The page count is the PER_PAGE_HEAD scale shape's first dimension when positive, else
tokens / page_size when ``page_size`` is set and divides a positive token count.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from lmckv.reference_impl.kv_codec.errors import UnsupportedConfigError
from lmckv.reference_impl.kv_codec.header import EncodedKV, ScaleScope

LAYOUTS = ("NHD", "HND")


class LogicalShape(NamedTuple):
    """A shape for the flat payload plus where its head and page axes are."""

    shape: tuple[int, ...]
    head_axis: int
    page_axis: int | None


def _tokens(enc: EncodedKV, elems: int) -> tuple[int, int, int] | None:
    heads = enc.kv_head_count
    if heads <= 0 and enc.scale_scope in (ScaleScope.PER_LAYER_HEAD, ScaleScope.PER_PAGE_HEAD):
        heads = enc.scale_shape[-1]
    if heads <= 0 or enc.head_dim <= 0 or elems % (heads * enc.head_dim):
        return None
    return elems // (heads * enc.head_dim), heads, enc.head_dim


def logical_shape(enc: EncodedKV, layout: str | None = None) -> LogicalShape | None:
    """The rule above for ``enc``; None when the header lacks H or D (flat payload)."""
    name = enc.hashes.kv_layout if layout is None else layout
    name = name or "NHD"
    if name not in LAYOUTS:
        raise UnsupportedConfigError(
            f"kv_layout {name!r} is not one of {LAYOUTS}; pass layout= or shape= to decode",
            rule="KV-LAYOUT-NAME",
        )
    elems = enc.element_count
    found = _tokens(enc, elems)
    if found is None:
        return None
    tokens, heads, dim = found
    pages: int | None = None
    if enc.scale_scope == ScaleScope.PER_PAGE_HEAD and enc.scale_shape[0] > 0:
        pages = enc.scale_shape[0]
    elif enc.page_size > 0 and tokens > 0 and tokens % enc.page_size == 0:
        pages = tokens // enc.page_size
    if pages is None:
        if name == "NHD":
            return LogicalShape((tokens, heads, dim), 1, None)
        return LogicalShape((heads, tokens, dim), 0, None)
    per_page = tokens // pages
    if name == "NHD":
        return LogicalShape((pages, per_page, heads, dim), 2, 0)
    return LogicalShape((pages, heads, per_page, dim), 1, 0)


def explicit_shape(
    enc: EncodedKV, shape: tuple[int, ...], head_axis: int, page_axis: int | None
) -> LogicalShape:
    """A caller-given shape, checked against the payload's element count."""
    elems = enc.element_count
    if math.prod(shape) != elems or any(d < 0 for d in shape):
        raise UnsupportedConfigError(
            f"shape {shape} does not hold the blob's {elems} elements", rule="KV-LOGICAL-SHAPE"
        )
    return LogicalShape(tuple(shape), head_axis, page_axis)
