"""Timing loops: calibration, warm-up, and rounds interleaved between benchmarks.

Method (as timeit/asv do it): after its untimed setup (e.g. encoding the blobs that ``parse``
reads), each benchmark's callable is called once (a first warm-up), then, if that call was
shorter than ``min_sample_s``, run in a growing loop
until one sample lasts that long (this calibrates ``number``, the calls per sample, and warms
caches and allocators); then ``warmup`` more samples are discarded; then every round times
one sample of *every* benchmark, in an order rotated by one each round, so that slow drift
of the machine (frequency, other tenants) spreads over all implementations instead of
biasing whichever ran last. The garbage collector is off inside a sample.

A sample shorter than ``REPEAT_BELOW_S`` is the minimum of ``REPEATS`` back-to-back timings
of ``number`` calls (the timeit documentation's advice: the minimum is the timing least
disturbed by other work; a shared machine only ever adds time). On the 2-core machine here,
under a load average of 9, a 2 ms timing was now and then descheduled for 10-50 ms: single
timings of the same code differed 20x, minima of three by a few percent. Longer samples are
one timing (a scheduler slice is a small part of them).

On CUDA the clock is a pair of CUDA events around the sample and the end event is
synchronized before reading it, after an optional untimed L2 flush
(``bench.throughput.cuda_limits``);
on CPU it is ``time.process_time`` (``CpuClock``) unless the wall clock is asked for. A
benchmark may come with ``number`` already set (the
calibration of an earlier process, ``bench.throughput.workers``): then calibration only runs its
setup
and one warm-up call.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

#: Samples shorter than this are the minimum of REPEATS timings.
REPEAT_BELOW_S = 0.02
REPEATS = 3


class Clock(Protocol):
    """Times ``number`` back-to-back calls of ``fn``; returns elapsed seconds."""

    def elapsed(self, fn: Callable[[], object], number: int) -> float: ...


#: CPU clocks by name: CPU time of this process (default), or wall-clock time.
CPU_TIMERS: dict[str, Callable[[], float]] = {
    "process_time": time.process_time,
    "perf_counter": time.perf_counter,
}


class CpuClock:
    """Time on the host: ``time.process_time`` (CPU time of this process, user and system)
    by default, or ``time.perf_counter`` (wall clock).

    CPU time is not advanced while the process waits for a core, so other tenants of a
    shared machine that take the core do not enter the sample (they still share caches and
    memory bandwidth); with one torch thread it equals the wall time of an undisturbed run.
    Work on other threads would be summed, so runs with several torch threads should use
    the wall clock.
    """

    def __init__(self, timer: str = "process_time") -> None:
        self.name = timer
        self._timer = CPU_TIMERS[timer]

    def elapsed(self, fn: Callable[[], object], number: int) -> float:
        timer = self._timer
        start = timer()
        for _ in range(number):
            fn()
        return timer() - start


class CudaClock:
    """GPU time between two CUDA events recorded around the calls, after synchronizing."""

    def __init__(self, torch_module: Any, flush: Callable[[], object] | None = None) -> None:
        self._torch = torch_module
        self._flush = flush

    def elapsed(self, fn: Callable[[], object], number: int) -> float:
        cuda = self._torch.cuda
        start = cuda.Event(enable_timing=True)
        end = cuda.Event(enable_timing=True)
        if self._flush is not None:
            self._flush()
        cuda.synchronize()
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3


@dataclass
class Timed:
    """One benchmark: a callable, its clock, and the per-call times of its samples."""

    key: tuple[Any, ...]
    fn: Callable[[], object]
    clock: Clock
    setup: Callable[[], object] | None = None
    number: int = 0
    max_number: int = 100_000
    repeat: int = 1
    samples: list[float] = field(default_factory=list)
    error: str | None = None


def _sample(item: Timed) -> float:
    """One sample: seconds per call (the minimum of ``item.repeat`` timings), with the
    garbage collector off."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        best = min(item.clock.elapsed(item.fn, item.number) for _ in range(item.repeat))
        return best / item.number
    finally:
        if was_enabled:
            gc.enable()


def calibrate(item: Timed, min_sample_s: float) -> None:
    """Run ``item.setup`` (untimed) and one warm-up call, then, unless ``item.number`` is
    already set, set it so one sample lasts at least ``min_sample_s`` (1 when one call alone
    lasts that long; at most ``item.max_number``); ``item.repeat`` becomes REPEATS when a
    sample would last less than REPEAT_BELOW_S. A benchmark whose setup or callable raises
    is not timed: ``item.error`` records ``Type: message``.
    """
    preset = item.number
    number = 1
    try:
        if item.setup is not None:
            item.setup()
        elapsed = item.clock.elapsed(item.fn, 1)
        if preset > 0:
            item.repeat = REPEATS if elapsed * preset < REPEAT_BELOW_S else 1
            return
        while elapsed < min_sample_s and number < item.max_number:
            guess = math.ceil(number * 1.2 * min_sample_s / max(elapsed, 1e-9))
            number = min(item.max_number, max(2 * number, guess))
            elapsed = item.clock.elapsed(item.fn, number)
    except Exception as exc:  # an implementation that cannot do this op is a result
        item.error = f"{type(exc).__name__}: {exc}"
        return
    item.number = number
    item.repeat = REPEATS if elapsed < REPEAT_BELOW_S else 1


def run_interleaved(
    items: list[Timed],
    *,
    rounds: int,
    warmup: int,
    min_sample_s: float,
    on_planned: Callable[[int], object] | None = None,
    on_sample: Callable[[], object] | None = None,
) -> list[Timed]:
    """Calibrate, warm up, then time ``rounds`` interleaved rounds; returns the timed items.

    Items whose callable raised during calibration are left out of the rounds (their
    ``error`` says why) and are not in the returned list. ``on_planned`` is told, once
    calibration is over, how many samples the rounds will take; ``on_sample`` after each.
    """
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    live: list[Timed] = []
    for item in items:
        calibrate(item, min_sample_s)
        if item.error is None:
            for _ in range(warmup):
                _sample(item)
            live.append(item)
    if on_planned is not None:
        on_planned(len(live) * rounds)
    for r in range(rounds):
        shift = r % len(live) if live else 0
        for item in live[shift:] + live[:shift]:
            item.samples.append(_sample(item))
            if on_sample is not None:
                on_sample()
    return live
