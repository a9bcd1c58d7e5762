"""The protocol package's error classes: the only exceptions its readers and writers raise.

Every class derives from :class:`ProtocolError`, which derives from ``ValueError`` so that
code written against upstream (which raises ``ValueError`` in a few places) keeps working.
"""

from __future__ import annotations


class ProtocolError(ValueError):
    """Base class of every protocol error (SPEC "Protocol messages and keys").

    ``rule`` is the id of the SPEC.md rule the raise site enforces (``KV-LEN``,
    ``PROTO-DTYPE-ID``, ...), or None where no single rule applies.
    """

    def __init__(self, *args: object, rule: str | None = None) -> None:
        super().__init__(*args)
        self.rule = rule


class MalformedMessageError(ProtocolError):
    """A received buffer is not a valid message: wrong length, a negative length field,
    bad key padding, a key field that is not UTF-8 (rules PROTO-*-LAYOUT, PROTO-KEY-FIELD)."""


class UnknownIdError(MalformedMessageError):
    """A numeric id is not in its table: command, return code, memory format, dtype or
    location (rules PROTO-COMMAND-ID, PROTO-CODE-ID, PROTO-FMT-ID, PROTO-DTYPE-ID,
    PROTO-LOCATION-ID)."""


class UnencodableMessageError(ProtocolError):
    """A writer was given a value the wire format cannot carry: a dtype or location outside
    its table, an integer outside int32, a negative length (rule PROTO-INT32)."""


class KeyTooLongError(UnencodableMessageError):
    """The UTF-8 key string exceeds ``MAX_KEY_LENGTH`` bytes (rule PROTO-KEY-LENGTH)."""


class ShapeError(ProtocolError):
    """A shape has more than 4 dimensions, a negative or non-integer dimension, or a
    dimension outside int32 (rules PROTO-SHAPE-RANK, PROTO-SHAPE-DIMS)."""


class CacheKeyError(ProtocolError):
    """A CacheEngineKey string is malformed, or a key cannot be written as an unambiguous
    string (rules KEY-CACHE-*)."""


class RemoteMetadataError(ProtocolError):
    """A RemoteMetadata buffer or object does not match its group count, or the group count
    is unknown or invalid (rules PROTO-RMETA-*)."""
