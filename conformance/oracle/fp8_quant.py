"""Q-SCALE, Q-ROUND, Q-DEQUANT and Q-EXTERNAL in every scope and axis order, in NumPy.

Tensors are NumPy arrays of float32 values (V widened exactly from its 16-bit codes) or
of integer codes (FP8 V, 16-bit outputs). Every float32 operation is one IEEE operation
(``float_bits.divide`` / ``multiply``) and every narrowing is ``float_bits.round_float32``.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import numpy.typing as npt

from .float_bits import (
    BFLOAT16,
    E4M3FN,
    F32,
    FLOAT16,
    I64,
    BinaryFormat,
    divide,
    multiply,
    round_float32,
    to_float32,
)

#: Q-SCALE: the largest finite e4m3fn value.
FP8_MAX = np.float32(448.0)
HALF_FORMATS: dict[str, BinaryFormat] = {"float16": FLOAT16, "bfloat16": BFLOAT16}
#: KV-SCALE-DTYPE: the scale dtypes and their little-endian storage.
SCALE_DTYPES = ("float32", "float16", "bfloat16", "float64")


class Scope(IntEnum):
    """Scale scopes (SPEC.md "Scale scopes")."""

    PER_TENSOR = 0
    PER_LAYER_HEAD = 1
    PER_PAGE_HEAD = 2
    EXTERNAL = 3


class OracleRefusal(ValueError):
    """The inputs do not define a result (what the reference answers with
    UnsupportedConfigError)."""


def widen(dtype: str, data: bytes, shape: tuple[int, ...]) -> F32:
    """The float32 values of little-endian float16/bfloat16 ``data`` (exact)."""
    codes = np.frombuffer(data, dtype="<u2").astype(np.int64)
    return to_float32(HALF_FORMATS[dtype], codes).reshape(shape)


def _axis(axis: int | None, ndim: int) -> int | None:
    if axis is None:
        return None
    if not -ndim <= axis < ndim:
        raise OracleRefusal(f"axis {axis} out of range for {ndim} dimensions")
    return axis % ndim


def scope_axes(
    scope: Scope, ndim: int, head_axis: int, page_axis: int | None
) -> tuple[int | None, int | None]:
    """The normalized (head, page) axes a scope groups by (None where it does not)."""
    if scope in (Scope.PER_TENSOR, Scope.EXTERNAL):
        return None, None
    head = _axis(head_axis, ndim)
    if scope == Scope.PER_LAYER_HEAD:
        return head, None
    page = _axis(page_axis, ndim)
    if page is None or page == head:
        raise OracleRefusal("PER_PAGE_HEAD needs a page axis other than the head axis")
    return head, page


def _group_major(v: F32, head: int | None, page: int | None) -> F32:
    """``v`` rearranged as (groups..., elements): page then head first, the rest flattened."""
    keep = [a for a in (page, head) if a is not None]
    moved = np.moveaxis(v, keep, list(range(len(keep))))
    lead = moved.shape[: len(keep)]
    return moved.reshape((*lead, -1)) if moved.size else np.zeros((*lead, 0), np.float32)


def group_scales(v: F32, scope: Scope, head_axis: int, page_axis: int | None) -> F32:
    """Q-SCALE: per group, amax = max |V| (exact), scale = float32(amax) / 448 in float32;
    amax not > 0 (zero, a NaN in the group, an empty group) gives 1.0; an Inf gives Inf.
    Shape () / (H,) / (P, H), pages before heads whatever V's axis order."""
    if scope == Scope.EXTERNAL:
        raise OracleRefusal("EXTERNAL scales come from the caller")
    head, page = scope_axes(scope, v.ndim, head_axis, page_axis)
    groups = _group_major(v, head, page)
    if scope == Scope.PER_TENSOR:
        groups = groups.reshape(1, -1)
    magnitude = np.abs(groups)
    has_nan = np.isnan(magnitude).any(axis=-1)
    amax = np.where(np.isnan(magnitude), 0, magnitude).max(axis=-1, initial=0)
    amax = np.where(has_nan, np.float32(np.nan), amax).astype(np.float32)
    scales = np.where(amax > 0, divide(amax, np.broadcast_to(FP8_MAX, amax.shape)), 1.0)
    scales = scales.astype(np.float32)
    return scales.reshape(()) if scope == Scope.PER_TENSOR else scales


def stored_scales(scales: F32, scale_dtype: str) -> tuple[bytes, F32]:
    """Q-SCALE's last step: the scales converted to ``scale_dtype`` (float16/bfloat16
    rounded to nearest even, float64 exact), as the payload's bytes, and the converted
    values as float32 (exact), which are the ones Q-ROUND divides by."""
    s = np.ascontiguousarray(scales, dtype=np.float32)
    if scale_dtype == "float32":
        return s.astype("<f4").tobytes(), s
    if scale_dtype == "float64":
        return s.astype("<f8").tobytes(), s
    if scale_dtype in HALF_FORMATS:
        codes = round_float32(HALF_FORMATS[scale_dtype], s)
        return codes.astype("<u2").tobytes(), to_float32(HALF_FORMATS[scale_dtype], codes)
    raise OracleRefusal(f"scale dtype {scale_dtype} is not one of {SCALE_DTYPES}")


def read_scales(data: bytes, scale_dtype: str, shape: tuple[int, ...]) -> F32:
    """Stored scales as float32: 16-bit ones widened exactly, float64 rounded to nearest
    (IEEE, exact for scales that were float32)."""
    if scale_dtype == "float32":
        return np.frombuffer(data, dtype="<f4").astype(np.float32).reshape(shape)
    if scale_dtype == "float64":
        return np.frombuffer(data, dtype="<f8").astype(np.float32).reshape(shape)
    codes = np.frombuffer(data, dtype="<u2").astype(np.int64)
    return to_float32(HALF_FORMATS[scale_dtype], codes).reshape(shape)


def scale_grid(
    scales: F32,
    shape: tuple[int, ...],
    scope: Scope,
    head_axis: int,
    page_axis: int | None,
) -> F32:
    """Each element's scale, as an array of ``shape``: one scale per group of the scope,
    PER_PAGE_HEAD's (P, H) paired with V's (page, head) in either axis order, EXTERNAL
    broadcast by NumPy rules aligned on the trailing axes (Q-EXTERNAL)."""
    s = np.asarray(scales, dtype=np.float32)
    if scope == Scope.EXTERNAL:
        if s.ndim > len(shape):
            raise OracleRefusal(f"EXTERNAL scales {s.shape} have more axes than V {shape}")
        try:
            return np.broadcast_to(s, shape)
        except ValueError:
            raise OracleRefusal(f"EXTERNAL scales {s.shape} do not broadcast to {shape}") from None
    head, page = scope_axes(scope, len(shape), head_axis, page_axis)
    view = [1] * len(shape)
    if head is None:
        if s.size != 1:
            raise OracleRefusal(f"PER_TENSOR takes one scale, got {s.shape}")
        return np.broadcast_to(s.reshape(view), shape)
    if page is None:
        if s.shape != (shape[head],):
            raise OracleRefusal(f"PER_LAYER_HEAD scales {s.shape} != ({shape[head]},)")
        view[head] = shape[head]
        return np.broadcast_to(s.reshape(view), shape)
    if s.shape != (shape[page], shape[head]):
        raise OracleRefusal(f"PER_PAGE_HEAD scales {s.shape} != ({shape[page]}, {shape[head]})")
    view[page], view[head] = shape[page], shape[head]
    ordered = s if page < head else s.T
    return np.broadcast_to(ordered.reshape(view), shape)


def clamp_fp8(x: F32) -> F32:
    """Q-ROUND's clamp to [-448, 448]; NaN stays NaN."""
    return np.where(x > FP8_MAX, FP8_MAX, np.where(x < -FP8_MAX, -FP8_MAX, x)).astype(np.float32)


def quantize(v: F32, grid: F32) -> npt.NDArray[np.uint8]:
    """Q-ROUND: e4m3fn(clamp(float32(V) / float32(scale), -448, 448)), as FP8 bytes."""
    return round_float32(E4M3FN, clamp_fp8(divide(v, grid))).astype(np.uint8)


def dequantize(q: npt.NDArray[np.uint8], grid: F32, out_dtype: str) -> I64:
    """Q-DEQUANT: out_dtype(float32(q) * float32(scale)), rounded once, as 16-bit codes."""
    product = multiply(to_float32(E4M3FN, q), grid)
    return round_float32(HALF_FORMATS[out_dtype], product)
