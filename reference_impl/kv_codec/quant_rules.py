"""The quantization rule of V, as SPEC.md writes it ("Quantization rule", "Scale scopes").

This is the normative path: whole tensors in float32, one torch expression per rule, so it
can be checked against the SPEC line by line. ``quant_fast`` computes the same bytes faster
and is what the codec calls; tests hold the two equal byte for byte.

Groups per scope (SPEC.md, "Scale scopes"):

- PER_TENSOR: the whole V, one scale of shape ``()``;
- PER_LAYER_HEAD: each index of V's ``head_axis``, scales of shape ``(H,)``;
- PER_PAGE_HEAD: each (``page_axis``, ``head_axis``) index pair, scales of shape ``(P, H)``
  (pages first, whatever the axis order of V);
- EXTERNAL: the caller's scales, broadcast against V (Q-EXTERNAL).
"""

from __future__ import annotations

import math

import torch

from .errors import UnsupportedConfigError
from .header import ScaleScope

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)

#: Q-SCALE: the scale of a group whose amax is 0 (or NaN).
ZERO_SCALE_SENTINEL = 1.0

_FP8_MAX = {dtype: float(torch.finfo(dtype).max) for dtype in FP8_DTYPES}


def fp8_max(dtype: torch.dtype) -> float:
    """finfo(dtype).max of an FP8 dtype: 448 for e4m3fn (the clamp bound of Q-ROUND)."""
    try:
        return _FP8_MAX[dtype]
    except KeyError:
        raise UnsupportedConfigError(f"{dtype} is not an FP8 dtype", rule="KV-V-DTYPE") from None


def _axis(axis: int, ndim: int, name: str) -> int:
    if not -ndim <= axis < ndim:
        raise UnsupportedConfigError(
            f"{name} {axis} is out of range for a {ndim}-d tensor", rule="KV-ENCODE-REFUSE"
        )
    return axis % ndim


def group_axes(
    ndim: int, scope: ScaleScope, head_axis: int, page_axis: int | None
) -> tuple[int | None, int | None]:
    """The (head, page) axes, made non-negative, that define the groups of ``scope`` in a
    tensor of ``ndim`` dimensions; None for an axis the scope does not group by."""
    if scope in (ScaleScope.PER_TENSOR, ScaleScope.EXTERNAL):
        return None, None
    if scope not in (ScaleScope.PER_LAYER_HEAD, ScaleScope.PER_PAGE_HEAD):
        raise UnsupportedConfigError(f"unknown scale scope {scope!r}", rule="KV-SCOPE")
    head = _axis(head_axis, ndim, "head_axis")
    if scope == ScaleScope.PER_LAYER_HEAD:
        return head, None
    if page_axis is None:
        raise UnsupportedConfigError("PER_PAGE_HEAD needs page_axis", rule="KV-ENCODE-REFUSE")
    page = _axis(page_axis, ndim, "page_axis")
    if page == head:
        raise UnsupportedConfigError(
            f"page_axis and head_axis are both {head}", rule="KV-ENCODE-REFUSE"
        )
    return head, page


def v_scales(
    v: torch.Tensor,
    scope: ScaleScope,
    *,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    head_axis: int = -2,
    page_axis: int | None = None,
) -> torch.Tensor:
    """Q-SCALE: float32 scales of shape ``()``, ``(H,)`` or ``(P, H)``.

    amax = max |float32(V)| over each group (NaN propagates); scale = amax / fp8 max in
    float32, or ZERO_SCALE_SENTINEL where ``amax > 0`` is false (amax 0 or NaN). An empty
    group has amax 0. EXTERNAL scales come from the caller (Q-EXTERNAL), not from V.
    The writer converts these to ``scale_dtype`` and quantizes with the converted scales.
    """
    if scope == ScaleScope.EXTERNAL:
        raise UnsupportedConfigError(
            "EXTERNAL scales come from the caller, not from V", rule="Q-EXTERNAL"
        )
    qmax = fp8_max(fp8_dtype)
    head, page = group_axes(v.ndim, scope, head_axis, page_axis)
    keep = [axis for axis in (page, head) if axis is not None]  # scale shape: pages, heads
    rest = [axis for axis in range(v.ndim) if axis not in keep]
    magnitude = v.detach().to(torch.float32).abs()
    # One row per group: the kept axes first, in scale order, then the group's elements.
    groups = magnitude.permute(*keep, *rest).reshape(
        *(v.shape[axis] for axis in keep), math.prod(v.shape[axis] for axis in rest)
    )
    if groups.shape[-1] == 0:
        amax = torch.zeros(groups.shape[:-1], dtype=torch.float32, device=v.device)
    else:
        amax = groups.amax(dim=-1)
    return torch.where(amax > 0, true_divide(amax, qmax), ZERO_SCALE_SENTINEL)


def true_divide(t: torch.Tensor, divisor: float) -> torch.Tensor:
    """``t / divisor`` correctly rounded in float32, on every device (Q-SCALE: "amax / fp8
    max in float32"). Divided by a Python number, a CUDA tensor is multiplied by the
    divisor's reciprocal instead, which is off by one unit in the last place for some amax
    (3 / 448); dividing by a tensor on t's device divides."""
    return t / torch.full((), divisor, dtype=t.dtype, device=t.device)


def group_scales(
    scales: torch.Tensor,
    shape: torch.Size,
    scope: ScaleScope,
    head_axis: int = -2,
    page_axis: int | None = None,
) -> torch.Tensor:
    """``scales`` in float32, reshaped to the rank of ``shape`` so that broadcasting gives
    each element the scale of its group; raises UnsupportedConfigError when ``scales``
    does not have the shape the scope prescribes (or, for EXTERNAL, does not broadcast).

    Never 0-d: torch computes a 16-bit tensor against a 0-d float32 tensor in the 16-bit
    dtype, which would break the float32 arithmetic of Q-ROUND and Q-DEQUANT.
    """
    s = scales.detach().to(torch.float32)
    ndim = len(shape)
    if scope == ScaleScope.EXTERNAL:  # Q-EXTERNAL: NumPy broadcasting, trailing axes aligned
        try:
            s.expand(shape)
        except RuntimeError:
            raise UnsupportedConfigError(
                f"EXTERNAL scales of shape {tuple(s.shape)} do not broadcast to V {tuple(shape)}",
                rule="Q-EXTERNAL",
            ) from None
        return s.reshape((1,) * (ndim - s.dim()) + tuple(s.shape))
    head, page = group_axes(ndim, scope, head_axis, page_axis)
    view = [1] * ndim
    if head is None:
        if s.numel() != 1:
            raise UnsupportedConfigError(
                f"PER_TENSOR takes one scale, got {tuple(s.shape)}", rule="KV-ENCODE-REFUSE"
            )
        return s.reshape(view)
    if page is None:
        if tuple(s.shape) != (shape[head],):
            raise UnsupportedConfigError(
                f"PER_LAYER_HEAD scales {tuple(s.shape)} != ({shape[head]},) heads",
                rule="KV-ENCODE-REFUSE",
            )
        view[head] = shape[head]
        return s.reshape(view)
    if tuple(s.shape) != (shape[page], shape[head]):
        raise UnsupportedConfigError(
            f"PER_PAGE_HEAD scales {tuple(s.shape)} != ({shape[page]}, {shape[head]})",
            rule="KV-ENCODE-REFUSE",
        )
    view[page], view[head] = shape[page], shape[head]
    # Stored (pages, heads): when V's head axis comes first, transpose so that each scale
    # lands on its own (page, head) group.
    return (s if page < head else s.t()).reshape(view)


def quantize(
    v: torch.Tensor,
    scales: torch.Tensor,
    scope: ScaleScope,
    *,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    head_axis: int = -2,
    page_axis: int | None = None,
) -> torch.Tensor:
    """Q-ROUND: ``fp8(clamp(float32(V) / float32(scale), -max, max))``, each element divided
    by the scale of its group (true division), rounded to nearest even by the cast."""
    qmax = fp8_max(fp8_dtype)
    s = group_scales(scales, v.shape, scope, head_axis, page_axis).to(v.device)
    x = (v.detach().to(torch.float32) / s).clamp(-qmax, qmax)
    return with_nan_signs(v, x.to(fp8_dtype), torch.isnan(x))


_SIGNED_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def with_nan_signs(v: torch.Tensor, q: torch.Tensor, nan: torch.Tensor) -> torch.Tensor:
    """Sets the sign bit of each NaN of ``q`` (V quantized; ``nan`` marks its NaNs, both of
    V's shape) in place; returns ``q``.

    Q-ROUND: a NaN of V stays NaN keeping its sign bit. Q-NONFINITE: the NaN that Inf/Inf
    gives is written negative (``0xFF``, x86's default NaN) whatever the hardware. Neither
    holds by itself: torch's float16 -> float32 conversion outside its vectorised loop
    (tensors under 8 elements, the tail of a longer one) turns a negative NaN positive, and a
    CUDA division gives a positive NaN for Inf/Inf. So the sign is read from V's bits.
    """
    source = v.detach()[nan]
    if source.numel() == 0:
        return q
    negative = source.view(_SIGNED_INT[source.element_size()]) < 0
    negative |= ~torch.isnan(source)  # a NaN of Inf/Inf
    bits = q.view(torch.uint8)
    marked = bits[nan]
    bits[nan] = torch.where(negative, marked | 0x80, marked & 0x7F)
    return q


def dequantize(
    q: torch.Tensor,
    scales: torch.Tensor,
    scope: ScaleScope,
    *,
    out_dtype: torch.dtype = torch.float16,
    head_axis: int = -2,
    page_axis: int | None = None,
) -> torch.Tensor:
    """Q-DEQUANT: ``out_dtype(float32(q) * float32(scale))``, rounded once to ``out_dtype``."""
    if not out_dtype.is_floating_point or out_dtype in FP8_DTYPES:
        raise UnsupportedConfigError(f"cannot dequantize into {out_dtype}", rule="Q-DEQUANT")
    s = group_scales(scales, q.shape, scope, head_axis, page_axis).to(q.device)
    return (q.detach().to(torch.float32) * s).to(out_dtype)
