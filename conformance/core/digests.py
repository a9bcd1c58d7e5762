"""Digests the suite computes: SHA-256 of golden payloads, CRC-32 (IEEE) as the blob
format stores it (SPEC.md, KV-CRC) and CRC-32C (Castagnoli), the variant upstream's comment
names but does not write, for the vectors and mutants that use it."""

from __future__ import annotations

import hashlib
import zlib


def sha256(data: bytes) -> str:
    """Hex SHA-256, as the manifests record payloads."""
    return hashlib.sha256(data).hexdigest()


def crc32(data: bytes | bytearray | memoryview) -> int:
    """CRC-32 (IEEE 802.3, zlib's), unsigned."""
    return zlib.crc32(data) & 0xFFFFFFFF


def _crc32c_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return tuple(table)


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), unsigned."""
    crc = 0xFFFFFFFF
    for byte in bytes(data):
        crc = (crc >> 8) ^ _CRC32C_TABLE[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFFFFFF
