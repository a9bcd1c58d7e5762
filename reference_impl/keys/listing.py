"""Pages of keys returned by an L2 adapter's key listing."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import DescriptorError
from .object_key import EncodedObjectKey


@dataclass(frozen=True)
class KeyEntry:
    """One listed key and the size of its object in bytes (``size_bytes >= 0``)."""

    key: EncodedObjectKey
    size_bytes: int

    def __post_init__(self) -> None:
        if isinstance(self.size_bytes, bool) or not isinstance(self.size_bytes, int):
            raise DescriptorError(
                f"size_bytes must be an int, got {self.size_bytes!r}", rule="KEY-LAYOUT-LENGTHS"
            )
        if self.size_bytes < 0:
            raise DescriptorError(
                f"size_bytes must be >= 0, got {self.size_bytes}", rule="KEY-LAYOUT-LENGTHS"
            )


@dataclass(frozen=True)
class KeyListPage:
    """A page of listed keys; ``next_page_token`` is None on the last page, otherwise the
    opaque token to pass back verbatim for the next page."""

    entries: tuple[KeyEntry, ...]
    next_page_token: str | None
