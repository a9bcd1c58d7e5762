"""Dtype names on the testee wire (TESTEE.md, "Field types").

The suite names dtypes by torch's canonical names; torch's aliases (``half``, ``float``,
``long``, ...) are not among them, so no implementation is asked to accept those.
"""

from __future__ import annotations

import torch

DTYPE_NAMES: tuple[str, ...] = (
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "bool",
    "float8_e4m3fn",
    "float8_e5m2",
)


class DtypeNameError(ValueError):
    """A name outside :data:`DTYPE_NAMES`."""


def dtype_from_name(name: str | None) -> torch.dtype | None:
    """``"float16"`` -> ``torch.float16``; ``None`` stays ``None``."""
    if name is None:
        return None
    if name not in DTYPE_NAMES:
        raise DtypeNameError(f"not a dtype name of TESTEE.md: {name!r}")
    dtype: torch.dtype = getattr(torch, name)
    return dtype


def dtype_name(dtype: torch.dtype | None) -> str | None:
    """``torch.float16`` -> ``"float16"``; ``None`` stays ``None``."""
    return None if dtype is None else str(dtype).removeprefix("torch.")
