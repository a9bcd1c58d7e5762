"""Range check for the signed 32-bit little-endian integers every message field uses."""

from __future__ import annotations

import operator

from .errors import UnencodableMessageError

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def require_int32(field: str, value: object, *, minimum: int = INT32_MIN) -> int:
    """Return ``value`` as an int if it is an integer in ``[minimum, INT32_MAX]``.

    Rule PROTO-INT32: every field is a signed 32-bit integer; writers refuse values that do
    not fit instead of letting ``struct`` fail. ``bool`` is refused: it is not a count.
    """
    if isinstance(value, bool):
        raise UnencodableMessageError(
            f"{field} must be an integer, got bool {value!r}", rule="PROTO-INT32"
        )
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise UnencodableMessageError(
            f"{field} must be an integer, got {type(value).__name__}", rule="PROTO-INT32"
        ) from None
    if not minimum <= number <= INT32_MAX:
        raise UnencodableMessageError(
            f"{field}={number} is outside [{minimum}, {INT32_MAX}] (int32 field)",
            # A length field (minimum 0) given a negative value: PROTO-LENGTH-NONNEG.
            rule="PROTO-LENGTH-NONNEG" if minimum == 0 and number < 0 else "PROTO-INT32",
        )
    return number
