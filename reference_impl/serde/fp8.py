"""The plain FP8 serde: every element of the KV object cast to FP8, no scales (SPEC.md,
"The serde layer"), with upstream's public names (``lmcache.v1.distributed.serde.fp8``,
registered in its serde factory as ``fp8``).

- ``Fp8QuantizationSerializer.serialize`` writes ``src.tensor`` cast to the FP8 dtype
  (``torch``'s cast: round to nearest even; values beyond the format's range saturate to
  its largest magnitude, 448 for e4m3fn, on the CPU with torch 2.13), one byte per element
  in the tensor's element order, into the start of ``dst``'s bytes and returns their
  count. K and V are cast alike: the object is the whole KV chunk; nothing records a scale.
- ``estimate_serialized_size`` is exactly one byte per element of the layout.
- ``Fp8QuantizationDeserializer.deserialize`` reads ``dst.tensor.numel()`` bytes from the
  start of ``src``, reads them as FP8 and casts them to ``dst``'s dtype and shape.

Objects are anything with a ``tensor`` attribute (upstream's ``MemoryObj``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import torch

from .errors import DestinationTooSmallError, SerdeSlotError


class _Layout(Protocol):
    shapes: Sequence[Sequence[int]]


def _tensor(obj: Any, what: str) -> torch.Tensor:
    t = getattr(obj, "tensor", None)
    if not isinstance(t, torch.Tensor):
        raise SerdeSlotError(f"{what} has no tensor", rule="SERDE-SLOTS")
    return t


class Fp8QuantizationSerializer:
    """KV object -> its elements as FP8 bytes (``fp8_dtype``, default e4m3fn)."""

    def __init__(self, fp8_dtype: torch.dtype = torch.float8_e4m3fn) -> None:
        self._fp8_dtype = fp8_dtype

    def serialize(self, src: Any, dst: Any, key: object = None) -> int:
        """Write the cast elements into ``dst``; the number of bytes written."""
        data = _tensor(src, "src").to(self._fp8_dtype).contiguous().view(torch.uint8).view(-1)
        out = _tensor(dst, "dst").view(-1).view(torch.uint8)
        if out.numel() < data.numel():
            raise DestinationTooSmallError(
                f"destination holds {out.numel()} bytes, the cast needs {data.numel()}",
                rule="SERDE-DST-SMALL",
            )
        out[: data.numel()].copy_(data)
        return int(data.numel())

    def estimate_serialized_size(self, layout_desc: _Layout) -> int:
        """One byte per element of the layout."""
        return sum(math.prod(int(d) for d in shape) for shape in layout_desc.shapes)


class Fp8QuantizationDeserializer:
    """FP8 bytes -> ``dst``'s dtype and shape."""

    def __init__(self, fp8_dtype: torch.dtype = torch.float8_e4m3fn) -> None:
        self._fp8_dtype = fp8_dtype

    def deserialize(self, src: Any, dst: Any, key: object = None) -> None:
        """Fill ``dst`` from the first ``dst.numel()`` bytes of ``src``."""
        out = _tensor(dst, "dst")
        data = _tensor(src, "src").contiguous().view(-1).view(torch.uint8)
        if data.numel() < out.numel():
            raise DestinationTooSmallError(
                f"source holds {data.numel()} bytes, the destination {out.numel()} elements",
                rule="SERDE-DST-SMALL",
            )
        fp8 = data[: out.numel()].view(self._fp8_dtype).reshape(out.shape)
        out.copy_(fp8.to(out.dtype))
