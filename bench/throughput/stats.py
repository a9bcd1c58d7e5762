"""Summary statistics of repeated timings: median and interquartile range.

Quartiles are lmckv's one quantile definition (``bench.common.quantiles``: linear
interpolation between order statistics, numpy's default, "type 7"), so that two samples
already give a spread and identical samples give zero spread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..common.quantiles import quantiles

__all__ = ["Summary", "gbps", "summarize"]


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
    median, q25, q75 = quantiles(samples, (0.5, 0.25, 0.75))
    return Summary(median=median, q25=q25, q75=q75, n=len(samples))


def gbps(n_bytes: int, seconds: float) -> float:
    """Throughput in GB/s (10**9 bytes per second)."""
    if seconds <= 0.0:
        raise ValueError(f"non-positive duration {seconds}")
    return n_bytes / seconds / 1e9
