"""Memory format ids (SPEC table "Memory formats"), field ``fmt`` of every message."""

from __future__ import annotations

from enum import Enum

from .errors import UnencodableMessageError, UnknownIdError


class MemoryFormat(Enum):
    """Layout tag of a memory object. Values are the wire ids (rule PROTO-FMT-ID).

    Letters name the axes: 2 = K/V, L = layers, T = tokens, D = hidden. BINARY and
    BINARY_BUFFER are byte objects with shape ``[length, 0, 0, 0]``. Upstream's docstrings
    sit one member above the member they describe; the ids here are what upstream writes.
    """

    UNDEFINED = 0
    KV_2LTD = 1
    KV_T2D = 2
    KV_2TD = 3
    BINARY = 4
    BINARY_BUFFER = 5
    KV_MLA_FMT = 6
    EC_TD = 7
    HS_TD = 8

    def token_dim(self) -> int:
        """Upstream's token-axis table: 2 for KV_2LTD and KV_MLA_FMT, 1 for KV_T2D, else 0
        (also 0 for KV_2TD, although its name puts tokens on axis 1)."""
        return _TOKEN_DIM.get(self, 0)


_TOKEN_DIM = {
    MemoryFormat.KV_2LTD: 2,
    MemoryFormat.KV_T2D: 1,
    MemoryFormat.KV_MLA_FMT: 2,
}

#: Formats whose 4-D shape carries legitimate zero dimensions (rule PROTO-SHAPE-PAD).
UNPADDED_FORMATS = frozenset({MemoryFormat.BINARY, MemoryFormat.BINARY_BUFFER})


def memory_format_from_id(value: int) -> MemoryFormat:
    """Read a format id; an id outside the table raises :class:`UnknownIdError`."""
    try:
        return MemoryFormat(value)
    except ValueError:
        raise UnknownIdError(f"unknown memory format id {value}", rule="PROTO-FMT-ID") from None


def memory_format_to_id(fmt: object) -> int:
    """The id a writer emits for ``fmt``; anything but a :class:`MemoryFormat` is refused."""
    if not isinstance(fmt, MemoryFormat):
        raise UnencodableMessageError(
            f"fmt must be a MemoryFormat, got {fmt!r}", rule="PROTO-FMT-ID"
        )
    return int(fmt.value)
