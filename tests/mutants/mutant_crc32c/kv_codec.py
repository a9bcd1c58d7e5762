"""The reference codec, writing and verifying CRC-32C instead of CRC-32."""

from __future__ import annotations

from typing import Any

from lmckv.conformance.core.blob_model import layout
from lmckv.conformance.core.digests import crc32, crc32c
from lmckv.reference_impl import kv_codec as _ref
from lmckv.reference_impl.kv_codec import *  # noqa: F403
from lmckv.reference_impl.kv_codec import __all__  # noqa: F401


class AsymK16V8Codec(_ref.AsymK16V8Codec):
    """Swaps the CRC variant on both the write and the read path (the CRC field located
    by the blob model, computed over every byte after the header)."""

    def encode(self, k: Any, v: Any, **kwargs: Any) -> Any:
        enc = super().encode(k, v, **kwargs)
        blob = enc.blob
        crc = layout(blob).field("crc")
        crc.put(blob, crc32c(blob[crc.end :]))
        enc.header_bytes = bytes(blob[: crc.end])
        return enc

    def from_bytes(self, buf: Any, **kwargs: Any) -> Any:
        data = bytearray(buf)
        crc = layout(data).get("crc")
        if crc is None:
            return super().from_bytes(bytes(data), **kwargs)
        stored = crc.value
        assert isinstance(stored, int)
        if stored == crc32c(data[crc.end :]):
            crc.put(data, crc32(data[crc.end :]))
        else:
            crc.put(data, stored ^ 0xFFFFFFFF)
        return super().from_bytes(bytes(data), **kwargs)
