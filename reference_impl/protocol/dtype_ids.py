"""Dtype ids on the wire (SPEC table "Dtype table"; shared with the encoded-KV header)."""

from __future__ import annotations

import torch

from ..dtypes import DTYPE_TO_INT, INT_TO_DTYPE
from .errors import UnencodableMessageError, UnknownIdError


def dtype_from_id(value: int) -> torch.dtype | None:
    """Read a dtype id (rule PROTO-DTYPE-ID): ids 1 and 2 both read as float16, 0 as None."""
    try:
        return INT_TO_DTYPE[value]
    except KeyError:
        raise UnknownIdError(f"unknown dtype id {value}", rule="PROTO-DTYPE-ID") from None


def dtype_to_id(dtype: object) -> int:
    """The id a writer emits (float16 is always 2); a dtype outside the table is refused."""
    if dtype is not None and not isinstance(dtype, torch.dtype):
        raise UnencodableMessageError(
            f"dtype must be a torch.dtype or None, got {dtype!r}", rule="PROTO-DTYPE-ID"
        )
    try:
        return DTYPE_TO_INT[dtype]
    except KeyError:
        raise UnencodableMessageError(
            f"dtype {dtype} has no wire id", rule="PROTO-DTYPE-ID"
        ) from None
