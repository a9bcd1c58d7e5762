"""Percentile bootstrap over blocks of consecutive tokens, for the end-to-end metrics.

Per-token quantities of one text (KL divergence, top-1 agreement, log-likelihood) are
correlated with their neighbours, so resampling single tokens would understate the
uncertainty. The tokens are cut into equal blocks (16 consecutive tokens, none spanning two
windows) and whole blocks are resampled with replacement (the non-overlapping block
bootstrap, Carlstein 1986; Efron & Tibshirani 1993, ch. 13): a statistic of the mean of the
block means, ``REPLICATES`` draws, the 2.5 and 97.5 percentiles (Efron's percentile interval;
lmckv's one quantile definition, ``bench.common.quantiles``, which is numpy's default).
A fixed seed makes the interval reproducible; paired comparisons resample the same block
indices for both variants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ..common.quantiles import quantiles

REPLICATES = 2000
LEVEL = 0.95
SEED = 20260101


def _draws(n: int, seed: int) -> npt.NDArray[np.int64]:
    return np.random.default_rng(seed).integers(0, n, size=(REPLICATES, n))


def interval(
    blocks: Sequence[float],
    transform: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]] | None = None,
    *,
    seed: int = SEED,
) -> tuple[float, float, float]:
    """(estimate, low, high): ``transform(mean of blocks)`` (the mean itself without one) and
    its percentile interval."""
    values = np.asarray(blocks, dtype=np.float64)
    means = np.concatenate([[values.mean()], values[_draws(len(values), seed)].mean(axis=1)])
    stats = transform(means) if transform is not None else means
    low, high = quantiles(stats[1:].tolist(), ((1 - LEVEL) / 2, (1 + LEVEL) / 2))
    estimate = float(stats[0])
    return estimate, float(low), float(high)


def paired_difference(
    a: Sequence[float], b: Sequence[float], *, seed: int = SEED
) -> tuple[float, float, float]:
    """(mean(a) - mean(b), low, high) resampling the same blocks of both (paired)."""
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return interval(diff.tolist(), seed=seed)
