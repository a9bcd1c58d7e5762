"""What the reference server holds for its peers, and the one budget it is charged to.

SPEC "Bounds a peer cannot stretch": the store's values, the payloads still arriving
(charged in full when a PUT header announces them, PROTO-SRV-BUDGET-INFLIGHT), the LIST
replies being sent, and values evicted or replaced while a GET reply still sends them
(PROTO-SRV-BUDGET-REPLIES) are all charged to one ``capacity``. Room for a new charge is
made by evicting least recently used values that no reply is sending; when there is no
such value left, a payload in flight that has made no progress for
:data:`STALL_GRACE` seconds is reclaimed (its connection closed); failing that too, the
charge is refused and the caller closes the connection.

:class:`Slots` bounds the open connections (PROTO-SRV-SLOTS): when all are taken, a new
connection reclaims the slot of a connection that has not completed a request (oldest
first) or, failing that, of the one idle longest between requests.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .memory_format import MemoryFormat

#: How long a payload in flight may make no progress before its reservation can be
#: reclaimed for another PUT (PROTO-SRV-BUDGET).
STALL_GRACE = 1.0

#: What a value costs beyond its payload (its key and bookkeeping), so that many empty
#: values are bounded too.
ENTRY_OVERHEAD = 256


@dataclass(eq=False)
class Entry:
    """One stored value: the PUT's fmt, dtype and four shape slots, and its bytes.

    ``pins`` counts the GET replies now sending it; a pinned value is not evicted, and one
    replaced while pinned stays charged until its last reply is sent."""

    fmt: MemoryFormat
    dtype: torch.dtype | None
    slots: tuple[int, int, int, int]
    data: bytes | bytearray
    #: The GET reply header, written once at PUT time.
    reply: bytes = b""
    pins: int = 0
    detached: bool = False

    @property
    def cost(self) -> int:
        return len(self.data) + ENTRY_OVERHEAD


@dataclass(eq=False)
class Reservation:
    """Bytes charged for a payload in flight (or a reply being sent). ``abort`` ends the
    connection holding it, for reclaiming it; ``progress`` is when it last advanced."""

    cost: int
    progress: float
    abort: Callable[[], None] | None = None
    live: bool = True


@dataclass
class Store:
    """Values by key string, least recently used first, and the budget they share.

    ``size`` is the stored values' cost (payload plus :data:`ENTRY_OVERHEAD` each),
    ``reserved`` what in-flight payloads and LIST replies hold, ``lingering`` what replaced
    values still being sent hold; their sum, ``charged``, stays at most ``capacity``."""

    capacity: int
    entries: OrderedDict[str, Entry] = field(default_factory=OrderedDict)
    size: int = 0
    reserved: int = 0
    lingering: int = 0
    evictions: int = 0
    refusals: int = 0
    reclaims: int = 0
    inflight: list[Reservation] = field(default_factory=list)

    @property
    def charged(self) -> int:
        return self.size + self.reserved + self.lingering

    def _make_room(self, cost: int) -> bool:
        """Evict unpinned values, least recently used first, then reclaim stalled
        payloads in flight, until ``cost`` more fits."""
        if self.charged + cost <= self.capacity:
            return True
        if cost > self.capacity:
            return False
        for key in [k for k, e in self.entries.items() if not e.pins]:
            if self.charged + cost <= self.capacity:
                break
            self.size -= self.entries.pop(key).cost
            self.evictions += 1
        now = time.monotonic()
        stalled = [r for r in self.inflight if r.abort and now - r.progress >= STALL_GRACE]
        for held in sorted(stalled, key=lambda r: r.progress):
            if self.charged + cost <= self.capacity:
                break
            self.release(held)
            self.reclaims += 1
            if held.abort is not None:
                held.abort()
        return self.charged + cost <= self.capacity

    def reserve(self, cost: int, abort: Callable[[], None] | None = None) -> Reservation | None:
        """Charge ``cost`` bytes (making room as ``_make_room`` does); None, nothing
        charged, when no room can be made (PROTO-SRV-BUDGET). With ``abort`` the
        reservation can be reclaimed once it stalls."""
        if not self._make_room(cost):
            self.refusals += 1
            return None
        held = Reservation(cost, time.monotonic(), abort)
        self.reserved += cost
        self.inflight.append(held)
        return held

    def release(self, held: Reservation) -> None:
        """Give back a reservation (once; later calls do nothing)."""
        if held.live:
            held.live = False
            self.reserved -= held.cost
            self.inflight.remove(held)

    def commit(self, key: str, entry: Entry, held: Reservation) -> bool:
        """Store ``entry`` under ``key`` in place of the reservation its PUT held (at
        least ``entry.cost``); False, nothing stored, when the reservation was reclaimed."""
        if not held.live:
            return False
        self.release(held)
        old = self.entries.pop(key, None)
        if old is not None:
            self._detach(old)
        self.entries[key] = entry
        self.size += entry.cost
        return True

    def put(self, key: str, entry: Entry) -> bool:
        """Reserve and store ``entry`` at once; False (nothing changed) when it cannot fit."""
        if key in self.entries and not self.entries[key].pins:
            self.size -= self.entries.pop(key).cost
        held = self.reserve(entry.cost)
        return held is not None and self.commit(key, entry, held)

    def _detach(self, entry: Entry) -> None:
        self.size -= entry.cost
        if entry.pins:
            entry.detached = True
            self.lingering += entry.cost

    def get(self, key: str) -> Entry | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
        return entry

    def pin(self, entry: Entry) -> None:
        entry.pins += 1

    def unpin(self, entry: Entry) -> None:
        entry.pins -= 1
        if not entry.pins and entry.detached:
            entry.detached = False
            self.lingering -= entry.cost

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def keys(self) -> list[str]:
        return list(self.entries)


@dataclass(eq=False)
class Slot:
    """One open connection as the slot table sees it."""

    opened: float
    #: When the connection last finished a request or opened (None: inside a request).
    idle_since: float | None
    served: int = 0
    #: Ends the connection (set by the server once the connection is accepted).
    close: Callable[[], None] | None = None

    def begin(self) -> None:
        """The first byte of a request arrived."""
        self.idle_since = None

    def end(self) -> None:
        """A request was served; the connection waits for the next one."""
        self.served += 1
        self.idle_since = time.monotonic()


@dataclass
class Slots:
    """At most ``limit`` open connections (PROTO-SRV-SLOTS)."""

    limit: int
    open: list[Slot] = field(default_factory=list)
    reclaimed: int = 0
    refused: int = 0

    def victim(self) -> Slot | None:
        """The slot a new connection takes when all are taken: the oldest of those that
        never completed a request, else the one idle longest between requests, else none."""
        fresh = [s for s in self.open if not s.served]
        if fresh:
            return min(fresh, key=lambda s: s.opened)
        idle = [s for s in self.open if s.idle_since is not None]
        if idle:
            return min(idle, key=lambda s: s.idle_since or 0.0)
        return None
