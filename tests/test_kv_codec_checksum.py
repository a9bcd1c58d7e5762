"""KV-CRC: the reference's CRC-32 is exactly zlib.crc32, on every length and alignment."""

from __future__ import annotations

import zlib

from hypothesis import given
from hypothesis import strategies as st

from lmckv.reference_impl.kv_codec.checksum import payload_crc32


@given(st.binary(max_size=4096), st.integers(0, 15))
def test_payload_crc32_is_zlib_crc32(data: bytes, skip: int) -> None:
    view = memoryview(bytearray(data))[min(skip, len(data)) :]
    assert payload_crc32(view) == zlib.crc32(view) & 0xFFFFFFFF


def test_payload_crc32_on_large_buffers() -> None:
    # Past the sizes where folding implementations switch to their wide SIMD loops.
    data = bytes(range(256)) * (1 << 14) + b"\x01\x02\x03"
    for n in (0, 1, 63, 64, 65, 4095, 1 << 20, len(data)):
        assert payload_crc32(data[:n]) == zlib.crc32(data[:n])
