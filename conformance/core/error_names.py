"""Canonical error names (TESTEE.md, "Errors") and the families they belong to.

Codec errors must match exactly: CorruptEncodedKVError, CodecMismatchError and
UnsupportedConfigError mean different things to a caller. Protocol and key errors must
belong to the right family (PROTO-TYPED-ERRORS); the subclass the reference raises is
recorded in each vector for information.
"""

from __future__ import annotations

#: Prefix of an error that is not one of the canonical names (TESTEE.md, "Errors").
RAW_PREFIX = "raw:"

CODEC_ERRORS = ("CorruptEncodedKVError", "CodecMismatchError", "UnsupportedConfigError")

FAMILIES: dict[str, tuple[str, ...]] = {
    "ProtocolError": (
        "ProtocolError",
        "MalformedMessageError",
        "UnknownIdError",
        "UnencodableMessageError",
        "KeyTooLongError",
        "ShapeError",
        "CacheKeyError",
        "RemoteMetadataError",
    ),
    "KeyFormatError": (
        "KeyFormatError",
        "ObjectKeyInvariantError",
        "MalformedObjectKeyStringError",
        "UnrepresentableObjectKeyError",
        "KVRankFieldError",
        "DescriptorError",
    ),
    # A serde's contract refusals (SERDE-*); upstream raises ValueError for them.
    "SerdeError": (
        "SerdeError",
        "SerdeSlotError",
        "DestinationTooSmallError",
        "SerdeModeError",
    ),
}

#: The family an operation's errors belong to (CacheEngineKey strings are protocol).
OP_FAMILIES = (
    ("proto.", "ProtocolError"),
    ("key.cache.", "ProtocolError"),
    ("key.", "KeyFormatError"),
    ("serde.", "SerdeError"),
)


def family_of(error: str) -> str | None:
    """The family of a canonical error name, or None (codec errors, raw errors)."""
    for family, members in FAMILIES.items():
        if error in members:
            return family
    return None


def op_family(op: str) -> str | None:
    """The error family of an operation, or None for codec operations."""
    return next((family for prefix, family in OP_FAMILIES if op.startswith(prefix)), None)


def is_raw(error: str) -> bool:
    """Whether ``error`` is raw (untyped): ``raw:builtins.ValueError``, ``raw:testee-crash``."""
    return error.startswith(RAW_PREFIX)


def matches(got: str, expected: str) -> bool:
    """``got`` satisfies ``expected``: the same canonical name, or a member of the family
    ``expected``. A raw error satisfies nothing, not even the same raw name: a verdict that
    wants a typed error can never be met by an untyped one."""
    if is_raw(got) or is_raw(expected):
        return False
    return got == expected or (expected in FAMILIES and family_of(got) == expected)
