"""A stated background load, for measuring the gate on a busy machine: ``gate-check --load``.

A gate that holds only on an idle machine does not hold on a shared runner. The loaded
figures in ``bench/RESULTS.md`` were measured beside two processes, one spinning and one
copying buffers; this module starts that load on request, so that anyone can measure under
the same one and the summary can say what ran:

- ``spin``: a pure-Python busy loop (one core taken);
- ``copy``: a 64 MiB buffer copied into another, over and over (memory bandwidth and the
  last-level cache, which the 64 MiB cases of the quick plan need).

Each kind is one process, ``python -m lmckv.bench.gate.background KIND SECONDS``, that stops by
itself after SECONDS; it leads its own process group, owned through
``conformance.core.process_groups``, and is killed with its group when the measurement ends,
however it ends.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

KINDS = ("spin", "copy")
COPY_BYTES = 64 << 20


def parse_load(spec: str) -> tuple[str, ...]:
    """``spin,copy`` as its kinds; ValueError naming the kinds known for anything else."""
    kinds = tuple(k.strip() for k in spec.split(","))
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not spec.strip():
        raise ValueError(f"load {spec!r}: expected kinds from {', '.join(KINDS)}, comma-separated")
    return kinds


def work(kind: str, seconds: float) -> int:
    """Run one kind of load for ``seconds``; the number of loop passes it made."""
    if kind not in KINDS:
        raise ValueError(f"load kind {kind!r}: expected one of {', '.join(KINDS)}")
    deadline = time.monotonic() + seconds
    passes = 0
    if kind == "copy":
        source = bytearray(b"\x5a") * COPY_BYTES  # written, so every page is really there
        target = memoryview(bytearray(COPY_BYTES))
    while time.monotonic() < deadline:
        if kind == "copy":
            target[:] = source
        else:
            for _ in range(100_000):
                pass
        passes += 1
    return passes


@contextmanager
def background_load(kinds: Sequence[str], *, max_seconds: float) -> Iterator[list[int]]:
    """One process per kind for the body of the ``with`` (each stops by itself after
    ``max_seconds`` at the latest); yields their PIDs and kills their groups on exit."""
    from lmckv.base import process_groups

    processes: list[subprocess.Popen[bytes]] = []
    try:
        for kind in kinds:
            process = subprocess.Popen(
                [sys.executable, "-m", "lmckv.bench.gate.background", kind, str(max_seconds)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            process_groups.register(process.pid)
            processes.append(process)
        yield [p.pid for p in processes]
    finally:
        for process in processes:
            process_groups.release(process.pid)
            process.wait(10)


def main(argv: Sequence[str]) -> int:
    """``KIND SECONDS``: one load process for a finite time (exit 2 for anything else)."""
    try:
        if len(argv) != 2 or argv[0] not in KINDS:
            raise ValueError
        seconds = float(argv[1])
        if not 0 <= seconds < math.inf:
            raise ValueError
    except ValueError:
        print(f"usage: python -m lmckv.bench.gate.background {{{','.join(KINDS)}}} SECONDS")
        return 2
    work(argv[0], seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
