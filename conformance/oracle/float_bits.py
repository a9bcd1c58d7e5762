"""Narrow binary float formats as integer codes, rounded from float32 bit patterns.

A format with ``man_bits`` mantissa bits and exponent bias ``bias`` has the magnitude codes
``(field << man_bits) | mantissa``: field 0 holds the subnormals ``mantissa * 2^(emin -
man_bits)`` (emin = 1 - bias), field f > 0 the normals ``(2^man_bits + mantissa) *
2^(f - bias - man_bits)``. Codes are ordered like the magnitudes they stand for, and a
mantissa that rounds up past its last value carries into the exponent field, so one integer
formula rounds normals and subnormals alike (Q-ROUND: "rounds to nearest, ties to even,
with subnormals").

NaN bit patterns are not fixed by SPEC.md (see ``NanPolicy``); the ones here are those of
the golden set, which was produced by PyTorch on an x86-64 CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]
F32 = npt.NDArray[np.float32]

_F32_MAN_BITS = 23
_F32_EXP_MASK = 0xFF
_F32_MAN_MASK = 0x7F_FFFF
_F32_SIGN = 0x8000_0000
_F32_EMIN = -126
_F32_BIAS = 127
#: Beyond this right shift every float32 significand (< 2^24) rounds to 0; clipping the
#: shift keeps NumPy's shifts well defined.
_MAX_SHIFT = 40


@dataclass(frozen=True)
class BinaryFormat:
    """A binary floating-point format narrower than float32, as integer codes.

    ``max_code`` is the largest finite magnitude code; ``inf_code`` is the magnitude code
    of infinity, or None for a format without infinities (e4m3fn saturates instead).
    ``nan_code(bits)`` gives the code written for the float32 NaN ``bits``.
    """

    name: str
    man_bits: int
    bias: int
    max_code: int
    inf_code: int | None
    sign_bit: int

    @property
    def emin(self) -> int:
        return 1 - self.bias


FLOAT16 = BinaryFormat(
    "float16", man_bits=10, bias=15, max_code=0x7BFF, inf_code=0x7C00, sign_bit=0x8000
)
BFLOAT16 = BinaryFormat(
    "bfloat16", man_bits=7, bias=127, max_code=0x7F7F, inf_code=0x7F80, sign_bit=0x8000
)
#: float8_e4m3fn: no infinities; S.1111.111 is NaN, so the largest finite code is
#: S.1111.110 = 448 (SPEC.md "Quantization rule").
E4M3FN = BinaryFormat(
    "float8_e4m3fn", man_bits=3, bias=7, max_code=0x7E, inf_code=None, sign_bit=0x80
)


class NanPolicy:
    """The NaN bit patterns this oracle writes. SPEC.md says only "NaN stays NaN" (Q-ROUND)
    and "Inf/Inf gives NaN" (Q-NONFINITE); which NaN is left open. The golden set holds the
    patterns of PyTorch on an x86-64 CPU, reproduced here:

    - an invalid float32 operation (Inf/Inf, 0*Inf, 0/0) gives x86's default NaN
      0xFFC00000 (sign set); a NaN operand propagates (the first one, quieted);
    - float32 -> float16 keeps the sign and the top 10 mantissa bits, quieted (F16C);
    - float32 -> bfloat16 writes 0xFFFF for every NaN (PyTorch's vectorized CPU cast);
    - float32 -> e4m3fn writes S.1111.111 with the NaN's sign (Q-ROUND).

    ``resolve`` applies the float32 rule to the NaN results of an operation, so that the
    oracle writes these bytes on any machine (NumPy on ARM would give 0x7FC00000).
    """

    DEFAULT_NAN_BITS = 0xFFC0_0000
    QUIET_BIT = 0x0040_0000
    BFLOAT16_NAN = 0xFFFF

    @staticmethod
    def resolve(a: F32, b: F32, result: F32) -> F32:
        """``result`` of a float32 operation on ``a`` and ``b`` with its NaNs replaced: the
        first NaN operand, quieted, else the default NaN (an invalid operation)."""
        nan = np.isnan(result)
        if not np.any(nan):
            return result
        a_bits = np.broadcast_to(float32_bits(a), result.shape).astype(np.int64)
        b_bits = np.broadcast_to(float32_bits(b), result.shape).astype(np.int64)
        chosen = np.where(
            np.isnan(np.broadcast_to(a, result.shape)),
            a_bits | NanPolicy.QUIET_BIT,
            np.where(
                np.isnan(np.broadcast_to(b, result.shape)),
                b_bits | NanPolicy.QUIET_BIT,
                NanPolicy.DEFAULT_NAN_BITS,
            ),
        )
        out = np.where(nan, chosen, float32_bits(result).astype(np.int64))
        return bits_float32(out.astype(np.uint32))

    @staticmethod
    def narrow(fmt: BinaryFormat, bits: U32) -> I64:
        """Codes of the float32 NaNs ``bits`` in ``fmt``."""
        b = bits.astype(np.int64)
        sign = np.where(b & _F32_SIGN, fmt.sign_bit, 0)
        if fmt is BFLOAT16:
            return np.full(b.shape, NanPolicy.BFLOAT16_NAN, dtype=np.int64)
        if fmt is FLOAT16:
            top = (b & _F32_MAN_MASK) >> (_F32_MAN_BITS - fmt.man_bits)
            return sign | 0x7C00 | 0x200 | top
        return sign | 0x7F


def float32_bits(x: F32) -> U32:
    """The IEEE bit patterns of a float32 array."""
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)


def bits_float32(bits: U32) -> F32:
    """The float32 array of IEEE bit patterns."""
    return np.ascontiguousarray(bits, dtype=np.uint32).view(np.float32)


def round_float32(fmt: BinaryFormat, x: F32) -> I64:
    """``fmt`` codes (sign included) of float32 ``x``, rounded to nearest, ties to even,
    with subnormals. Values past ``fmt``'s largest finite value become infinity when the
    format has one; in e4m3fn, which has none, they raise ValueError (Q-ROUND clamps to
    ±448 before converting). NaNs follow ``NanPolicy``."""
    bits = float32_bits(x).astype(np.int64)
    sign = np.where(bits & _F32_SIGN, fmt.sign_bit, 0)
    exp = (bits >> _F32_MAN_BITS) & _F32_EXP_MASK
    man = bits & _F32_MAN_MASK
    nan = (exp == _F32_EXP_MASK) & (man != 0)
    inf = (exp == _F32_EXP_MASK) & (man == 0)
    # significand and unbiased exponent: x = sig * 2^(e - 23)
    sig = np.where(exp > 0, man | (1 << _F32_MAN_BITS), man)
    e = np.where(exp > 0, exp - _F32_BIAS, _F32_EMIN)
    # the exponent of the target grid: the value's own, or emin for target subnormals;
    # the grid step is 2^(t - man_bits), a right shift of the significand by `shift`
    t = np.maximum(e, fmt.emin)
    shift = np.minimum(t - e + _F32_MAN_BITS - fmt.man_bits, _MAX_SHIFT)
    kept = sig >> shift
    rest = sig & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    kept += (rest > half) | ((rest == half) & ((kept & 1) == 1))
    code = ((t - fmt.emin) << fmt.man_bits) + kept
    over = (code > fmt.max_code) | inf
    if fmt.inf_code is None:
        if np.any(over & ~nan):
            raise ValueError(f"value beyond the largest finite {fmt.name}; clamp first")
    else:
        code = np.where(over, fmt.inf_code, code)
    code = np.where(nan, NanPolicy.narrow(fmt, bits.astype(np.uint32)), code | sign)
    return code.astype(np.int64)


def to_float32(fmt: BinaryFormat, codes: npt.NDArray[np.integer]) -> F32:
    """float32 values of ``fmt`` codes (exact: every such value is a float32). A NaN code
    gives the float32 NaN with the same sign and the code's mantissa in the top bits, as
    the hardware widening does."""
    c = np.asarray(codes).astype(np.int64)
    sign = (c & fmt.sign_bit) != 0
    mag = c & (fmt.sign_bit - 1)
    field = mag >> fmt.man_bits
    mantissa = mag & ((1 << fmt.man_bits) - 1)
    is_nan = _is_nan_code(fmt, mag)
    is_inf = np.zeros(c.shape, dtype=bool) if fmt.inf_code is None else mag == fmt.inf_code
    finite = ~(is_nan | is_inf)
    sig = np.where(field > 0, mantissa + (1 << fmt.man_bits), mantissa) * finite
    exp2 = np.where(field > 0, field, 1) - fmt.bias - fmt.man_bits
    value = np.ldexp(sig.astype(np.float64), exp2.astype(np.int32)).astype(np.float32)
    out = float32_bits(value).astype(np.int64)
    special = 0x7F80_0000 | (mantissa << (_F32_MAN_BITS - fmt.man_bits))
    out = np.where(is_nan | is_inf, special, out)
    out = np.where(sign, out | _F32_SIGN, out)
    return bits_float32(out.astype(np.uint32))


def _is_nan_code(fmt: BinaryFormat, mag: I64) -> npt.NDArray[np.bool_]:
    if fmt.inf_code is None:
        return mag > fmt.max_code
    return mag > fmt.inf_code


def divide(a: F32, b: F32) -> F32:
    """float32 a / b, one IEEE division (Q-ROUND: not a multiplication by 1/b), NaNs per
    ``NanPolicy``."""
    with np.errstate(all="ignore"):
        q = np.divide(a, b, dtype=np.float32)
    return NanPolicy.resolve(a, b, q)


def multiply(a: F32, b: F32) -> F32:
    """float32 a * b, one IEEE multiplication (Q-DEQUANT), NaNs per ``NanPolicy``."""
    with np.errstate(all="ignore"):
        p = np.multiply(a, b, dtype=np.float32)
    return NanPolicy.resolve(a, b, p)
