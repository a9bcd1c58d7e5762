"""Reference implementation of LMCache's wire protocol: ClientMetaMessage,
ServerMetaMessage, RemoteMetadata and CacheEngineKey strings.

The public names and call signatures match upstream ``lmcache.v1.protocol`` 0.5.6; the
differences are explicit little-endian byte order and typed errors (all subclasses of
:class:`ProtocolError`, itself a ``ValueError``) for every malformed input.
"""

from ..dtypes import DTYPE_TO_INT, INT_TO_DTYPE
from .cache_key import (
    CacheEngineKey,
    LayerCacheEngineKey,
    parse_cache_key,
)
from .client_message import ClientMetaMessage
from .commands import ClientCommand, ServerReturnCode
from .errors import (
    CacheKeyError,
    KeyTooLongError,
    MalformedMessageError,
    ProtocolError,
    RemoteMetadataError,
    ShapeError,
    UnencodableMessageError,
    UnknownIdError,
)
from .key_field import MAX_KEY_LENGTH
from .locations import INT_TO_LOCATION, LOCATION_TO_INT
from .memory_format import MemoryFormat
from .remote_metadata import (
    RemoteMetadata,
    get_remote_metadata_bytes,
    init_remote_metadata_info,
)
from .server_message import ServerMetaMessage
from .shapes import pad_shape_to_4d, strip_shape_padding

__all__ = [
    "DTYPE_TO_INT",
    "INT_TO_DTYPE",
    "INT_TO_LOCATION",
    "LOCATION_TO_INT",
    "MAX_KEY_LENGTH",
    "CacheEngineKey",
    "CacheKeyError",
    "ClientCommand",
    "ClientMetaMessage",
    "KeyTooLongError",
    "LayerCacheEngineKey",
    "MalformedMessageError",
    "MemoryFormat",
    "ProtocolError",
    "RemoteMetadata",
    "RemoteMetadataError",
    "ServerMetaMessage",
    "ServerReturnCode",
    "ShapeError",
    "UnencodableMessageError",
    "UnknownIdError",
    "get_remote_metadata_bytes",
    "init_remote_metadata_info",
    "pad_shape_to_4d",
    "parse_cache_key",
    "strip_shape_padding",
]
