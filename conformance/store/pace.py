"""Pacing a check so that it does not starve the store's readers (``fsck --max-rate``, SPEC.md
"Repairing a store", FSCK-PACE).

A pace holds the bytes read from the store per second, and the objects opened per second, at
or under what was asked, for the whole run and every worker of it together: each read is
given a start time on one virtual clock, ``max(now - CATCH_UP_S, clock)``, and moves the
clock on by its cost (``bytes / rate``, ``1 / objects rate``); the reader sleeps until its
start. Reads run back to back as long as the store answers faster than the pace, so the
measured rate of a run of many reads is the asked one; it is lower only where the store is
slower. A sleep that wakes late (a loaded machine's scheduler: milliseconds, against a turn of
6.7 ms at 150 objects/s) is made up by the reads after it, up to :data:`CATCH_UP_S` behind;
that is also the most a run reads ahead of the pace after a pause (its listing).

The clock is a pair of doubles in shared memory when the reads are spread over a pool of
processes (CLOCK_MONOTONIC is one clock for every process of the machine), else this
process's own. Workers of a Dask cluster, which share no memory, each take an equal share of
the rates.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from io import BufferedIOBase
from typing import Any

from .sources import Entry, Source

#: How far behind its clock a read may start: the time a late wake-up is made up within.
CATCH_UP_S = 0.05


@dataclass(frozen=True)
class Rates:
    """What a run may read per second: bytes and objects (None: no bound)."""

    bytes_per_s: float | None = None
    objects_per_s: float | None = None

    def share(self, workers: int) -> Rates:
        """One of ``workers`` equal shares (workers that share no clock)."""

        def part(rate: float | None) -> float | None:
            return None if rate is None else rate / workers

        return Rates(part(self.bytes_per_s), part(self.objects_per_s))

    def describe(self) -> str:
        parts = []
        if self.bytes_per_s is not None:
            parts.append(f"{_human(self.bytes_per_s)}B/s")
        if self.objects_per_s is not None:
            parts.append(f"{self.objects_per_s:g} objects/s")
        return ", ".join(parts)

    def __bool__(self) -> bool:
        return self.bytes_per_s is not None or self.objects_per_s is not None


def _human(value: float) -> str:
    for unit in ("", "k", "M", "G"):
        if value < 1000:
            return f"{value:.3g} {unit}"
        value /= 1000
    return f"{value:.3g} T"


class _LocalClock:
    """The clock of one process: two doubles under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = [0.0, 0.0]

    def get_lock(self) -> threading.Lock:
        return self._lock

    def __getitem__(self, i: int) -> float:
        return self._values[i]

    def __setitem__(self, i: int, value: float) -> None:
        self._values[i] = value


def shared_clock(context: Any) -> Any:
    """A clock for the processes of a pool made with the multiprocessing ``context`` (given
    to each worker when it starts: shared memory cannot be pickled into a task)."""
    return context.Array("d", 2)


#: The clock of this process's reads: a pool worker's is set by :func:`use_clock`.
_clock: list[Any] = [None]


def use_clock(clock: Any) -> None:
    """Pace this process's reads on ``clock`` (a pool worker's initializer)."""
    _clock[0] = clock


class Pace:
    """Waits before each read until the rates allow it (this module's docstring)."""

    def __init__(self, rates: Rates) -> None:
        self.rates = rates
        #: The pool's shared clock in a pool worker, else this process's own.
        self.clock: Any = _clock[0] or _LocalClock()

    def take(self, nbytes: int) -> None:
        """Wait for the turn of a read of ``nbytes`` bytes from one object."""
        rates = self.rates
        if not rates:
            return
        with self.clock.get_lock():
            now = time.monotonic()
            start = max(now - CATCH_UP_S, self.clock[0], self.clock[1])
            if rates.bytes_per_s is not None:
                self.clock[0] = start + nbytes / rates.bytes_per_s
            if rates.objects_per_s is not None:
                self.clock[1] = start + 1 / rates.objects_per_s
        if start > now:
            time.sleep(start - now)


class Counted:
    """A source's reads, paced and counted (the bytes asked for)."""

    def __init__(self, source: Source, pace: Pace) -> None:
        self.source = source
        self.pace = pace
        self.read_bytes = 0

    def take(self, nbytes: int) -> None:
        """Wait for the turn of a read of ``nbytes`` bytes of one object, and count it."""
        self.pace.take(nbytes)
        self.read_bytes += nbytes

    def open(self, entry: Entry, limit: int) -> BufferedIOBase:
        self.take(min(limit, entry.size) if entry.size > 0 else limit)
        return self.source.open(entry, limit)
