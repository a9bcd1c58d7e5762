"""In-process prefetch types: trim policy, prefetch mode, and the prefetch handle. None of
them is written to storage or to the wire."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class TrimPolicy(enum.Enum):
    """Which found keys a prefetch retains: PREFIX (longest run from index 0),
    SEGMENTED_PREFIX (the keys that loaded, gaps included), SPARSE (every found key)."""

    PREFIX = 1
    SEGMENTED_PREFIX = 2
    SPARSE = 3


class PrefetchMode(enum.Enum):
    """LOOKUP: pin the loaded keys for an imminent reader. WARM: load and leave them
    unpinned and evictable."""

    LOOKUP = 1
    WARM = 2


@dataclass(frozen=True)
class PrefetchHandle:
    """Bookkeeping returned when a prefetch task is submitted."""

    prefetch_request_id: int
    """Controller id of the L2 request; -1 when none was submitted."""

    external_request_id: str
    """The caller's request id, for tracing."""

    l1_found_indices: tuple[int, ...]
    """Indices of requested keys found (and read-locked) in L1 at submission."""

    total_requested_keys: int
    """Number of keys requested: the size of the result bitmap."""

    submit_time: float
    """Monotonic submission time."""

    l2_orig_indices: tuple[int, ...] = ()
    """Original index of each key submitted to L2."""
