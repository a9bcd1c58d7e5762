"""Q-ROUND on CUDA as one Triton kernel: the bytes of ``quant_rules`` (SPEC.md,
"Quantization rule") in one pass over V, each element read once and its FP8 byte written
once.

The kernel does not trust the conversions whose rounding varies between backends: it
widens bfloat16 by a 16-bit shift (Triton's interpreter widens bfloat16 subnormals wrong),
divides with ``div_rn`` (a correctly rounded float32 division, never the approximate one),
clamps with selects that let NaN through, and rounds to e4m3fn itself, as ``quant_numba``
does: adding and subtracting ``2^(max(e, -6) + 20)`` rounds to nearest, ties to even, at
the e4m3fn spacing of ``|y|`` (a flush of a float32 subnormal ``|y|`` to zero gives the
same byte, 0). The byte is read off the rounded value's bits, and a NaN keeps V's sign
(``0xFF`` for a NaN V did not hold: Inf/Inf, Q-NONFINITE). Triton's own fp32 -> e4m3 cast
is not used: under the interpreter it rounds ties away from zero, drops carries, truncates
subnormals and writes NaN as 0x7C (``shared/notes/kernels.md``).

Groups: as in ``quant_numba.group_runs``, at most two grouped axes (every SPEC scope;
EXTERNAL scales broadcast along more axes fall back to the torch path).

CPU-only CI runs this kernel under ``TRITON_INTERPRET=1`` (tests/test_kv_codec_quant_triton.py)
byte for byte against quant_rules; on a GPU it is opt-in with ``LMCKV_TRITON=1`` until a
device run of the same tests has shown the hardware agrees (approximate division and
subnormal flushing cannot be seen by the interpreter).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from .quant_numba import group_runs

try:
    import triton
    import triton.language as tl
except ImportError:  # the CUDA path then stays on torch
    triton = None

#: Whether the kernel can run (triton importable).
AVAILABLE = triton is not None

_KINDS = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2}
_RAW = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}
_MAX_GROUP_AXES = 2
BLOCK = 1024
#: The block under Triton's interpreter, which runs each program's block as numpy arrays:
#: larger blocks mean fewer programs run one by one in Python (16x faster here); the kernel's
#: arithmetic does not depend on the block size, only how V is cut into programs.
INTERPRETED_BLOCK = 16384


def applies(v: torch.Tensor, scales: torch.Tensor) -> bool:
    """Whether the kernel takes ``v`` with the grouped ``scales`` (V's rank): a contiguous
    tensor of float16, bfloat16 or float32, at most two grouped axes, on a device Triton
    drives (CUDA; the CPU only under the interpreter, for tests)."""
    grouped = sum(1 for a, n in enumerate(scales.shape) if n != 1 and v.shape[a] != 1)
    return v.dtype in _KINDS and v.is_contiguous() and grouped <= _MAX_GROUP_AXES


def quantize_into(
    v: torch.Tensor, scales: torch.Tensor, out: torch.Tensor, *, interpret: bool = False
) -> None:
    """Q-ROUND of ``v`` (as ``applies`` takes it) into contiguous e4m3fn ``out`` of v's
    shape, on v's device; ``scales`` is float32 of v's rank (quant_rules.group_scales).
    ``interpret`` runs the kernel in Triton's interpreter (CPU tensors), as
    ``TRITON_INTERPRET=1`` would."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    kernel = _interpreted() if interpret else _quantize_kernel
    table = scales.to(device=v.device, dtype=torch.float32).contiguous()
    run, divs, sizes, strides = group_runs(tuple(v.shape), tuple(table.shape))
    axes = [(int(d), int(n), int(s)) for d, n, s in zip(divs, sizes, strides, strict=True)]
    axes += [(1, 1, 0)] * (_MAX_GROUP_AXES - len(axes))
    n = v.numel()
    if n == 0:
        return
    block = INTERPRETED_BLOCK if interpret else BLOCK
    grid = (triton.cdiv(n, block),)
    kernel[grid](
        v.reshape(-1).view(_RAW[v.dtype]),
        table.reshape(-1),
        out.reshape(-1).view(torch.uint8),
        n,
        run,
        *axes[0],
        *axes[1],
        KIND=_KINDS[v.dtype],
        BLOCK=block,
    )


@functools.cache
def _interpreted() -> Any:
    """The kernel as Triton's interpreter runs it."""
    from triton.runtime.interpreter import InterpretedFunction

    return InterpretedFunction(_quantize_kernel.fn)


if triton is not None:

    @triton.jit  # type: ignore[untyped-decorator]
    def _quantize_kernel(
        src: Any,
        scales: Any,
        out: Any,
        n: Any,
        run: Any,
        div0: Any,
        size0: Any,
        stride0: Any,
        div1: Any,
        size1: Any,
        stride1: Any,
        KIND: tl.constexpr,
        BLOCK: tl.constexpr,
    ) -> None:
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        live = offs < n
        raw = tl.load(src + offs, mask=live, other=0)
        r = offs // run
        g = (r // div0) % size0 * stride0 + (r // div1) % size1 * stride1
        s = tl.load(scales + g, mask=live, other=1.0)
        if KIND == 0:
            bits = raw.to(tl.int32) & 0xFFFF
            x = raw.to(tl.float16, bitcast=True).to(tl.float32)
            v_nan = (bits & 0x7FFF) > 0x7C00
            v_negative = bits >= 0x8000
        elif KIND == 1:
            bits = raw.to(tl.int32) & 0xFFFF
            x = (bits << 16).to(tl.float32, bitcast=True)
            v_nan = (bits & 0x7FFF) > 0x7F80
            v_negative = bits >= 0x8000
        else:
            x = raw.to(tl.float32, bitcast=True)
            v_nan = (raw & 0x7FFFFFFF) > 0x7F800000
            v_negative = raw < 0
        y = tl.math.div_rn(x, s)
        y = tl.where(y > 448.0, 448.0, y)
        y = tl.where(y < -448.0, -448.0, y)
        b = y.to(tl.int32, bitcast=True)
        a = b & 0x7FFFFFFF
        exponent = tl.maximum(a & 0x7F800000, 121 << 23)  # 2^-6: the smallest normal
        c = (exponent + (20 << 23)).to(tl.float32, bitcast=True)
        rounded = (a.to(tl.float32, bitcast=True) + c) - c
        rb = rounded.to(tl.int32, bitcast=True)
        normal = (rb >> 20) - (120 << 3)
        subnormal = (rounded * 512.0).to(tl.int32)
        magnitude = tl.where(rb < 0x3C800000, subnormal, normal)
        finite = magnitude | ((b >> 24) & 0x80)
        nan_byte = tl.where(v_negative | (v_nan == 0), 0xFF, 0x7F)
        byte = tl.where(a > 0x7F800000, nan_byte, finite)
        tl.store(out + offs, byte.to(tl.uint8), mask=live)
