"""The ``checksum`` serde's frame (SPEC.md "A store", STORE-CHECKSUM-*; LMCache issue #4533, pull
request #4558, in no release up to 0.5.7rc2), written and checked from its byte layout:

    offset 0   1 byte   the frame version, 0x01
    offset 1   8 bytes  the fingerprint: the ObjectKey's chunk_hash, its first 8 bytes, or all
                        of it followed by zero bytes when it is shorter
    offset 9   8 bytes  xxh3_64 (seed 0) of the payload, its digest in big-endian order
    offset 17  payload  the memory object's bytes, as stored without a serde

No magic: the version byte is aesgcm's too. A frame is told from an aesgcm one by its
fingerprint, which the object's name gives (an aesgcm IV matching it has a chance of 2**-64).
The hash is computed in pieces: a check holds one piece, never the object.
"""

from __future__ import annotations

from collections.abc import Callable

CHECKSUM_VERSION = 0x01
FINGERPRINT_BYTES = 8
HASH_BYTES = 8
#: Version, fingerprint and hash: the bytes before the payload.
HEAD_BYTES = 1 + FINGERPRINT_BYTES + HASH_BYTES
#: The piece of payload hashed at a time.
PIECE_BYTES = 1 << 20

FRAME_RULE = "STORE-CHECKSUM-FRAME"
FINGERPRINT_RULE = "STORE-CHECKSUM-FINGERPRINT"
HASH_RULE = "STORE-CHECKSUM-HASH"


def fingerprint(chunk_hash: bytes) -> bytes:
    """STORE-CHECKSUM-FINGERPRINT: the 8 bytes a frame of the key with ``chunk_hash`` carries."""
    return chunk_hash[:FINGERPRINT_BYTES].ljust(FINGERPRINT_BYTES, b"\x00")


def frame(payload: bytes, chunk_hash: bytes) -> bytes:
    """The frame of ``payload`` stored under a key with ``chunk_hash`` (test stores, vectors)."""
    import xxhash  # the ``store`` extra

    digest = xxhash.xxh3_64(payload).digest()
    return bytes([CHECKSUM_VERSION]) + fingerprint(chunk_hash) + digest + payload


def head_problem(head: bytes, size: int, chunk_hash: bytes) -> tuple[str, str] | None:
    """(rule, why) when an object of ``size`` bytes starting with ``head`` (at least
    HEAD_BYTES of them, when it has them) is no checksum frame of the key with
    ``chunk_hash``; None when its header is."""
    if size < HEAD_BYTES or len(head) < HEAD_BYTES:
        return FRAME_RULE, f"{size} bytes: shorter than the {HEAD_BYTES}-byte checksum header"
    if head[0] != CHECKSUM_VERSION:
        return FRAME_RULE, f"frame version {head[0]:02x}, expected {CHECKSUM_VERSION:02x}"
    stored, wanted = head[1 : 1 + FINGERPRINT_BYTES], fingerprint(chunk_hash)
    if stored != wanted:
        return FINGERPRINT_RULE, (
            f"fingerprint {stored.hex()}, the name's chunk hash gives {wanted.hex()}: "
            "the object was stored for another chunk"
        )
    return None


def verify(read: Callable[[int], bytes], size: int, chunk_hash: bytes) -> tuple[str, str] | None:
    """Every rule of the frame over a stream of its ``size`` bytes (``read(n)``, as a file's):
    the header, then the payload hashed piece by piece; (rule, why) or None."""
    import xxhash  # the ``store`` extra

    head = read(HEAD_BYTES)
    if problem := head_problem(head, size, chunk_hash):
        return problem
    hasher = xxhash.xxh3_64()
    left = size - HEAD_BYTES
    while left > 0:
        piece = read(min(PIECE_BYTES, left))
        if not piece:
            return "STORE-READ", f"read {size - left} of {size} bytes"
        hasher.update(piece)
        left -= len(piece)
    stored, computed = head[1 + FINGERPRINT_BYTES : HEAD_BYTES], hasher.digest()
    if stored != computed:
        return HASH_RULE, (
            f"xxh3_64 of the payload is {computed.hex()}, the header says {stored.hex()}: "
            "the object is not what was written"
        )
    return None
