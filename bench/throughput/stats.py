"""Summary statistics of repeated timings: median and interquartile range.

Quartiles use linear interpolation between order statistics (numpy's default, "type 7"),
so that two samples already give a spread and identical samples give zero spread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of already sorted values, by linear interpolation."""
    if not sorted_values:
        raise ValueError("quantile of an empty sample")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile level {q} outside [0, 1]")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] * (1.0 - frac) + sorted_values[hi] * frac


@dataclass(frozen=True)
class Summary:
    """Median, quartiles and count of one benchmark's per-call times (seconds)."""

    median: float
    q25: float
    q75: float
    n: int

    @property
    def iqr(self) -> float:
        """Interquartile range q75 - q25."""
        return self.q75 - self.q25


def summarize(samples: Sequence[float]) -> Summary:
    """Median and quartiles of a non-empty sample."""
    ordered = sorted(samples)
    return Summary(
        median=quantile(ordered, 0.5),
        q25=quantile(ordered, 0.25),
        q75=quantile(ordered, 0.75),
        n=len(ordered),
    )


def gbps(n_bytes: int, seconds: float) -> float:
    """Throughput in GB/s (10**9 bytes per second)."""
    if seconds <= 0.0:
        raise ValueError(f"non-positive duration {seconds}")
    return n_bytes / seconds / 1e9
