"""The one quantile definition of lmckv: every p50, p99, quartile and IQR in ``bench/`` and
``reports/`` is computed here.

For a sample sorted as x[0] <= ... <= x[n-1] and a level 0 <= q <= 1, let h = (n - 1) q; the
q-quantile interpolates linearly between the two closest ranks:
x[floor(h)] + (h - floor(h)) (x[floor(h) + 1] - x[floor(h)]). This is Hyndman and Fan's type
7: numpy's default (``method="linear"``), R's default and ``statistics.quantiles(...,
method="inclusive")``. Two values already give a spread, identical values give none, and the
median (q = 0.5) is the usual one (the mean of the two middle values of an even sample, as
``statistics.median`` and pandas' ``median()`` give it). A sample holding a NaN has NaN
quantiles, as in numpy. ``tests/test_quantiles.py`` pins the definition and fails when another
module computes a quantile itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def _sorted(values: Iterable[float]) -> list[float]:
    """The sample sorted (all NaN when it holds one: NaN has no rank)."""
    ordered = [float(v) for v in values]
    if not ordered:
        raise ValueError("quantile of an empty sample")
    if any(math.isnan(v) for v in ordered):
        return [math.nan] * len(ordered)
    ordered.sort()
    return ordered


def _at(ordered: Sequence[float], q: float) -> float:
    if not 0.0 <= q <= 1.0:  # also refuses NaN
        raise ValueError(f"quantile level {q} outside [0, 1]")
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    frac = pos - lo
    low, high = ordered[lo], ordered[hi]
    if frac == 0.0:
        return low
    # numpy's own interpolation, from the nearer end: the same floating-point result
    if frac >= 0.5:
        return high - (high - low) * (1.0 - frac)
    return low + (high - low) * frac


def quantile(values: Iterable[float], q: float) -> float:
    """The ``q``-quantile (0 <= q <= 1) of a non-empty sample, in any order (see the module
    docstring); ValueError on an empty sample or a level outside [0, 1]."""
    return _at(_sorted(values), q)


def quantiles(values: Iterable[float], levels: Iterable[float]) -> list[float]:
    """The quantile of a non-empty sample at each of ``levels``, in their order (one sort)."""
    ordered = _sorted(values)
    return [_at(ordered, q) for q in levels]


def quantile_or_none(values: Iterable[float], q: float) -> float | None:
    """:func:`quantile`, or None for an empty sample (a row field that may be unknown)."""
    sample = list(values)
    return quantile(sample, q) if sample else None


def iqr(values: Iterable[float]) -> float:
    """The interquartile range, q75 - q25, of a non-empty sample."""
    q25, q75 = quantiles(values, (0.25, 0.75))
    return q75 - q25
