"""The reference codec, writing and verifying CRC-32C instead of CRC-32."""

from __future__ import annotations

import struct
import zlib
from typing import Any

from mutant_support import crc32c, crc_offset

from reference_impl import kv_codec as _ref
from reference_impl.kv_codec import *  # noqa: F403
from reference_impl.kv_codec import __all__  # noqa: F401


class AsymK16V8Codec(_ref.AsymK16V8Codec):
    """Swaps the CRC variant on both the write and the read path."""

    def encode(self, k: Any, v: Any, **kwargs: Any) -> Any:
        enc = super().encode(k, v, **kwargs)
        blob = enc.blob
        off = crc_offset(blob)
        blob[off : off + 4] = struct.pack("<I", crc32c(blob[off + 4 :]))
        enc.header_bytes = bytes(blob[: off + 4])
        return enc

    def from_bytes(self, buf: Any, **kwargs: Any) -> Any:
        data = bytearray(buf)
        try:
            off = crc_offset(data)
            (stored,) = struct.unpack_from("<I", data, off)
        except (struct.error, IndexError):
            return super().from_bytes(bytes(data), **kwargs)
        if stored == crc32c(data[off + 4 :]):
            ieee = zlib.crc32(data[off + 4 :]) & 0xFFFFFFFF
            data[off : off + 4] = struct.pack("<I", ieee)
        else:
            data[off : off + 4] = struct.pack("<I", stored ^ 0xFFFFFFFF)
        return super().from_bytes(bytes(data), **kwargs)
