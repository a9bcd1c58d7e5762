"""The fixed 150-byte key field of ClientMetaMessage (rules PROTO-KEY-LENGTH,
PROTO-KEY-FIELD)."""

from __future__ import annotations

from .cache_key import (
    CacheEngineKey,
    LayerCacheEngineKey,
    parse_cache_key,
)
from .errors import (
    KeyTooLongError,
    MalformedMessageError,
    UnencodableMessageError,
)

MAX_KEY_LENGTH = 150
"""Size in bytes of the key field; also the longest UTF-8 key string a writer may send."""

_PAD = b" "


def encode_key_field(key: CacheEngineKey | LayerCacheEngineKey) -> bytes:
    """The key string in UTF-8, right-padded with 0x20 to exactly MAX_KEY_LENGTH bytes.

    PROTO-KEY-LENGTH: the encoded string (bytes, not characters) is at most 150 bytes.
    PROTO-KEY-FIELD: a key string that ends in a space or holds NUL is refused, since the
    reader could not tell it from padding.
    """
    if not isinstance(key, CacheEngineKey):
        raise UnencodableMessageError(
            f"key must be a CacheEngineKey, got {key!r}", rule="PROTO-KEY-FIELD"
        )
    text = key.to_string()
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raise UnencodableMessageError(
            f"key string {text!r} is not encodable as UTF-8", rule="PROTO-KEY-FIELD"
        ) from None
    if len(raw) > MAX_KEY_LENGTH:
        raise KeyTooLongError(
            f"Key length {len(raw)} bytes exceeds maximum {MAX_KEY_LENGTH} ({text!r})",
            rule="PROTO-KEY-LENGTH",
        )
    if raw.endswith(_PAD) or b"\x00" in raw:
        raise UnencodableMessageError(
            f"key string {text!r} ends in a space or holds NUL", rule="PROTO-KEY-FIELD"
        )
    return raw.ljust(MAX_KEY_LENGTH, _PAD)


def decode_key_field(field: bytes) -> CacheEngineKey | LayerCacheEngineKey:
    """Read the key field: drop trailing 0x20 padding only, decode strict UTF-8, parse."""
    raw = field.rstrip(_PAD)
    if not raw:
        raise MalformedMessageError("key field is empty (all padding)", rule="PROTO-KEY-FIELD")
    if b"\x00" in raw:
        raise MalformedMessageError(
            "key field holds a NUL byte (padding is 0x20)", rule="PROTO-KEY-FIELD"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedMessageError(
            f"key field is not UTF-8: {exc.reason}", rule="PROTO-KEY-FIELD"
        ) from None
    return parse_cache_key(text)
