"""Number formats for V: e4m3 (the v1 codec), and the what-ifs e5m2 and int8.

Each format knows its largest magnitude, its rounding grid (half a unit in the last place
at a given magnitude) and how to round a float32 tensor onto that grid. e4m3 numbers in
the results come from the codec itself (``bench.accuracy.reconstruction``); ``Format.round`` is
used for
the what-ifs, which reuse the codec's rule with another target: scale = amax / max of the
target format, per the same scope groups, then round to nearest (even) with saturation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Format:
    """A V storage format: float (``mant_bits``/``min_exp`` set) or symmetric integer."""

    name: str
    max: float
    mant_bits: int | None = None
    min_exp: int | None = None
    dtype: torch.dtype | None = None

    @property
    def is_float(self) -> bool:
        """True for floating-point formats (which have subnormals)."""
        return self.mant_bits is not None

    @property
    def min_normal(self) -> float:
        """Smallest normal magnitude (float formats)."""
        if self.min_exp is None:
            raise ValueError(f"{self.name} has no normal range")
        return 2.0**self.min_exp

    def half_ulp(self, x_abs: torch.Tensor) -> torch.Tensor:
        """Half the grid spacing at magnitude ``x_abs`` (float64 tensor in, float64 out).

        Float: 2**(max(floor(log2 |x|), min_exp) - mant_bits - 1); subnormals and zero use
        min_exp. Integer: 0.5 everywhere.
        """
        if self.mant_bits is None or self.min_exp is None:
            return torch.full_like(x_abs, 0.5, dtype=torch.float64)
        _, exp = torch.frexp(x_abs.to(torch.float64))
        floor_log2 = torch.where(x_abs > 0, exp - 1, torch.full_like(exp, self.min_exp))
        floor_log2 = floor_log2.clamp(min=self.min_exp)
        return torch.pow(2.0, (floor_log2 - self.mant_bits - 1).to(torch.float64))

    @property
    def saturation_edge(self) -> float:
        """Magnitude beyond which clamping, not rounding, decides the value: max + half ulp."""
        return self.max + float(self.half_ulp(torch.tensor([self.max], dtype=torch.float64))[0])

    def round(self, x: torch.Tensor) -> torch.Tensor:
        """Saturate to +-max and round to nearest even on the grid; float32 values."""
        clamped = x.to(torch.float32).clamp(-self.max, self.max)
        if self.dtype is not None:
            return clamped.to(self.dtype).to(torch.float32)
        return torch.round(clamped)


E4M3 = Format("e4m3", float(torch.finfo(torch.float8_e4m3fn).max), 3, -6, torch.float8_e4m3fn)
E5M2 = Format("e5m2", float(torch.finfo(torch.float8_e5m2).max), 2, -14, torch.float8_e5m2)
INT8 = Format("int8", 127.0)
FORMATS: dict[str, Format] = {f.name: f for f in (E4M3, E5M2, INT8)}

#: The dequantized output's own rounding (float16 / bfloat16), added to the error bound.
OUTPUT_FORMATS: dict[torch.dtype, Format] = {
    torch.float16: Format("float16", float(torch.finfo(torch.float16).max), 10, -14),
    torch.bfloat16: Format("bfloat16", float(torch.finfo(torch.bfloat16).max), 7, -126),
    torch.float32: Format("float32", float(torch.finfo(torch.float32).max), 23, -126),
}
