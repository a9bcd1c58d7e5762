"""The reference codec with layer_id in big-endian byte order on the wire."""

from __future__ import annotations

from typing import Any

from lmckv.conformance.core.blob_model import layout
from lmckv.reference_impl import kv_codec as _ref
from lmckv.reference_impl.kv_codec import *  # noqa: F403
from lmckv.reference_impl.kv_codec import __all__  # noqa: F401


def _swap(data: bytearray) -> None:
    field = layout(data).get("layer_id")
    if field is not None:
        data[field.offset : field.end] = bytes(data[field.offset : field.end])[::-1]


class AsymK16V8Codec(_ref.AsymK16V8Codec):
    """Byte-swaps layer_id after writing and before reading."""

    def encode(self, k: Any, v: Any, **kwargs: Any) -> Any:
        enc = super().encode(k, v, **kwargs)
        _swap(enc.blob)
        enc.header_bytes = bytes(enc.blob[: len(enc.header_bytes)])
        return enc

    def from_bytes(self, buf: Any, **kwargs: Any) -> Any:
        data = bytearray(buf)
        _swap(data)
        return super().from_bytes(bytes(data), **kwargs)
