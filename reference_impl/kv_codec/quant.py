"""V quantization to FP8 and back (SPEC.md, "Quantization rule").

Q-SCALE:  scale = amax(|V| over the group) / finfo(fp8).max, computed in float32;
          a group whose amax is 0 (or NaN) gets the sentinel scale 1.0.
Q-ROUND:  q = fp8(clamp(float32(V) / float32(scale), -max, +max)), round to nearest even.
Q-DEQUANT: V' = out_dtype(float32(q) * float32(scale)).

Groups per scope: PER_TENSOR one group; PER_LAYER_HEAD one per head (axis ``head_axis``);
PER_PAGE_HEAD one per (page, head), scales stored as (n_pages, n_heads) whatever the axis
order; EXTERNAL scales come from the caller and broadcast against V.

On CPU the arithmetic runs in cache-sized blocks of float32 so no full-size float32 copy of
V is ever made; every element still sees exactly the operations above, so the bytes are the
same as the unblocked computation.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from reference_impl.kv_codec.errors import UnsupportedConfigError
from reference_impl.kv_codec.header import ScaleScope

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)

#: Q-SCALE: the scale of an all-zero group.
ZERO_SCALE_SENTINEL = 1.0

_BLOCK = 1 << 16  # float32 elements per CPU block: 256 KiB, cache-resident
_SMALL = 1 << 22  # elements up to which a full-size |V| temporary is cheaper than two passes

Index = tuple[int | slice, ...]


def fp8_max(dtype: torch.dtype) -> float:
    """finfo(dtype).max for an FP8 dtype (448 for e4m3fn, 57344 for e5m2)."""
    if dtype not in FP8_DTYPES:
        raise UnsupportedConfigError(f"{dtype} is not an FP8 dtype")
    return float(torch.finfo(dtype).max)


def _axis(axis: int | None, ndim: int, name: str) -> int | None:
    if axis is None:
        return None
    if not -ndim <= axis < ndim:
        raise UnsupportedConfigError(f"{name} {axis} is out of range for a {ndim}-d tensor")
    return axis % ndim


def scope_axes(
    ndim: int, scope: ScaleScope, head_axis: int, page_axis: int | None
) -> tuple[int | None, int | None]:
    """Normalized (head, page) axes the scope needs; typed errors for missing or bad ones."""
    if scope in (ScaleScope.PER_TENSOR, ScaleScope.EXTERNAL):
        return None, None
    if scope not in (ScaleScope.PER_LAYER_HEAD, ScaleScope.PER_PAGE_HEAD):
        raise UnsupportedConfigError(f"unknown scale scope {scope!r}")
    head = _axis(head_axis, ndim, "head_axis")
    if scope == ScaleScope.PER_LAYER_HEAD:
        return head, None
    if page_axis is None:
        raise UnsupportedConfigError("PER_PAGE_HEAD needs page_axis")
    page = _axis(page_axis, ndim, "page_axis")
    if page == head:
        raise UnsupportedConfigError(f"page_axis and head_axis are both {head}")
    return head, page


def compute_v_scales(
    v: torch.Tensor,
    scope: ScaleScope,
    *,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    head_axis: int = -2,
    page_axis: int | None = None,
) -> torch.Tensor:
    """float32 scales per Q-SCALE: shape () / (n_heads,) / (n_pages, n_heads)."""
    qmax = fp8_max(fp8_dtype)
    if scope == ScaleScope.EXTERNAL:
        raise UnsupportedConfigError("EXTERNAL scales come from the caller, not from V")
    head, page = scope_axes(v.ndim, scope, head_axis, page_axis)
    keep = tuple(a for a in (page, head) if a is not None)
    if v.numel() == 0:
        amax = torch.zeros([v.shape[a] for a in keep], dtype=torch.float32, device=v.device)
    else:
        amax = _group_absmax(v.detach(), keep).to(torch.float32)
    if page is not None and head is not None and page > head:
        amax = amax.transpose(0, 1)
    return torch.where(amax > 0, amax / qmax, ZERO_SCALE_SENTINEL)


def _group_absmax(v: torch.Tensor, keep: tuple[int, ...]) -> torch.Tensor:
    """max |v| over every axis not in ``keep`` (kept axes in their original order), in V's
    own dtype: exact, and NaN-propagating.

    Small 16-bit tensors compare bit patterns: with the sign bit cleared, the int16 order of
    float16/bfloat16 patterns is their magnitude order, and NaN patterns sort above Inf, so
    an integer max (several times faster than a half-precision one) gives the same result.
    Large tensors take max(max(v), -min(v)), which needs no full-size temporary (a fresh one
    costs page faults).
    """
    reduce = tuple(d for d in range(v.ndim) if d not in keep)
    if not reduce:
        return v.abs()
    if not keep:
        lo, hi = torch.aminmax(v)
        return torch.maximum(hi, lo.neg())
    if v.numel() > _SMALL:
        return torch.maximum(v.amax(dim=reduce), v.amin(dim=reduce).neg())
    if v.dtype in (torch.float16, torch.bfloat16):
        return (v.view(torch.int16) & 0x7FFF).amax(dim=reduce).view(v.dtype)
    return v.abs().amax(dim=reduce)


def scale_view(
    scales: torch.Tensor,
    shape: torch.Size,
    scope: ScaleScope,
    head_axis: int,
    page_axis: int | None,
) -> torch.Tensor:
    """float32 scales as a tensor that broadcasts against ``shape`` per the scope's groups."""
    s = scales.detach().to(torch.float32)
    ndim = len(shape)
    if scope == ScaleScope.EXTERNAL:
        try:
            s.expand(shape)
        except RuntimeError:
            raise UnsupportedConfigError(
                f"EXTERNAL scales of shape {tuple(s.shape)} do not broadcast to V {tuple(shape)}"
            ) from None
        return s
    head, page = scope_axes(ndim, scope, head_axis, page_axis)
    if head is None:
        if s.numel() != 1:
            raise UnsupportedConfigError(f"PER_TENSOR takes one scale, got {tuple(s.shape)}")
        return s.reshape(())
    view = [1] * ndim
    if page is None:
        if tuple(s.shape) != (shape[head],):
            raise UnsupportedConfigError(
                f"PER_LAYER_HEAD scales {tuple(s.shape)} != ({shape[head]},) heads"
            )
        view[head] = shape[head]
        return s.view(view)
    if tuple(s.shape) != (shape[page], shape[head]):
        raise UnsupportedConfigError(
            f"PER_PAGE_HEAD scales {tuple(s.shape)} != ({shape[page]}, {shape[head]})"
        )
    view[page], view[head] = shape[page], shape[head]
    # Stored as (pages, heads); when the head axis comes first in V, transpose before
    # reshaping so each scale lands on its own (page, head) group.
    return (s if page < head else s.t()).reshape(view)


def _blocks(shape: torch.Size, target: int) -> Iterator[Index]:
    """Indexes of leading-dim slabs of about ``target`` elements that tile ``shape``."""
    if len(shape) == 0:
        yield ()
        return
    inner = math.prod(shape[1:])
    if inner > target and len(shape) > 1:
        for i in range(shape[0]):
            for rest in _blocks(shape[1:], target):
                yield (i, *rest)
        return
    rows = max(1, target // max(inner, 1))
    for start in range(0, shape[0], rows):
        yield (slice(start, min(start + rows, shape[0])),)


def _blockwise(
    src: torch.Tensor,
    scale: torch.Tensor,
    out: torch.Tensor,
    op: str,
    clamp: float | None,
) -> None:
    """out = cast(clamp(float32(src) op scale)) in cache-sized float32 blocks.

    Mixed 16/32-bit arithmetic widens src to float32 element by element, so the float32
    conversion costs no separate pass; FP8 sources (which torch does not promote) are
    widened explicitly first.
    """
    arith = torch.div if op == "div" else torch.mul
    widen = src.dtype in FP8_DTYPES
    if src.device.type != "cpu":
        t = arith(src.to(torch.float32) if widen else src, scale)
        if clamp is not None:
            t.clamp_(-clamp, clamp)
        out.copy_(t)
        return
    full = scale.expand(src.shape)
    tmp = torch.empty(min(_BLOCK, max(src.numel(), 1)), dtype=torch.float32)
    for idx in _blocks(src.shape, _BLOCK):
        s_blk = src[idx]
        t = tmp[: s_blk.numel()].view(s_blk.shape)
        if widen:
            t.copy_(s_blk)
            arith(t, full[idx], out=t)
        else:
            arith(s_blk, full[idx], out=t)
        if clamp is not None:
            t.clamp_(-clamp, clamp)
        out[idx].copy_(t)


def quantize_v_fp8(
    v: torch.Tensor,
    scales: torch.Tensor,
    scope: ScaleScope,
    *,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    head_axis: int = -2,
    page_axis: int | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """V in ``fp8_dtype`` per Q-ROUND (saturating). ``out``, if given, receives the result."""
    qmax = fp8_max(fp8_dtype)
    s = scale_view(scales, v.shape, scope, head_axis, page_axis)
    if out is None:
        out = torch.empty(v.shape, dtype=fp8_dtype, device=v.device)
    elif out.shape != v.shape or out.dtype != fp8_dtype:
        raise UnsupportedConfigError(
            f"out is {out.dtype}{tuple(out.shape)}, need {fp8_dtype}{tuple(v.shape)}"
        )
    _blockwise(v.detach(), s.to(v.device), out, "div", qmax)
    return out


def dequantize_v_fp8(
    q: torch.Tensor,
    scales: torch.Tensor,
    scope: ScaleScope,
    *,
    out_dtype: torch.dtype = torch.float16,
    head_axis: int = -2,
    page_axis: int | None = None,
) -> torch.Tensor:
    """V' = out_dtype(float32(q) * scale) per Q-DEQUANT."""
    if not out_dtype.is_floating_point or out_dtype in FP8_DTYPES:
        raise UnsupportedConfigError(f"cannot dequantize into {out_dtype}")
    s = scale_view(scales, q.shape, scope, head_axis, page_axis)
    out = torch.empty(q.shape, dtype=out_dtype, device=q.device)
    _blockwise(q.detach(), s.to(q.device), out, "mul", None)
    return out
