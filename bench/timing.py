"""Timing loops: calibration, warm-up, and rounds interleaved between benchmarks.

Method (as timeit/asv do it): after its untimed setup (e.g. encoding the blobs that ``parse``
reads), each benchmark's callable is called once (a first warm-up), then, if that call was
shorter than ``min_sample_s``, run in a growing loop
until one sample lasts that long (this calibrates ``number``, the calls per sample, and warms
caches and allocators); then ``warmup`` more samples are discarded; then every round times
one sample of *every* benchmark, in an order rotated by one each round, so that slow drift
of the machine (frequency, other tenants) spreads over all implementations instead of
biasing whichever ran last. The garbage collector is off inside a sample.

On CUDA the clock is a pair of CUDA events around the sample and the end event is
synchronized before reading it; on CPU it is ``time.perf_counter``.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


class Clock(Protocol):
    """Times ``number`` back-to-back calls of ``fn``; returns elapsed seconds."""

    def elapsed(self, fn: Callable[[], object], number: int) -> float: ...


class CpuClock:
    """Wall-clock time with ``time.perf_counter``."""

    def elapsed(self, fn: Callable[[], object], number: int) -> float:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return time.perf_counter() - start


class CudaClock:
    """GPU time between two CUDA events recorded around the calls, after synchronizing."""

    def __init__(self, torch_module: Any) -> None:
        self._torch = torch_module

    def elapsed(self, fn: Callable[[], object], number: int) -> float:
        cuda = self._torch.cuda
        start = cuda.Event(enable_timing=True)
        end = cuda.Event(enable_timing=True)
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
    samples: list[float] = field(default_factory=list)
    error: str | None = None


def _sample(item: Timed) -> float:
    """One sample: seconds per call, with the garbage collector off."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return item.clock.elapsed(item.fn, item.number) / item.number
    finally:
        if was_enabled:
            gc.enable()


def calibrate(item: Timed, min_sample_s: float, max_number: int = 100_000) -> None:
    """Run ``item.setup`` (untimed), then set ``item.number`` so one sample lasts at least
    ``min_sample_s`` (1 when one call alone lasts that long). A benchmark whose setup or
    callable raises is not timed: ``item.error`` records ``Type: message``.
    """
    number = 1
    try:
        if item.setup is not None:
            item.setup()
        elapsed = item.clock.elapsed(item.fn, 1)
        while elapsed < min_sample_s and number < max_number:
            guess = math.ceil(number * 1.2 * min_sample_s / max(elapsed, 1e-9))
            number = min(max_number, max(2 * number, guess))
            elapsed = item.clock.elapsed(item.fn, number)
    except Exception as exc:  # an implementation that cannot do this op is a result
        item.error = f"{type(exc).__name__}: {exc}"
        return
    item.number = number


def run_interleaved(
    items: list[Timed],
    *,
    rounds: int,
    warmup: int,
    min_sample_s: float,
    on_sample: Callable[[], object] | None = None,
) -> list[Timed]:
    """Calibrate, warm up, then time ``rounds`` interleaved rounds; returns the timed items.

    Items whose callable raised during calibration are left out of the rounds (their
    ``error`` says why) and are not in the returned list.
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
    for r in range(rounds):
        shift = r % len(live) if live else 0
        for item in live[shift:] + live[:shift]:
            item.samples.append(_sample(item))
            if on_sample is not None:
                on_sample()
    return live
