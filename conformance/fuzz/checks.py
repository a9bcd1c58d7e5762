"""The per-input properties, checked on the reference for every input a fuzzer produces.

1. Only the decoder's documented error classes escape (anything else is an ``escape``).
2. No hang: each input finishes within a time bound; a SIGALRM interrupts a runaway input.
3. No allocation larger than ``factor * len(input) + slack`` (tracemalloc peak of the
   Python heap; decode's torch outputs are bounded by the target's own oracle). An input past
   the bound is measured once more: what a decoder does once per process (compile a numba
   kernel for a signature first met, import a module) does not recur, an allocation sized by
   the input does.
4. Valid inputs round-trip (the target's oracle).
"""

from __future__ import annotations

import signal
import time
import tracemalloc
from dataclasses import dataclass
from types import FrameType

from .decoders import InputRejected, RoundTripError, Target
from .findings import Failure


@dataclass(frozen=True)
class Limits:
    """Bounds of the properties."""

    seconds_per_input: float = 2.0
    alloc_factor: int = 16
    alloc_slack: int = 256 * 1024
    #: Measure allocations on every n-th input (1 = every input; tracemalloc slows the
    #: decoders several times over, so short campaigns may sample).
    alloc_every: int = 1


@dataclass(frozen=True)
class Verdict:
    """What the reference did with one input."""

    accepted: bool
    error: str | None
    failure: Failure | None


class InputTimeout(BaseException):
    """Raised by the SIGALRM handler inside a decoder that overran its time bound (a
    BaseException, so that no ``except Exception`` in the decoder swallows it)."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise InputTimeout


class Checker:
    """Runs a target's decoder on inputs under the four properties."""

    def __init__(self, target: Target, limits: Limits) -> None:
        self.target = target
        self.limits = limits
        self.count = 0
        self.max_alloc_ratio = 0.0
        # One unmeasured run on every seed, each within the time bound: what a decoder loads or
        # compiles once (a module, a service model, a numba kernel's signature) is not an
        # input's allocation.
        signal.signal(signal.SIGALRM, _on_alarm)
        for seed in target.seeds():
            signal.setitimer(signal.ITIMER_REAL, self.limits.seconds_per_input)
            try:
                target.run(seed)
            except (Exception, InputTimeout):
                pass
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)

    def _peak_again(self, data: bytes) -> int:
        """The allocation peak of one more run of ``data`` (within the time bound)."""
        tracemalloc.start()
        signal.setitimer(signal.ITIMER_REAL, self.limits.seconds_per_input)
        try:
            self.target.run(data)
        except (Exception, InputTimeout):
            pass
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        return peak

    def _failure(self, kind: str, detail: str, data: bytes) -> Verdict:
        return Verdict(False, None, Failure(self.target.name, kind, detail, data))

    def __call__(self, data: bytes) -> Verdict:
        self.count += 1
        measure = self.count % self.limits.alloc_every == 0
        if measure:
            tracemalloc.start()
        start = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, self.limits.seconds_per_input)
        verdict: Verdict
        try:
            value = self.target.run(data)
            try:
                self.target.check(data, value)
            except RoundTripError:
                raise
            except Exception as exc:  # an oracle that cannot even run is a failed oracle
                raise RoundTripError(f"oracle raised {type(exc).__name__}\n{exc}") from None
            verdict = Verdict(True, None, None)
        except InputTimeout:
            verdict = self._failure("hang", f"over {self.limits.seconds_per_input} s", data)
        except RoundTripError as exc:
            verdict = self._failure("roundtrip", str(exc), data)
        except InputRejected as exc:
            verdict = Verdict(False, f"rejected: {exc}", None)
        except self.target.allowed as exc:
            verdict = Verdict(False, type(exc).__name__, None)
        except Exception as exc:
            detail = f"{type(exc).__module__}.{type(exc).__qualname__}\n{exc}"
            verdict = self._failure("escape", detail, data)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            elapsed = time.perf_counter() - start
            if measure:
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
        if verdict.failure is None and elapsed > self.limits.seconds_per_input:
            verdict = self._failure("hang", f"took {elapsed:.2f} s", data)
        if measure and verdict.failure is None:
            bound = self.limits.alloc_factor * len(data) + self.limits.alloc_slack
            if peak > bound:
                peak = self._peak_again(data)
            self.max_alloc_ratio = max(self.max_alloc_ratio, peak / max(len(data), 1))
            if peak > bound:
                verdict = self._failure(
                    "alloc",
                    f"peak {peak} bytes for a {len(data)}-byte input (bound {bound})",
                    data,
                )
        return verdict
