"""Fused CPU kernels for Q-SCALE's amax, Q-ROUND and Q-DEQUANT, compiled by numba.

The same bytes as ``quant_rules`` (SPEC.md, "Quantization rule"), in one pass over V per
step: the amax pass reads V once, the quantize pass reads V once and writes each FP8 byte
once, straight into the caller's buffer; no float32 copy of V is made. ``quant_fast``
calls these kernels when numba is installed (``AVAILABLE``) and falls back to its torch
path otherwise; tests hold both equal to ``quant_rules`` byte for byte.

How each rule is met without a float32 temporary:

- Q-SCALE amax: an integer max of the sign-cleared bit patterns (16 bits for float16 and
  bfloat16, 32 for float32): for IEEE floats that order is the order of magnitudes, and
  NaN patterns sort above Inf, so NaN propagates as the rule says.
- Q-ROUND: ``float32(V)`` is the hardware widening (float16), a 16-bit shift (bfloat16) or
  the value itself; the division is a true float32 division (an LLVM ``fdiv float``); the
  clamp is two compares that let NaN through; the e4m3fn rounding adds and subtracts
  ``2^(max(e, -6) + 20)`` in float32, whose spacing at that magnitude is the e4m3fn
  spacing at ``|y|``, so the float32 addition rounds to nearest, ties to even, subnormals
  included. The byte is then read off the rounded float32's bits. A NaN keeps V's sign
  bit; a NaN of V not being NaN (Inf/Inf, 0/0, a NaN scale) is ``0xFF`` (Q-NONFINITE).
- Q-DEQUANT: ``float32(q)`` from a 256-entry table (exact), times the float32 scale, then
  rounded once to the output dtype (hardware narrowing for float16, round-to-nearest-even
  on the bits for bfloat16). SPEC leaves an output NaN's sign and payload open; the kernel
  writes those of PyTorch's x86 casts, as conformance/oracle does.

Groups in any scope and axis order: V is walked in C order as *runs*, the elements after
the last grouped axis, which share one scale. The scale of run ``r`` is at
``sum((r // divs[i]) % sizes[i] * strides[i])`` (``group_runs``), computed once per run,
never per element.

A small blob's payload in one call (``encode_small_into``): the amax pass, the scales
(written as little-endian float32 bytes in the stored order), K's bytes and the Q-ROUND pass
run in one kernel straight into the blob, so a 16-token page spends its time on its bytes
rather than on a dozen calls between Python, torch and numpy.

Threads: the work is split into one contiguous range per numba thread (``numba.prange``);
numba's default is one thread per core, and ``NUMBA_NUM_THREADS`` (or
``numba.set_num_threads``) changes it. Tensors under ``PARALLEL_MIN`` elements run on one
thread, where a parallel launch would cost more than it saves.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar, cast

import numpy as np
import numpy.typing as npt
import torch

from .header import ScaleScope
from .quant_rules import ZERO_SCALE_SENTINEL, fp8_max, group_axes

try:
    import numba
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic
except ImportError:  # numba is optional: quant_fast falls back to its torch path
    numba = None  # type: ignore[assignment]

_F = TypeVar("_F", bound=Callable[..., Any])

#: Whether the kernels can run (numba importable).
AVAILABLE = numba is not None

#: Elements below which one thread does the work.
PARALLEL_MIN = 1 << 16

#: V dtypes the kernels read: the dtype, its raw-bits dtype in numpy, and its kernel kind.
V_KINDS = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2}
#: Output dtypes of Q-DEQUANT the kernels write, by kernel kind.
OUT_KINDS = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2}

#: Q-SCALE's constants for e4m3fn, as the fused encode kernel takes them.
_QMAX = np.float32(fp8_max(torch.float8_e4m3fn))
_SENTINEL = np.float32(ZERO_SCALE_SENTINEL)

_RAW = {1: torch.uint8, 2: torch.int16, 4: torch.int32}  # raw bits by element size

#: Off with LMCKV_NUMBA=0 (quant_fast then runs its torch path), and when numba is missing.
ENABLED = AVAILABLE and os.environ.get("LMCKV_NUMBA", "1") != "0"


@functools.lru_cache(maxsize=256)
def group_runs(
    shape: tuple[int, ...], group_shape: tuple[int, ...]
) -> tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(run length, divs, sizes, strides) for V of ``shape`` whose groups are indexed by
    the axes where ``group_shape`` (V's rank, 1 on axes not grouped) is not 1, the group
    table being C-contiguous of ``group_shape``.

    A run is the elements after the last grouped axis; run ``r``'s group is
    ``sum((r // divs[i]) % sizes[i] * strides[i])``. Cached per shapes (a small blob's call
    would otherwise spend more here than in the kernel): callers never write the arrays.
    """
    axes = [a for a, n in enumerate(group_shape) if n != 1 and shape[a] != 1]
    table_strides = [math.prod(group_shape[a + 1 :]) for a in range(len(group_shape))]
    last = axes[-1] if axes else -1
    run = math.prod(shape[last + 1 :])
    divs = [math.prod(shape[a + 1 : last + 1]) for a in axes]
    return (
        run,
        np.array(divs, dtype=np.int64),
        np.array([shape[a] for a in axes], dtype=np.int64),
        np.array([table_strides[a] for a in axes], dtype=np.int64),
    )


def set_threads(threads: int) -> None:
    """Run the kernels on ``threads`` threads (at most numba's pool, NUMBA_NUM_THREADS;
    nothing without numba). The benchmark sets it with torch's, so both use the same."""
    if numba is not None and threads > 0:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]


def _chunks(numel: int) -> int:
    """How many contiguous ranges the work is split into: one per thread, one when small."""
    if numel < PARALLEL_MIN or numba is None:
        return 1
    return max(1, min(numba.get_num_threads(), numel // PARALLEL_MIN))


def applies(t: torch.Tensor, dtypes: Mapping[torch.dtype, int]) -> bool:
    """Whether the kernels take ``t``: numba present and ENABLED, a contiguous CPU tensor
    of one of ``dtypes`` (V_KINDS, or {float8_e4m3fn: 0} for a quantized V)."""
    return ENABLED and t.device.type == "cpu" and t.dtype in dtypes and t.is_contiguous()


def _flat_bits(t: torch.Tensor) -> npt.NDArray[Any]:
    """The raw bits of a contiguous tensor as a flat signed-integer (bytes: unsigned)
    numpy array."""
    return t.view(_RAW[t.element_size()]).numpy().reshape(-1)  # numpy's reshape: cheaper


def group_absmax(v: torch.Tensor, keep: tuple[int, ...]) -> torch.Tensor:
    """max |V| over every axis not in ``keep`` (Q-SCALE's amax: exact, NaN-propagating),
    in V's dtype, the kept axes in their order in V. ``v`` as ``applies`` takes it."""
    group_shape = tuple(n if a in keep else 1 for a, n in enumerate(v.shape))
    run, divs, sizes, strides = group_runs(tuple(v.shape), group_shape)
    nchunks = _chunks(v.numel())
    partial = np.zeros((nchunks, math.prod(group_shape)), dtype=np.int64)
    if v.numel():
        kernel = _absmax_serial if nchunks == 1 else _absmax_parallel
        kernel(_flat_bits(v), run, divs, sizes, strides, partial)
    best = partial.max(axis=0).astype(np.int32 if v.element_size() == 4 else np.int16)
    return torch.from_numpy(best.reshape([v.shape[a] for a in sorted(keep)])).view(v.dtype)


def small_scales(
    v: torch.Tensor, keep: tuple[int, ...], qmax: float, sentinel: float
) -> torch.Tensor:
    """Q-SCALE of a non-empty V under PARALLEL_MIN elements (as ``applies`` takes it) grouped by the
    axes ``keep`` (sorted), in numpy from one kernel call: the float32 scales with the kept
    axes in V's order. amax is exact in float32 (the widened bit pattern of the largest
    magnitude, NaN when a group holds one); scale = amax / qmax, one float32 division (what
    ``quant_rules.true_divide`` computes), or ``sentinel`` where ``amax > 0`` is false. A
    small blob's call spends less here than through ``group_absmax`` and torch."""
    group_shape = tuple(n if a in keep else 1 for a, n in enumerate(v.shape))
    run, divs, sizes, strides = group_runs(tuple(v.shape), group_shape)
    partial = np.zeros((1, math.prod(group_shape)), dtype=np.int64)
    _absmax_serial(_flat_bits(v), run, divs, sizes, strides, partial)
    bits = partial[0]
    if v.dtype == torch.float16:
        amax = bits.astype(np.uint16).view(np.float16).astype(np.float32)
    elif v.dtype == torch.bfloat16:
        amax = (bits.astype(np.uint32) << 16).view(np.float32)
    else:
        amax = bits.astype(np.uint32).view(np.float32)
    scales = amax / np.float32(qmax)  # float32 / float32: one correctly rounded division
    scales[~(amax > 0)] = sentinel  # amax 0 or NaN
    return torch.from_numpy(scales.reshape([v.shape[a] for a in keep]))


def small_quantize_into(v: torch.Tensor, table: npt.NDArray[np.float32], out: torch.Tensor) -> None:
    """``quantize_into`` for a V under PARALLEL_MIN elements whose float32 scales ``table``
    (numpy, V's rank, 1 on axes not grouped) are already laid out: one kernel call."""
    run, divs, sizes, strides = group_runs(tuple(v.shape), table.shape)
    kernel_args = (run, divs, sizes, strides, _flat_bits(out), 1, V_KINDS[v.dtype])
    _map_serial(_flat_bits(v), table.reshape(-1), *kernel_args)


class SmallPayload(NamedTuple):
    """What ``encode_small_into`` needs of a V shape and scope, worked out once per shape:
    the stored scale shape, the runs of the kept axes (``group_runs``) and where each group
    of the V-order table stands in the stored one."""

    scale_shape: tuple[int, ...]
    run: int
    divs: npt.NDArray[np.int64]
    sizes: npt.NDArray[np.int64]
    strides: npt.NDArray[np.int64]
    store: npt.NDArray[np.int64]


@functools.lru_cache(maxsize=256)
def small_payload_plan(
    shape: tuple[int, ...], scope: ScaleScope, head_axis: int, page_axis: int | None
) -> SmallPayload:
    """The SmallPayload of V of ``shape`` in ``scope`` (its groups by ``group_axes``; the
    stored table is (page, head), the transpose of V's order when the page axis comes
    after the head axis). Raises as ``group_axes`` does for bad axes."""
    head, page = group_axes(len(shape), scope, head_axis, page_axis)
    stored = [a for a in (page, head) if a is not None]
    keep = sorted(stored)
    group_shape = tuple(n if a in keep else 1 for a, n in enumerate(shape))
    run, divs, sizes, strides = group_runs(shape, group_shape)
    order: npt.NDArray[np.int64] = np.arange(math.prod(shape[a] for a in keep), dtype=np.int64)
    if stored != keep:  # (page, head) stored, (head, page) in V
        rows, cols = shape[keep[0]], shape[keep[1]]
        order = np.asarray((order % cols) * rows + order // cols, dtype=np.int64)
    return SmallPayload(tuple(shape[a] for a in stored), run, divs, sizes, strides, order)


def encode_small_into(
    v: torch.Tensor,
    k: torch.Tensor,
    plan: SmallPayload,
    blob: npt.NDArray[np.uint8],
    offsets: tuple[int, int, int],
) -> None:
    """A small blob's payload in one kernel call: K's bytes, V's e4m3fn bytes (Q-ROUND) and
    the float32 scales (Q-SCALE over ``plan``'s groups, in its stored order) written into
    ``blob`` at ``offsets`` (K, V, scales). ``v`` and ``k`` as ``applies`` takes them,
    ``v`` non-empty and under PARALLEL_MIN elements; the scale rule is ``small_scales``'s,
    the rounding ``quantize_into``'s."""
    _encode_small(
        _flat_bits(v), V_KINDS[v.dtype], plan.run, plan.divs, plan.sizes, plan.strides,
        plan.store, _QMAX, _SENTINEL, k.reshape(-1).view(torch.uint8).numpy(), blob, *offsets,
    )  # fmt: skip


def quantize_into(v: torch.Tensor, scales: torch.Tensor, out: torch.Tensor) -> None:
    """Q-ROUND of ``v`` (as ``applies`` takes it) into contiguous e4m3fn ``out`` of v's
    shape; ``scales`` is float32 of v's rank, broadcasting against it
    (``quant_rules.group_scales``)."""
    _run_elementwise(v, scales, out, V_KINDS[v.dtype])


def dequantize_into(q: torch.Tensor, scales: torch.Tensor, out: torch.Tensor) -> None:
    """Q-DEQUANT of contiguous CPU e4m3fn ``q`` into contiguous ``out`` (q's shape, a dtype
    in OUT_KINDS); ``scales`` as for quantize_into."""
    _run_elementwise(q, scales, out, 3 + OUT_KINDS[out.dtype])


def _run_elementwise(src: torch.Tensor, scales: torch.Tensor, out: torch.Tensor, op: int) -> None:
    """The element-wise kernel ``op`` (see _map_range) over src's runs, on one thread or
    several."""
    if src.numel() == 0:
        return
    table = scales.contiguous()
    run, divs, sizes, strides = group_runs(tuple(src.shape), tuple(table.shape))
    nchunks = _chunks(src.numel())
    kernel = _map_serial if nchunks == 1 else _map_parallel
    kernel(
        _flat_bits(src),
        table.numpy().reshape(-1),
        run,
        divs,
        sizes,
        strides,
        _flat_bits(out),
        nchunks,
        op,
    )


def _i32(value: int) -> Any:
    return ir.Constant(ir.IntType(32), value)


def _f32(value: float) -> Any:
    return ir.Constant(ir.FloatType(), value)


def _widen(builder: Any, raw: Any, kind: int) -> tuple[Any, Any, Any]:
    """(float32(V), V is NaN, V's sign bit is set) from V's raw bits (i16 or i32)."""
    if kind == 0:  # float16: the hardware widening (exact)
        x = builder.fpext(builder.bitcast(raw, ir.HalfType()), ir.FloatType())
        magnitude, inf = builder.and_(raw, ir.Constant(raw.type, 0x7FFF)), 0x7C00
    elif kind == 1:  # bfloat16: the high half of a float32
        x = builder.bitcast(
            builder.shl(builder.zext(raw, ir.IntType(32)), _i32(16)), ir.FloatType()
        )
        magnitude, inf = builder.and_(raw, ir.Constant(raw.type, 0x7FFF)), 0x7F80
    else:
        x = builder.bitcast(raw, ir.FloatType())
        magnitude, inf = builder.and_(raw, _i32(0x7FFFFFFF)), 0x7F800000
    is_nan = builder.icmp_unsigned(">", magnitude, ir.Constant(raw.type, inf))
    negative = builder.icmp_signed("<", raw, ir.Constant(raw.type, 0))
    return x, is_nan, negative


def _e4m3_byte_ir(builder: Any, x: Any, s: Any, x_is_nan: Any, x_negative: Any) -> Any:
    """Q-ROUND of float32 ``x`` by float32 ``s`` as an i8, in 32-bit lanes (see the module
    docstring): true division, a clamp that lets NaN through, rounding by adding and
    subtracting 2^(max(e, -6) + 20) in float32, the byte read off the rounded bits."""
    y = builder.fdiv(x, s)
    y = builder.select(builder.fcmp_ordered(">", y, _f32(448.0)), _f32(448.0), y)
    y = builder.select(builder.fcmp_ordered("<", y, _f32(-448.0)), _f32(-448.0), y)
    b = builder.bitcast(y, ir.IntType(32))
    a = builder.and_(b, _i32(0x7FFFFFFF))
    exponent = builder.and_(a, _i32(0x7F800000))
    floor = _i32(121 << 23)  # 2^-6, the smallest normal e4m3fn
    exponent = builder.select(builder.icmp_unsigned("<", exponent, floor), floor, exponent)
    c = builder.bitcast(builder.add(exponent, _i32(20 << 23)), ir.FloatType())
    r = builder.fsub(builder.fadd(builder.bitcast(a, ir.FloatType()), c), c)
    rb = builder.bitcast(r, ir.IntType(32))
    normal = builder.or_(
        builder.shl(builder.sub(builder.lshr(rb, _i32(23)), _i32(120)), _i32(3)),
        builder.and_(builder.lshr(rb, _i32(20)), _i32(7)),
    )
    subnormal = builder.fptosi(builder.fmul(r, _f32(512.0)), ir.IntType(32))
    magnitude = builder.select(builder.icmp_unsigned("<", rb, _i32(0x3C800000)), subnormal, normal)
    finite = builder.or_(magnitude, builder.and_(builder.lshr(b, _i32(24)), _i32(0x80)))
    nan_negative = builder.or_(x_negative, builder.not_(x_is_nan))  # Q-NONFINITE: 0xFF
    nan_byte = builder.select(nan_negative, _i32(0xFF), _i32(0x7F))
    is_nan = builder.icmp_unsigned(">", a, _i32(0x7F800000))
    return builder.trunc(builder.select(is_nan, nan_byte, finite), ir.IntType(8))


def _e4m3_to_f32_ir(builder: Any, q: Any) -> Any:
    """float32 of the e4m3fn byte ``q`` (i8), exactly: normal bytes by moving the fields,
    subnormal ones as m x 2^-9, 0x7F/0xFF as NaN of that sign."""
    q32 = builder.zext(q, ir.IntType(32))
    mag = builder.and_(q32, _i32(0x7F))
    sign = builder.shl(builder.and_(q32, _i32(0x80)), _i32(24))
    normal = builder.bitcast(
        builder.add(builder.shl(mag, _i32(20)), _i32(120 << 23)), ir.FloatType()
    )
    subnormal = builder.fmul(builder.sitofp(mag, ir.FloatType()), _f32(2.0**-9))
    value = builder.select(builder.icmp_unsigned("<", mag, _i32(8)), subnormal, normal)
    bits = builder.select(
        builder.icmp_unsigned("==", mag, _i32(0x7F)),
        _i32(0x7FF00000),  # NaN: the code's mantissa in the top bits, as widening does
        builder.bitcast(value, ir.IntType(32)),
    )
    return builder.bitcast(builder.or_(bits, sign), ir.FloatType())


def _is_nan_ir(builder: Any, bits: Any) -> Any:
    return builder.icmp_unsigned(">", builder.and_(bits, _i32(0x7FFFFFFF)), _i32(0x7F800000))


def _product_ir(builder: Any, x: Any, s: Any) -> Any:
    """The bits of float32 ``x * s`` with x86's NaN rule made explicit (LLVM may swap the
    operands): a NaN operand propagates quieted, x's first; an invalid product (0 x Inf) is
    the default NaN 0xFFC00000 (conformance/oracle's ``NanPolicy``)."""
    p = builder.bitcast(builder.fmul(x, s), ir.IntType(32))
    xb = builder.bitcast(x, ir.IntType(32))
    sb = builder.bitcast(s, ir.IntType(32))
    quiet = _i32(0x00400000)
    nan = builder.select(
        _is_nan_ir(builder, xb),
        builder.or_(xb, quiet),
        builder.select(_is_nan_ir(builder, sb), builder.or_(sb, quiet), _i32(-0x00400000)),
    )
    return builder.select(_is_nan_ir(builder, p), nan, p)


def _narrow_ir(builder: Any, b: Any, kind: int) -> Any:
    """The float32 bits ``b`` rounded once to the output dtype (nearest, ties to even): i16
    for float16 (hardware narrowing) and bfloat16 (on the bits), i32 for float32. NaNs as
    PyTorch's x86 casts write them (conformance/oracle's ``NanPolicy``; SPEC leaves them
    open): float16 keeps the sign and the top mantissa bits, quieted; bfloat16 is 0xFFFF."""
    if kind == 2:
        return b
    is_nan = _is_nan_ir(builder, b)
    if kind == 0:
        p = builder.bitcast(b, ir.FloatType())
        bits = builder.zext(
            builder.bitcast(builder.fptrunc(p, ir.HalfType()), ir.IntType(16)), ir.IntType(32)
        )
        sign = builder.lshr(builder.and_(b, _i32(-0x80000000)), _i32(16))
        top = builder.lshr(builder.and_(b, _i32(0x7FFFFF)), _i32(13))
        nan = builder.or_(builder.or_(sign, _i32(0x7E00)), top)
    else:
        odd = builder.and_(builder.lshr(b, _i32(16)), _i32(1))
        bits = builder.lshr(builder.add(builder.add(b, _i32(0x7FFF)), odd), _i32(16))
        nan = _i32(0xFFFF)
    return builder.trunc(builder.select(is_nan, nan, bits), ir.IntType(16))


if numba is not None:

    def _quantizer(kind: int) -> Any:
        """An intrinsic (raw V bits, float32 scale) -> e4m3fn byte for V kind ``kind``."""
        raw_type = types.int32 if kind == 2 else types.int16

        @intrinsic
        def quantize_one(typingctx: Any, raw: Any, scale: Any) -> Any:
            sig = types.uint8(raw_type, types.float32)

            def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
                x, is_nan, negative = _widen(builder, args[0], kind)
                return _e4m3_byte_ir(builder, x, args[1], is_nan, negative)

            return sig, codegen

        return quantize_one

    def _dequantizer(kind: int) -> Any:
        """An intrinsic (e4m3fn byte, float32 scale) -> output bits for out kind ``kind``."""
        out_type = types.int32 if kind == 2 else types.int16

        @intrinsic
        def dequantize_one(typingctx: Any, q: Any, scale: Any) -> Any:
            sig = out_type(types.uint8, types.float32)

            def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
                p = _product_ir(builder, _e4m3_to_f32_ir(builder, args[0]), args[1])
                return _narrow_ir(builder, p, kind)

            return sig, codegen

        return dequantize_one

    def _amax_widener(kind: int) -> Any:
        """An intrinsic: sign-cleared raw bits of V kind ``kind`` (held in an int64) ->
        float32 of that magnitude, exactly (NaN for a NaN pattern)."""
        raw_bits = 32 if kind == 2 else 16

        @intrinsic
        def widen_one(typingctx: Any, bits: Any) -> Any:
            sig = types.float32(types.int64)

            def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
                raw = builder.trunc(args[0], ir.IntType(raw_bits))
                return _widen(builder, raw, kind)[0]

            return sig, codegen

        return widen_one

    def _bits_reader() -> Any:
        """An intrinsic: float32 -> its IEEE bits, as an unsigned 32-bit integer in an int64."""

        @intrinsic
        def f32_bits(typingctx: Any, x: Any) -> Any:
            sig = types.int64(types.float32)

            def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
                return builder.zext(builder.bitcast(args[0], ir.IntType(32)), ir.IntType(64))

            return sig, codegen

        return f32_bits

    _w_f16, _w_bf16, _w_f32 = (_amax_widener(k) for k in range(3))
    _f32_bits = _bits_reader()
    _q_f16, _q_bf16, _q_f32 = (_quantizer(k) for k in range(3))
    _dq_f16, _dq_bf16, _dq_f32 = (_dequantizer(k) for k in range(3))

    def _compiled(*, parallel: bool = False, inline: bool = False) -> Callable[[_F], _F]:
        """numba.njit with every kernel's options: IEEE arithmetic (fastmath off), numpy's
        error model, no GIL, the machine code cached on disk (no JIT on later runs)."""
        return cast(
            Callable[[_F], _F],
            numba.njit(
                parallel=parallel,
                inline="always" if inline else "never",
                nogil=True,
                cache=True,
                fastmath=False,
                error_model="numpy",
            ),
        )

    @_compiled(inline=True)
    def _scale_index(r: int, divs: Any, sizes: Any, strides: Any) -> int:
        """The group of run ``r`` (see group_runs)."""
        g = 0
        for i in range(divs.shape[0]):
            g += (r // divs[i]) % sizes[i] * strides[i]
        return g

    # Each kernel is one inline body over the elements [lo, hi), and two drivers: one thread
    # over everything (no parallel launch for small tensors), or one range per prange
    # iteration. Element indexes are unsigned: with signed ones numba adds a negative-index
    # wraparound to every access, which turns the vector loads into gathers (4-10x slower).

    @_compiled(inline=True)
    def _absmax_range(
        src: Any, run: int, divs: Any, sizes: Any, strides: Any, best: Any, lo: int, hi: int
    ) -> None:
        """best[g] = max(best[g], sign-cleared bits of src[lo:hi] in group g)."""
        mask = 0x7FFFFFFF if src.itemsize == 4 else 0x7FFF
        i = lo
        while i < hi:
            r = i // run
            end = min((r + 1) * run, hi)
            m = 0
            for j in range(np.uint64(i), np.uint64(end)):
                m = max(m, src[j] & mask)
            g = _scale_index(r, divs, sizes, strides)
            best[g] = max(best[g], m)
            i = end

    @_compiled(inline=True)
    def _map_range(
        src: Any, scales: Any, run: int, divs: Any, sizes: Any, strides: Any, out: Any,
        op: int, lo: int, hi: int,
    ) -> None:  # fmt: skip
        """out[lo:hi] = op(src[lo:hi]) by each run's scale: op 0-2 Q-ROUND of float16,
        bfloat16, float32 bits; op 3-5 Q-DEQUANT into float16, bfloat16, float32 bits."""
        i = lo
        while i < hi:
            r = i // run
            end = min((r + 1) * run, hi)
            s = scales[_scale_index(r, divs, sizes, strides)]
            first, last = np.uint64(i), np.uint64(end)
            if op == 0:
                for j in range(first, last):
                    out[j] = _q_f16(src[j], s)
            elif op == 1:
                for j in range(first, last):
                    out[j] = _q_bf16(src[j], s)
            elif op == 2:
                for j in range(first, last):
                    out[j] = _q_f32(src[j], s)
            elif op == 3:
                for j in range(first, last):
                    out[j] = _dq_f16(src[j], s)
            elif op == 4:
                for j in range(first, last):
                    out[j] = _dq_bf16(src[j], s)
            else:
                for j in range(first, last):
                    out[j] = _dq_f32(src[j], s)
            i = end

    @_compiled()
    def _absmax_serial(
        src: Any, run: int, divs: Any, sizes: Any, strides: Any, partial: Any
    ) -> None:
        _absmax_range(src, run, divs, sizes, strides, partial[0], 0, src.shape[0])

    @_compiled(parallel=True)
    def _absmax_parallel(
        src: Any, run: int, divs: Any, sizes: Any, strides: Any, partial: Any
    ) -> None:
        n, nchunks = src.shape[0], partial.shape[0]
        for c in numba.prange(nchunks):
            lo, hi = n * c // nchunks, n * (c + 1) // nchunks
            _absmax_range(src, run, divs, sizes, strides, partial[c], lo, hi)

    @_compiled()
    def _map_serial(
        src: Any, scales: Any, run: int, divs: Any, sizes: Any, strides: Any, out: Any,
        nchunks: int, op: int,
    ) -> None:  # fmt: skip
        _map_range(src, scales, run, divs, sizes, strides, out, op, 0, src.shape[0])

    @_compiled(parallel=True)
    def _map_parallel(
        src: Any, scales: Any, run: int, divs: Any, sizes: Any, strides: Any, out: Any,
        nchunks: int, op: int,
    ) -> None:  # fmt: skip
        n = src.shape[0]
        for c in numba.prange(nchunks):
            lo, hi = n * c // nchunks, n * (c + 1) // nchunks
            _map_range(src, scales, run, divs, sizes, strides, out, op, lo, hi)

    @_compiled()
    def _encode_small(
        src: Any, kind: int, run: int, divs: Any, sizes: Any, strides: Any, store: Any,
        qmax: Any, sentinel: Any, k_bytes: Any, blob: Any, k_off: int, v_off: int, s_off: int,
    ) -> None:  # fmt: skip
        """encode_small_into's kernel: amax per group, the scales (amax / qmax, one float32
        division, or ``sentinel`` where amax > 0 is false) into ``blob`` at ``s_off`` in the
        stored order, K's bytes at ``k_off``, Q-ROUND of V at ``v_off``."""
        n = src.shape[0]
        groups = store.shape[0]
        best = np.zeros(groups, dtype=np.int64)
        _absmax_range(src, run, divs, sizes, strides, best, 0, n)
        scales = np.empty(groups, dtype=np.float32)
        for g in range(groups):
            if kind == 0:
                amax = _w_f16(best[g])
            elif kind == 1:
                amax = _w_bf16(best[g])
            else:
                amax = _w_f32(best[g])
            scale = amax / qmax if amax > 0 else sentinel
            scales[g] = scale
            bits = _f32_bits(scale)
            at = s_off + 4 * store[g]
            for b in range(4):
                blob[at + b] = (bits >> (8 * b)) & 0xFF
        k_dst = blob[k_off : k_off + k_bytes.shape[0]]
        for i in range(np.uint64(0), np.uint64(k_bytes.shape[0])):  # unsigned: a vector copy
            k_dst[i] = k_bytes[i]
        _map_range(src, scales, run, divs, sizes, strides, blob[v_off : v_off + n], kind, 0, n)
