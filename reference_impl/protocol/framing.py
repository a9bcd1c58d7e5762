"""What server and client share about the protocol on a connection (SPEC "The protocol on
a connection"): the commands that carry a payload, the size a tensor format's shape and
dtype fix (PROTO-SRV-LENGTH-SHAPE), the key sent with requests that name no value, and the
fixed fields of replies that carry no value."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .commands import ServerReturnCode
from .memory_format import MemoryFormat
from .server_message import ServerMetaMessage

#: Formats whose shape and dtype fix the payload size (PROTO-SRV-LENGTH-SHAPE).
TENSOR_FORMATS = frozenset(
    {
        MemoryFormat.KV_2LTD,
        MemoryFormat.KV_T2D,
        MemoryFormat.KV_2TD,
        MemoryFormat.KV_MLA_FMT,
        MemoryFormat.EC_TD,
        MemoryFormat.HS_TD,
    }
)

#: The key field of HEALTH and LIST requests: the server parses it and ignores it.
CONTROL_KEY = "lmckv@1@0@0@half"

#: The largest value a length field can announce (int32).
MAX_WIRE_LENGTH = 2**31 - 1


def expected_length(
    fmt: MemoryFormat, dtype: torch.dtype | None, shape: Sequence[int]
) -> int | None:
    """The payload size a tensor format's shape and dtype fix; None for the byte formats
    (UNDEFINED, BINARY, BINARY_BUFFER); -1 for a tensor format without a dtype (which no
    length satisfies)."""
    if fmt not in TENSOR_FORMATS:
        return None
    if dtype is None:
        return -1
    return math.prod(int(d) for d in shape) * dtype.itemsize


def empty_reply(code: ServerReturnCode) -> bytes:
    """A reply without a value: ``length`` 0, fmt KV_2LTD, float16, zero shape, location
    0 (the fields upstream writes; a reader ignores them)."""
    return ServerMetaMessage(
        code, 0, MemoryFormat.KV_2LTD, torch.float16, torch.Size([0, 0, 0, 0])
    ).serialize()
