"""A process's memory high-water marks, which psutil does not give.

psutil reads a process's current memory (``memory_info``), threads and descriptors, and lmckv
reads those through it. The peaks are another matter: Linux keeps, per process, the largest
virtual size (``VmPeak``) and resident set (``VmHWM``) it ever had, in ``/proc/PID/status``.
A bound on a server's memory is judged on these exact marks, never on samples that a short
spike could fall between, so this one reader stays.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The fields read, in kB as the kernel writes them.
_FIELDS = {"VmPeak": "virtual", "VmHWM": "resident"}


@dataclass(frozen=True)
class MemoryPeaks:
    """The largest virtual size and resident set the process ever had, in bytes."""

    virtual: int
    resident: int


def memory_peaks(pid: int | None) -> MemoryPeaks | None:
    """``pid``'s high-water marks; None when it is gone, unreadable or not on Linux."""
    if pid is None:
        return None
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in _FIELDS:
                    found[_FIELDS[name]] = int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    if len(found) != len(_FIELDS):
        return None  # a zombie keeps no memory figures
    return MemoryPeaks(**found)
