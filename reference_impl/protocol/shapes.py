"""The 4-slot shape field of the messages and of RemoteMetadata (rules PROTO-SHAPE-RANK,
PROTO-SHAPE-DIMS, PROTO-SHAPE-PAD)."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch

from .errors import ShapeError
from .int32 import INT32_MAX
from .memory_format import UNPADDED_FORMATS, MemoryFormat

#: Number of shape slots on the wire.
SHAPE_SLOTS = 4


def _dimension(index: int, value: object) -> int:
    if isinstance(value, bool):
        raise ShapeError(
            f"shape dimension {index} must be an integer, got bool", rule="PROTO-SHAPE-DIMS"
        )
    try:
        dim = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ShapeError(
            f"shape dimension {index} must be an integer, got {type(value).__name__}",
            rule="PROTO-INT32",
        ) from None
    if not 0 <= dim <= INT32_MAX:
        raise ShapeError(
            f"shape dimension {index}={dim} is outside [0, {INT32_MAX}]", rule="PROTO-SHAPE-DIMS"
        )
    return dim


def pad_shape_to_4d(shape: Sequence[int]) -> list[int]:
    """Return ``shape`` as exactly four dimensions, trailing slots filled with 0.

    PROTO-SHAPE-RANK: more than 4 dimensions raises :class:`ShapeError`.
    PROTO-SHAPE-DIMS: every dimension is an integer in ``[0, 2**31 - 1]``.
    A 0-D shape pads to ``[0, 0, 0, 0]`` (and reads back as ``[0]``; see PROTO-SHAPE-PAD).
    """
    if len(shape) > SHAPE_SLOTS:
        raise ShapeError(
            f"shape has {len(shape)} dimensions; the wire carries at most 4",
            rule="PROTO-SHAPE-RANK",
        )
    dims = [_dimension(i, value) for i, value in enumerate(shape)]
    return dims + [0] * (SHAPE_SLOTS - len(dims))


def strip_shape_padding(
    dims: Sequence[int],
    fmt: MemoryFormat | None = MemoryFormat.UNDEFINED,
) -> torch.Size:
    """Undo :func:`pad_shape_to_4d` for a shape read from the wire (rule PROTO-SHAPE-PAD).

    Trailing zero slots are dropped, keeping at least one. BINARY and BINARY_BUFFER keep
    all four slots. This is lossy, as upstream: a real trailing zero dimension
    (``[4, 0]`` written as ``[4, 0, 0, 0]``) reads back as ``[4]``.
    """
    if len(dims) != SHAPE_SLOTS:
        raise ShapeError(
            f"expected {SHAPE_SLOTS} shape slots, got {len(dims)}", rule="PROTO-SHAPE-PAD"
        )
    checked = [_dimension(i, value) for i, value in enumerate(dims)]
    if fmt in UNPADDED_FORMATS:
        return torch.Size(checked)
    end = SHAPE_SLOTS
    while end > 1 and checked[end - 1] == 0:
        end -= 1
    return torch.Size(checked[:end])
