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

import functools
import math
from typing import NamedTuple

from .errors import UnsupportedConfigError
from .header import EncodedKV, ScaleScope

LAYOUTS = ("NHD", "HND")


class LogicalShape(NamedTuple):
    """A shape for the flat payload plus where its head and page axes are."""

    shape: tuple[int, ...]
    head_axis: int
    page_axis: int | None


def logical_shape(enc: EncodedKV, layout: str | None = None) -> LogicalShape | None:
    """The rule above for ``enc``; None when the header lacks H or D (flat payload)."""
    name = (enc.hashes.kv_layout if layout is None else layout) or "NHD"
    if name not in LAYOUTS:
        raise UnsupportedConfigError(
            f"kv_layout {name!r} is not one of {LAYOUTS}; pass layout= or shape= to decode",
            rule="KV-LAYOUT-NAME",
        )
    return _shape_rule(
        name,
        enc.element_count,
        enc.scale_scope,
        tuple(enc.scale_shape),
        enc.page_size,
        enc.kv_head_count,
        enc.head_dim,
    )


@functools.lru_cache(maxsize=256)
def _shape_rule(
    name: str,
    elems: int,
    scope: ScaleScope,
    scale_shape: tuple[int, ...],
    page_size: int,
    heads: int,
    dim: int,
) -> LogicalShape | None:
    """logical_shape from the values it reads (remembered: a small blob's decode would
    otherwise spend as long here as on one of its tensors)."""
    if heads <= 0 and scope in (ScaleScope.PER_LAYER_HEAD, ScaleScope.PER_PAGE_HEAD):
        heads = scale_shape[-1]
    if heads <= 0 or dim <= 0 or elems % (heads * dim):
        return None
    tokens = elems // (heads * dim)
    pages: int | None = None
    if scope == ScaleScope.PER_PAGE_HEAD and scale_shape[0] > 0:
        pages = scale_shape[0]
    elif page_size > 0 and tokens > 0 and tokens % page_size == 0:
        pages = tokens // page_size
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
