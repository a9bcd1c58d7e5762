"""Helpers shared by the mutants: where the CRC field of a v1 blob sits."""

from __future__ import annotations

import struct

FIXED_HEADER_LEN = 76
LAYER_ID_OFFSET = 20


def crc_offset(blob: bytes | bytearray | memoryview) -> int:
    """Offset of the 4-byte CRC field; struct.error/IndexError on a truncated header."""
    (n_dims,) = struct.unpack_from("<q", blob, 68)
    off = FIXED_HEADER_LEN + 8 * n_dims + 24
    (pairs,) = struct.unpack_from("<H", blob, off)
    off += 2
    for _ in range(2 * pairs):
        (length,) = struct.unpack_from("<H", blob, off)
        off += 2 + length
    return off


_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ (0x82F63B78 if _c & 1 else 0)
    _TABLE.append(_c)


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli), table-driven."""
    crc = 0xFFFFFFFF
    for byte in bytes(data):
        crc = (crc >> 8) ^ _TABLE[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFFFFFF
