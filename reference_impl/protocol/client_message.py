"""ClientMetaMessage: the 186-byte request header (SPEC "ClientMetaMessage",
rule PROTO-CLIENT-LAYOUT)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import torch

from .buffers import byte_view
from .cache_key import CacheEngineKey, LayerCacheEngineKey
from .commands import ClientCommand, command_from_id, command_to_id
from .dtype_ids import dtype_from_id, dtype_to_id
from .errors import MalformedMessageError
from .int32 import require_int32
from .key_field import (
    MAX_KEY_LENGTH,
    decode_key_field,
    encode_key_field,
)
from .locations import location_from_id, location_to_id
from .memory_format import (
    MemoryFormat,
    memory_format_from_id,
    memory_format_to_id,
)
from .shapes import pad_shape_to_4d, strip_shape_padding

#: command, length, fmt, dtype, location, shape0..shape3 (int32 LE), key (150 bytes).
CLIENT_META_STRUCT = struct.Struct(f"<9i{MAX_KEY_LENGTH}s")


@dataclass
class ClientMetaMessage:
    """Request header sent by an LMCache worker to a cache server."""

    command: ClientCommand
    key: CacheEngineKey | LayerCacheEngineKey
    length: int
    fmt: MemoryFormat
    dtype: torch.dtype | None
    shape: torch.Size
    location: str | None = None

    def serialize(self) -> bytes:
        """Pack the 186 bytes of PROTO-CLIENT-LAYOUT (byte-identical to upstream)."""
        padded = pad_shape_to_4d(self.shape)
        return CLIENT_META_STRUCT.pack(
            command_to_id(self.command),
            require_int32("length", self.length, minimum=0),
            memory_format_to_id(self.fmt),
            dtype_to_id(self.dtype),
            location_to_id(self.location),
            *padded,
            encode_key_field(self.key),
        )

    @staticmethod
    def deserialize(s: bytes | bytearray | memoryview) -> ClientMetaMessage:
        """Read exactly 186 bytes; every field is validated (MalformedMessageError and
        subclasses, ShapeError, CacheKeyError)."""
        view = byte_view(s)
        if len(view) != CLIENT_META_STRUCT.size:
            raise MalformedMessageError(
                f"ClientMetaMessage is {CLIENT_META_STRUCT.size} bytes, got {len(view)}",
                rule="PROTO-EXACT-LENGTH",
            )
        command, length, fmt_id, dtype_id, location_id, *dims, key = CLIENT_META_STRUCT.unpack(view)
        if length < 0:
            raise MalformedMessageError(
                f"negative length field {length}", rule="PROTO-LENGTH-NONNEG"
            )
        fmt = memory_format_from_id(fmt_id)
        return ClientMetaMessage(
            command_from_id(command),
            decode_key_field(key),
            length,
            fmt,
            dtype_from_id(dtype_id),
            strip_shape_padding(dims, fmt),
            location_from_id(location_id),
        )

    @staticmethod
    def packlength() -> int:
        """Size of a serialized ClientMetaMessage: 186."""
        return CLIENT_META_STRUCT.size
