"""BoundedMemo: the one kind of cache the codec keeps (a speed measure, never a rule).

The header code remembers a few answers that deployments ask for over and over (the same
hash strings, the same geometry). Each memo has a fixed bound, keys that hold everything
the answer depends on (so an entry cannot go stale), and a lock, so threads may share it.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    """At most ``limit`` entries; adding one more drops the oldest."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be positive, got {limit}")
        self.limit = limit
        self._entries: dict[K, V] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def get(self, key: K) -> V | None:
        """The value stored for ``key``, or None."""
        return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        """Store ``value`` for ``key``, dropping the oldest entry when full."""
        with self._lock:
            if key not in self._entries and len(self._entries) >= self.limit:
                del self._entries[next(iter(self._entries))]
            self._entries[key] = value

    def items(self) -> tuple[tuple[K, V], ...]:
        """A snapshot of the entries, oldest first."""
        with self._lock:
            return tuple(self._entries.items())
