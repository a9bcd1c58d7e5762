"""ServerMetaMessage: the 36-byte reply header (SPEC "ServerMetaMessage",
rule PROTO-SERVER-LAYOUT)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import torch

from .buffers import byte_view
from .commands import (
    ServerReturnCode,
    return_code_from_id,
    return_code_to_id,
)
from .dtype_ids import dtype_from_id, dtype_to_id
from .errors import MalformedMessageError
from .int32 import require_int32
from .locations import location_from_id, location_to_id
from .memory_format import (
    MemoryFormat,
    memory_format_from_id,
    memory_format_to_id,
)
from .shapes import pad_shape_to_4d, strip_shape_padding

#: code, length, fmt, dtype, shape0..shape3, location (int32 LE). Note: location comes
#: last here but before the shape in ClientMetaMessage.
SERVER_META_STRUCT = struct.Struct("<9i")


@dataclass
class ServerMetaMessage:
    """Reply header sent by a cache server."""

    code: ServerReturnCode
    length: int
    fmt: MemoryFormat
    dtype: torch.dtype | None
    shape: torch.Size
    location: str | None = None

    def serialize(self) -> bytes:
        """Pack the 36 bytes of PROTO-SERVER-LAYOUT (byte-identical to upstream)."""
        padded = pad_shape_to_4d(self.shape)
        return SERVER_META_STRUCT.pack(
            return_code_to_id(self.code),
            require_int32("length", self.length, minimum=0),
            memory_format_to_id(self.fmt),
            dtype_to_id(self.dtype),
            *padded,
            location_to_id(self.location),
        )

    @staticmethod
    def packlength() -> int:
        """Size of a serialized ServerMetaMessage: 36."""
        return SERVER_META_STRUCT.size

    @staticmethod
    def deserialize(s: bytes | bytearray | memoryview) -> ServerMetaMessage:
        """Read exactly 36 bytes; every field is validated."""
        view = byte_view(s)
        if len(view) != SERVER_META_STRUCT.size:
            raise MalformedMessageError(
                f"ServerMetaMessage is {SERVER_META_STRUCT.size} bytes, got {len(view)}",
                rule="PROTO-EXACT-LENGTH",
            )
        code, length, fmt_id, dtype_id, d0, d1, d2, d3, location_id = SERVER_META_STRUCT.unpack(
            view
        )
        if length < 0:
            raise MalformedMessageError(
                f"negative length field {length}", rule="PROTO-LENGTH-NONNEG"
            )
        fmt = memory_format_from_id(fmt_id)
        return ServerMetaMessage(
            return_code_from_id(code),
            length,
            fmt,
            dtype_from_id(dtype_id),
            strip_shape_padding([d0, d1, d2, d3], fmt),
            location_from_id(location_id),
        )
