"""Byte views over the buffers readers receive."""

from __future__ import annotations

from .errors import MalformedMessageError


def byte_view(data: object) -> memoryview:
    """``data`` as a flat unsigned-byte view; anything not a contiguous buffer is refused."""
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        raise MalformedMessageError(
            f"expected a bytes-like buffer, got {type(data).__name__}", rule="PROTO-EXACT-LENGTH"
        ) from None
    if not view.c_contiguous:
        raise MalformedMessageError("buffer is not C-contiguous", rule="PROTO-EXACT-LENGTH")
    return view.cast("B")
