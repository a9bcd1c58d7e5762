"""Building blocks of the golden-vector generator: a portable PRNG, exact test values,
and the in-memory file set the generator fills before writing or checking.

Inputs are made from integer bit patterns (no libm, no torch RNG), so the same bytes come
out on every machine and every torch version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import torch

from lmckv.base.schemas import validate

MASK64 = (1 << 64) - 1


class SplitMix64:
    """Steele, Lea and Flood's SplitMix64: tiny, fast, and fully specified."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK64

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


#: (exponent bias, mantissa bits) of the 16-bit float formats.
_FORMATS = {torch.float16: (15, 10), torch.bfloat16: (127, 7)}


def exact_values(
    rng: SplitMix64, count: int, dtype: torch.dtype, exp_lo: int, exp_hi: int
) -> list[int]:
    """Bit patterns of ``count`` random normal values of ``dtype`` with unbiased exponents in
    [exp_lo, exp_hi] and random signs and mantissas."""
    bias, mant = _FORMATS[dtype]
    out = []
    for _ in range(count):
        r = rng.next()
        sign = r & 1
        exp = exp_lo + (r >> 1) % (exp_hi - exp_lo + 1)
        frac = (r >> 20) & ((1 << mant) - 1)
        out.append((sign << 15) | ((exp + bias) << mant) | frac)
    return out


def bits_to_tensor(bits: list[int], dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
    """16-bit patterns -> a tensor of ``dtype`` (float16 or bfloat16)."""
    signed = [b - 0x10000 if b & 0x8000 else b for b in bits]
    return torch.tensor(signed, dtype=torch.int16).view(dtype).reshape(shape)


def random_tensor(
    seed: int,
    dtype: torch.dtype,
    shape: list[int],
    exp_lo: int = -6,
    exp_hi: int = 3,
) -> torch.Tensor:
    """A reproducible tensor of normal values with exponents in [exp_lo, exp_hi]."""
    count = 1
    for d in shape:
        count *= d
    return bits_to_tensor(
        exact_values(SplitMix64(seed), count, dtype, exp_lo, exp_hi), dtype, shape
    )


class GenerationError(RuntimeError):
    """The reference did not behave as a vector says it must."""


@dataclass
class FileSet:
    """Every file the generator produces, by path relative to golden_blobs/."""

    files: dict[str, bytes] = field(default_factory=dict)

    def add(self, path: str, data: bytes) -> str:
        """Record a file; the same path may only ever hold the same bytes."""
        old = self.files.get(path)
        if old is not None and old != data:
            raise ValueError(f"two different contents for {path}")
        self.files[path] = bytes(data)
        return path

    def add_json(self, path: str, obj: Any) -> str:
        text = json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=True) + "\n"
        return self.add(path, text.encode("ascii"))


def manifest(
    fmt: str, description: str, notes: dict[str, str], vectors: list[dict[str, Any]]
) -> dict[str, Any]:
    """The Wycheproof-style envelope around a format's vectors."""
    ids = [v["id"] for v in vectors]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate vector ids: {duplicates}")
    for v in vectors:
        unknown = set(v.get("flags", [])) - set(notes)
        if unknown:
            raise ValueError(f"vector {v['id']} uses undefined flags {sorted(unknown)}")
    document = {
        "format": fmt,
        "format_version": 1,
        "generator": "python -m conformance.golden",
        "description": description,
        "notes": notes,
        "number_of_vectors": len(vectors),
        "vectors": vectors,
    }
    validate(document, "vectors")
    return document
