"""The ``TQ01`` frame of the ``tqai`` serde (``lmcache-turbo-quant-serde`` 0.1.0, a plugin
registered with LMCache's serde factory; SPEC.md "A store", STORE-TQ01-FRAME), parsed from its
byte layout. Integers are little-endian:

    0   4 bytes  b"TQ01"           13  1 byte   ndim
    4   1 byte   version, 1        14  8 x ndim shape, int64 each (the last: head_dim)
    5   1 byte   bits per index    ..  1 byte   dtype length, then that many ASCII bytes
    6   1 byte   use_qjl (0 or 1)  ..  then blocks, each an int64 length and its bytes:
    7   2 bytes  QJL sketch size       packed indices, norms, and with QJL: sketch, norms
    9   4 bytes  seed (int32)

A frame's sizes follow from its header: ``n`` elements (the shape's product) in vectors of the
last dimension; packed indices ``ceil(n * bits / 8)`` bytes, one fp16 norm per vector, and with
QJL one int8 sketch of ``QJL sketch size`` per vector and one more fp16 norm. The frame carries
no checksum: a changed index or norm is not seen; its structure is all that can be checked.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

MAGIC = b"TQ01"
VERSION = 1
#: The bit widths tqai's packing writes.
BITS = (2, 3, 4, 6, 8)
#: The dtypes of a frame lmckv knows (LMCache's KV dtypes); others are a problem.
DTYPES = ("float16", "bfloat16", "float32")
#: The most dimensions a frame may declare (LMCache's objects have four: five per head).
MAX_NDIM = 8
RULE = "STORE-TQ01-FRAME"
#: The piece of a block skipped at a time.
PIECE_BYTES = 1 << 20

_PREFIX = struct.Struct("<4sBBBHiB")


class FrameError(ValueError):
    """Why an object is no TQ01 frame (one line)."""


def _exactly(read: Callable[[int], bytes], n: int, what: str) -> bytes:
    data = read(n)
    if len(data) != n:
        raise FrameError(f"the object ends inside its {what}")
    return data


def _skip(read: Callable[[int], bytes], n: int, what: str) -> None:
    while n > 0:
        piece = read(min(PIECE_BYTES, n))
        if not piece:
            raise FrameError(f"the object ends inside its {what}")
        n -= len(piece)


def check(read: Callable[[int], bytes], size: int) -> tuple[int, ...]:
    """STORE-TQ01-FRAME over a stream of an object's ``size`` bytes: its shape when the
    header is consistent and every block has the length the header gives, ending where the
    object ends; FrameError otherwise. Memory: the header and one piece."""
    head = read(_PREFIX.size)
    if len(head) < 4 or head[:4] != MAGIC:
        raise FrameError(f"starts {head[:4].hex() or 'with nothing'}, not TQ01")
    if len(head) < _PREFIX.size:
        raise FrameError("the object ends inside its header")
    _, version, bits, use_qjl, sketch, _seed, ndim = _PREFIX.unpack(head)
    if version != VERSION:
        raise FrameError(f"frame version {version}, expected {VERSION}")
    if bits not in BITS:
        raise FrameError(f"{bits} bits per index: tqai packs {', '.join(map(str, BITS))}")
    if use_qjl not in (0, 1):
        raise FrameError(f"use_qjl is {use_qjl}, not 0 or 1")
    if not 1 <= ndim <= MAX_NDIM:
        raise FrameError(f"{ndim} dimensions (1 to {MAX_NDIM})")
    shape = struct.unpack(f"<{ndim}q", _exactly(read, 8 * ndim, "shape"))
    if any(d <= 0 for d in shape):
        raise FrameError(f"shape {list(shape)}: every dimension is positive")
    n = 1
    for d in shape:
        n *= d
        if n > size * 8:  # more elements than bits in the object: no block can hold them
            raise FrameError(f"shape {list(shape)} declares more elements than the object holds")
    dlen = _exactly(read, 1, "dtype")[0]
    dtype = _exactly(read, dlen, "dtype")
    if dtype.decode("ascii", "replace") not in DTYPES:
        raise FrameError(f"dtype {dtype!r}: lmckv knows {', '.join(DTYPES)}")
    vectors = n // shape[-1]
    blocks = [("packed indices", -(-n * bits // 8)), ("norms", 2 * vectors)]
    if use_qjl:
        blocks += [("QJL sketch", sketch * vectors), ("QJL norms", 2 * vectors)]
    at = _PREFIX.size + 8 * ndim + 1 + dlen
    for what, wanted in blocks:
        (length,) = struct.unpack("<q", _exactly(read, 8, f"{what} length"))
        if length != wanted:
            raise FrameError(f"{what}: {length} bytes, the header gives {wanted}")
        if at + 8 + length > size:
            raise FrameError(f"the object ends inside its {what}")
        _skip(read, length, what)
        at += 8 + length
    if at != size:
        raise FrameError(f"{size - at} bytes after the frame's end (byte {at})")
    return shape
