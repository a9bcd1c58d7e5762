"""The codec's V quantization: the bytes of ``quant_rules`` (SPEC.md, "Quantization rule"),
computed faster.

``quant_rules`` is the definition; this module is how the codec meets it at speed, and tests
hold the two equal byte for byte. What it adds:

- On CPU the arithmetic runs in cache-sized blocks of float32, in a scratch buffer each
  thread allocates once, so no full-size float32 copy of V is made and no call pays the
  page faults of a fresh one. Every element still sees exactly the operations of Q-ROUND and
  Q-DEQUANT.
- Q-SCALE's amax is taken in V's own 16-bit dtype (exact), on small tensors as an integer
  max of the sign-cleared bit patterns, and few scales are computed in Python floats.
- Where numba is installed, contiguous CPU tensors go through the fused kernels of
  ``quant_numba`` instead (one pass over V per step, threads over the cores); the torch
  blocks below are the fallback without numba (or with ``LMCKV_NUMBA=0``) and the path
  off the CPU.
"""

from __future__ import annotations

import array
import math
import os
import threading
from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt
import torch

from .errors import UnsupportedConfigError
from .header import ScaleScope
from .quant_numba import (
    OUT_KINDS,
    PARALLEL_MIN,
    V_KINDS,
    SmallPayload,
    applies,
    dequantize_into,
    encode_small_into,
    group_absmax,
    quantize_into,
    small_payload_plan,
    small_quantize_into,
    small_scales,
)
from .quant_rules import (
    FP8_DTYPES,
    ZERO_SCALE_SENTINEL,
    fp8_max,
    group_axes,
    group_scales,
    true_divide,
    with_nan_signs,
)

_BLOCK = 1 << 18  # float32 elements per CPU block: 1 MiB, within the L2 of the cores sharing it
_SMALL = 1 << 22  # elements up to which a full-size |V| temporary is cheaper than two passes
# V dtypes whose values are exact in a Python float and whose amax is exact in float32, so
# the one-group scale can be computed in Python (see _tensor_scale).
_SCALAR_SCALE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_MAGNITUDE_BITS = torch.tensor(0x7FFF, dtype=torch.int16)  # clears a 16-bit float's sign
_LISTED_SCALES = 256  # groups up to which scales are computed per group in Python floats
_COMPUTED_SCOPES = (ScaleScope.PER_TENSOR, ScaleScope.PER_LAYER_HEAD, ScaleScope.PER_PAGE_HEAD)
_SCRATCH_VIEWS = 64  # shapes whose scratch views a thread keeps (see _scratch_f32)

_E4M3 = {torch.float8_e4m3fn: 0}  # the quantized V the dequantize kernel reads

Index = tuple[int | slice, ...]
_scratch = threading.local()


def untracked(t: torch.Tensor) -> torch.Tensor:
    """``t`` outside autograd (detached only when it needs to be: the call costs time)."""
    return t.detach() if t.requires_grad else t


def _scratch_f32(shape: torch.Size) -> torch.Tensor:
    """A float32 tensor of ``shape`` (at most _BLOCK elements) over this thread's reusable
    scratch. Views are kept per shape: making one costs as much as a small block's math."""
    views: dict[torch.Size, torch.Tensor] | None = getattr(_scratch, "views", None)
    if views is None:
        views = _scratch.views = {}
        _scratch.buf = torch.empty(_BLOCK, dtype=torch.float32)
    view = views.get(shape)
    if view is None:
        if len(views) >= _SCRATCH_VIEWS:
            views.clear()
        view = views[shape] = _scratch.buf[: math.prod(shape)].view(shape)
    return view


def compute_v_scales(
    v: torch.Tensor,
    scope: ScaleScope,
    *,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    head_axis: int = -2,
    page_axis: int | None = None,
) -> torch.Tensor:
    """quant_rules.v_scales (Q-SCALE), faster: float32 scales of shape (), (H,) or (P, H)."""
    qmax = fp8_max(fp8_dtype)
    if scope == ScaleScope.EXTERNAL:
        raise UnsupportedConfigError(
            "EXTERNAL scales come from the caller, not from V", rule="Q-EXTERNAL"
        )
    head, page = group_axes(v.ndim, scope, head_axis, page_axis)
    keep = tuple(a for a in (page, head) if a is not None)
    # One group of a small V: torch's single aminmax costs less than the kernel's call.
    kernel = applies(v, V_KINDS) and (head is not None or v.numel() >= PARALLEL_MIN)
    if kernel and 0 < v.numel() < PARALLEL_MIN:  # a small blob: one kernel call, in numpy
        small = small_scales(untracked(v), tuple(sorted(keep)), qmax, ZERO_SCALE_SENTINEL)
        return (
            small.t().contiguous()
            if page is not None and head is not None and page > head
            else small
        )
    if head is None and not kernel and v.device.type == "cpu" and v.dtype in _SCALAR_SCALE_DTYPES:
        return _float32_tensor([_tensor_scale(untracked(v), qmax)]).view(())
    if kernel:
        amax = group_absmax(untracked(v), keep)
    elif v.numel() == 0:
        amax = torch.zeros([v.shape[a] for a in sorted(keep)], dtype=torch.float32, device=v.device)
    else:
        amax = _group_absmax(untracked(v), keep)
    if page is not None and head is not None and page > head:
        amax = amax.transpose(0, 1)
    if (
        amax.numel() <= _LISTED_SCALES
        and amax.device.type == "cpu"
        and amax.dtype in _SCALAR_SCALE_DTYPES
    ):
        # Few groups: the rule of _tensor_scale per group costs less than three tensor ops.
        scales = [a / qmax if a > 0 else ZERO_SCALE_SENTINEL for a in amax.reshape(-1).tolist()]
        return _float32_tensor(scales).view(amax.shape)
    amax = amax.to(torch.float32)
    return torch.where(amax > 0, true_divide(amax, qmax), ZERO_SCALE_SENTINEL)


def small_payload(
    v: torch.Tensor,
    k: torch.Tensor,
    scope: ScaleScope,
    *,
    scale_dtype: torch.dtype,
    fp8_dtype: torch.dtype,
    head_axis: int,
    page_axis: int | None,
) -> SmallPayload | None:
    """How one kernel call writes this blob's payload (``write_small_payload``), where it
    can: numba enabled; a non-empty contiguous CPU V under PARALLEL_MIN elements, a
    contiguous CPU K, float32 scales computed from V, e4m3fn. Else None."""
    if not (
        fp8_dtype == torch.float8_e4m3fn
        and scale_dtype == torch.float32
        and scope in _COMPUTED_SCOPES
        and 0 < v.numel() < PARALLEL_MIN
        and applies(v, V_KINDS)
        and k.device.type == "cpu"
        and k.is_contiguous()
    ):
        return None
    return small_payload_plan(tuple(v.shape), scope, head_axis, page_axis)


def write_small_payload(
    plan: SmallPayload,
    v: torch.Tensor,
    k: torch.Tensor,
    blob: npt.NDArray[np.uint8],
    offsets: tuple[int, int, int],
) -> None:
    """K, V quantized (Q-SCALE, Q-ROUND) and its float32 scales written into ``blob`` at
    ``offsets`` (K, V, scales) by one kernel call, as ``plan`` says."""
    encode_small_into(untracked(v), untracked(k), plan, blob, offsets)


def _float32_tensor(values: list[float]) -> torch.Tensor:
    """A CPU float32 tensor of ``values``, each rounded to nearest float32 (the C cast
    ``array`` applies), made in a third of the time ``torch.tensor`` takes."""
    if not values:  # frombuffer refuses an empty buffer
        return torch.empty(0, dtype=torch.float32)
    return torch.frombuffer(array.array("f", values), dtype=torch.float32)


def _tensor_scale(v: torch.Tensor, qmax: float) -> float:
    """Q-SCALE of one group, in Python floats. amax is exact in float32 for the dtypes of
    _SCALAR_SCALE_DTYPES, and amax / qmax rounded once to float32 (by the caller's
    ``_float32_tensor``) is the float32 quotient: a double carries more than 2 x 24 + 2
    bits, so rounding its quotient again is exact."""
    if v.numel() == 0:
        return ZERO_SCALE_SENTINEL
    lo_t, hi_t = torch.aminmax(v)
    lo, hi = lo_t.item(), hi_t.item()
    amax = max(hi, -lo)
    if math.isnan(lo) or math.isnan(hi) or not amax > 0:
        return ZERO_SCALE_SENTINEL
    return amax / qmax


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
        bits = torch.bitwise_and(v.view(torch.int16), _MAGNITUDE_BITS)
        if reduce[-1] == v.ndim - 1 and len(reduce) > 1:  # the contiguous axis first: faster
            bits, reduce = bits.amax(dim=-1), reduce[:-1]
        return bits.amax(dim=reduce).view(v.dtype)
    return v.abs().amax(dim=reduce)


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
    arith: Callable[..., torch.Tensor],
    clamp: float | None,
) -> None:
    """out = cast(clamp(float32(src) arith scale)) in float32 blocks of the thread's scratch;
    with ``clamp`` (quantization) NaNs of out keep src's sign (``with_nan_signs``).

    ``scale`` has src's rank (``group_scales``): against a 0-d tensor (or a Python number)
    torch would compute in src's 16-bit dtype, or multiply by a reciprocal, and either
    changes the bytes. Mixed 16/32-bit arithmetic widens src to float32 element by
    element, so the float32 conversion costs no separate pass; FP8 sources (which torch
    does not promote) are widened explicitly first.
    """
    widen = src.dtype in FP8_DTYPES
    if src.device.type != "cpu":
        _whole(src, scale, out, arith, clamp)
        return
    if src.numel() <= _BLOCK:
        _block(src, scale, out, _scratch_f32(src.shape), arith, clamp, widen)
        return
    full = scale.expand(src.shape)  # so that each block's index applies to it too
    for idx in _blocks(src.shape, _BLOCK):
        s_blk = src[idx]
        _block(s_blk, full[idx], out[idx], _scratch_f32(s_blk.shape), arith, clamp, widen)


def _block(
    src: torch.Tensor,
    scale: torch.Tensor,
    out: torch.Tensor,
    tmp: torch.Tensor,
    arith: Callable[..., torch.Tensor],
    clamp: float | None,
    widen: bool,
) -> None:
    """One block of _blockwise through the float32 ``tmp`` (src's shape)."""
    if widen:
        tmp.copy_(src)
        arith(tmp, scale, out=tmp)
    else:
        arith(src, scale, out=tmp)
    if clamp is not None:
        tmp.clamp_(-clamp, clamp)
    out.copy_(tmp)
    # A clamped block is a quantization (Q-ROUND): its NaNs take their sign from src. Once
    # clamped, the block sums to a finite number unless it holds a NaN (one pass over it
    # while it is in cache; the mask is made only when there is one).
    if clamp is not None and math.isnan(float(tmp.sum())):
        with_nan_signs(src, out, torch.isnan(tmp))


def _whole(
    src: torch.Tensor,
    scale: torch.Tensor,
    out: torch.Tensor,
    arith: Callable[..., torch.Tensor],
    clamp: float | None,
) -> None:
    """_blockwise off the CPU: one block, the whole tensor, through a float32 tensor there."""
    tmp = torch.empty(src.shape, dtype=torch.float32, device=src.device)
    _block(src, scale, out, tmp, arith, clamp, src.dtype in FP8_DTYPES)


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
    """quant_rules.quantize (Q-ROUND), in blocks; ``out``, if given, receives the result."""
    qmax = fp8_max(fp8_dtype)
    s = group_scales(scales, v.shape, scope, head_axis, page_axis)
    if out is None:
        out = torch.empty(v.shape, dtype=fp8_dtype, device=v.device)
    elif out.shape != v.shape or out.dtype != fp8_dtype:
        raise UnsupportedConfigError(
            f"out is {out.dtype}{tuple(out.shape)}, need {fp8_dtype}{tuple(v.shape)}", rule=None
        )
    e4m3 = fp8_dtype == torch.float8_e4m3fn and out.is_contiguous()
    if e4m3 and applies(v, V_KINDS) and 0 < v.numel() < PARALLEL_MIN:  # one kernel call
        small_quantize_into(untracked(v), s.contiguous().numpy(), out)
    elif e4m3 and applies(v, V_KINDS):
        quantize_into(untracked(v), s, out)
    elif not (e4m3 and _triton_quantize(untracked(v), s, out)):
        _blockwise(untracked(v), s.to(v.device), out, torch.div, qmax)
    return out


def _triton_quantize(v: torch.Tensor, scales: torch.Tensor, out: torch.Tensor) -> bool:
    """Q-ROUND of a CUDA ``v`` by the Triton kernel (``quant_triton``), where
    ``LMCKV_TRITON=1`` asks for it, triton is installed and the kernel takes ``v``; False
    (nothing written) otherwise. Opt-in until a device run has checked the kernel."""
    if v.device.type != "cuda" or os.environ.get("LMCKV_TRITON") != "1":
        return False
    from . import quant_triton  # imports triton: only here

    if not (quant_triton.AVAILABLE and quant_triton.applies(v, scales)):
        return False
    quant_triton.quantize_into(v, scales, out)
    return True


def dequantize_v_fp8(
    q: torch.Tensor,
    scales: torch.Tensor,
    scope: ScaleScope,
    *,
    out_dtype: torch.dtype = torch.float16,
    head_axis: int = -2,
    page_axis: int | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """quant_rules.dequantize (Q-DEQUANT), in blocks; into ``out`` (contiguous, of q's
    element count and ``out_dtype``) when given, else a new tensor. Returns it in q's shape."""
    if not out_dtype.is_floating_point or out_dtype in FP8_DTYPES:
        raise UnsupportedConfigError(f"cannot dequantize into {out_dtype}", rule="Q-DEQUANT")
    s = group_scales(scales, q.shape, scope, head_axis, page_axis)
    if out is None:
        out = torch.empty(q.shape, dtype=out_dtype, device=q.device)
    elif not out.is_contiguous() or out.dtype != out_dtype or out.numel() != q.numel():
        raise UnsupportedConfigError(
            f"out is {out.dtype} x {out.numel()} (contiguous: {out.is_contiguous()}), "
            f"dequantizing needs contiguous {out_dtype} x {q.numel()}",
            rule=None,
        )
    else:
        out = out.view(q.shape)
    if applies(q, _E4M3) and out_dtype in OUT_KINDS:
        dequantize_into(untracked(q), s, out)
    else:
        _blockwise(untracked(q), s.to(q.device), out, torch.mul, None)
    return out
