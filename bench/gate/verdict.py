"""The regression verdict on two samples: Mann-Whitney U, a Hodges-Lehmann shift, outcomes.

Given the per-round samples of one figure in a base run and a head run (times, or times
relative to a limit measured in the same process: ``bench.gate.compare``), all positive, the
comparison works on their logarithms, so a change is a ratio head/base:

- the test is the one-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``; exact
  distribution for small samples without ties, else the normal approximation) that head
  is slower (``p_slower``) or faster (``p_faster``);
- the size of the change is the Hodges-Lehmann estimate of the shift (the median of every
  head - base difference of logs), reported as the ratio ``exp(shift)``, with the
  distribution-free confidence interval of that shift (Hollander & Wolfe, *Nonparametric
  Statistical Methods*, 3rd ed., 4.3: the order statistics of the pairwise differences at
  the normal approximation of U's critical value), two-sided at ``1 - 2 * EQUIVALENCE_ALPHA``
  (90%);
- outcomes, for a minimum effect ``m`` (e.g. 0.10 = 10%):

  - ``regression``: ``p_slower < alpha`` and ratio >= 1 + m;
  - ``improvement``: ``p_faster < alpha`` and ratio <= 1 / (1 + m);
  - ``unchanged``: the 90% interval lies inside (1 / (1 + m), 1 + m). This is the two
    one-sided tests procedure of equivalence testing (Schuirmann, *J. Pharmacokin.
    Biopharm.* 15, 1987) at 5% per side: it claims "no change of m or more" with the
    error rate usual for such claims, while a regression needs the far stricter ``alpha``
    (a false alarm fails someone's pull request; one comparison judges dozens of rows);
  - ``inconclusive``: anything else (the data allow a change of at least ``m`` but do not
    show one at ``alpha``): rerun, or measure on a quieter machine.

asv (``asv compare``) calls a change significant when Mann-Whitney U gives p < 0.002 or,
without the raw samples, when the 99% confidence intervals do not overlap, and reports it
only beyond its factor (default 1.1). nvbench's ``scripts/nvbench_compare.py`` runs no test:
a change within the smaller of the two runs' relative standard deviations passes, one
beyond it is slower/faster, and a missing noise figure is reported as unknown. This module
uses asv's kind of test and minimum factor, and names the inconclusive case as an outcome.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist, median

from scipy.stats import mannwhitneyu, wilcoxon

#: One-sided significance level of each direction's test (asv uses 0.002 two-sided).
ALPHA = 0.001
#: One-sided level of each of the two tests that make ``unchanged`` (equivalence, TOST).
EQUIVALENCE_ALPHA = 0.05
#: Smallest change reported as a regression or improvement (asv's default factor is 1.1).
MIN_EFFECT = 0.10
OUTCOMES = ("regression", "improvement", "unchanged", "inconclusive")


@dataclass(frozen=True)
class Verdict:
    """One comparison: outcome, the head/base ratio estimate and its interval, p-values."""

    outcome: str
    ratio: float
    ci_low: float
    ci_high: float
    p_slower: float
    p_faster: float
    n_base: int
    n_head: int


def shift_interval(
    base_logs: Sequence[float], head_logs: Sequence[float], alpha: float
) -> tuple[float, float, float]:
    """(Hodges-Lehmann shift, lower, upper) of head - base at two-sided ``1 - 2 alpha``."""
    diffs = sorted(h - b for h in head_logs for b in base_logs)
    n, m = len(base_logs), len(head_logs)
    z = NormalDist().inv_cdf(1.0 - alpha)
    k = math.floor(n * m / 2.0 - z * math.sqrt(n * m * (n + m + 1) / 12.0))
    k = max(0, min(k, len(diffs) - 1))
    return median(diffs), diffs[k], diffs[len(diffs) - 1 - k]


def judge(
    base: Sequence[float],
    head: Sequence[float],
    *,
    alpha: float = ALPHA,
    min_effect: float = MIN_EFFECT,
) -> Verdict:
    """The verdict on head against base (both positive samples, at least one each)."""
    if not base or not head:
        raise ValueError("judge needs at least one sample on each side")
    if min(*base, *head) <= 0.0:
        raise ValueError("samples must be positive (times or time ratios)")
    b = [math.log(x) for x in base]
    h = [math.log(x) for x in head]
    shift, low, high = shift_interval(b, h, EQUIVALENCE_ALPHA)
    if len(set(b) | set(h)) == 1:  # identical constant samples: no test to run
        p_slower = p_faster = 1.0
    else:
        p_slower = float(mannwhitneyu(h, b, alternative="greater").pvalue)
        p_faster = float(mannwhitneyu(h, b, alternative="less").pvalue)
    ratio, bound = math.exp(shift), 1.0 + min_effect
    if p_slower < alpha and ratio >= bound:
        outcome = "regression"
    elif p_faster < alpha and ratio <= 1.0 / bound:
        outcome = "improvement"
    elif math.exp(high) < bound and math.exp(low) > 1.0 / bound:
        outcome = "unchanged"
    else:
        outcome = "inconclusive"
    return Verdict(
        outcome, ratio, math.exp(low), math.exp(high), p_slower, p_faster, len(base), len(head)
    )


def min_p_unpaired(n_base: int, n_head: int) -> float:
    """The smallest one-sided p-value Mann-Whitney U can give for samples of these sizes
    (every head value above every base value): ``1 / C(n_base + n_head, n_base)``."""
    return 1.0 / math.comb(n_base + n_head, n_base)


def min_p_paired(n_pairs: int) -> float:
    """The smallest one-sided p-value of the Wilcoxon signed-rank test on ``n_pairs``
    non-zero differences (all of one sign): ``2 ** -n``."""
    return 0.5**n_pairs


def paired_shift(diffs: Sequence[float], alpha: float) -> tuple[float, float, float]:
    """(Hodges-Lehmann shift, lower, upper) of paired differences at two-sided
    ``1 - 2 alpha``: the median of the Walsh averages and their order statistics at the
    normal approximation of the signed-rank statistic's critical value (Hollander & Wolfe,
    3rd ed., 3.2)."""
    n = len(diffs)
    walsh = sorted((diffs[i] + diffs[j]) / 2.0 for i in range(n) for j in range(i, n))
    z = NormalDist().inv_cdf(1.0 - alpha)
    k = math.floor(n * (n + 1) / 4.0 - z * math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0))
    k = max(0, min(k, len(walsh) - 1))
    return median(walsh), walsh[k], walsh[len(walsh) - 1 - k]


def one_sided_p(
    base_logs: Sequence[float], head_logs: Sequence[float], *, paired: bool
) -> tuple[float, float]:
    """(p that head is slower, p that head is faster): Mann-Whitney U on the two samples,
    or, ``paired``, the Wilcoxon signed-rank test on head - base of each pair (exact for
    small samples without ties or zero differences, which it drops)."""
    if len(set(base_logs) | set(head_logs)) == 1:
        return 1.0, 1.0
    if not paired:
        return (
            float(mannwhitneyu(head_logs, base_logs, alternative="greater").pvalue),
            float(mannwhitneyu(head_logs, base_logs, alternative="less").pvalue),
        )
    diffs = [h - b for b, h in zip(base_logs, head_logs, strict=True)]
    if not any(diffs):
        return 1.0, 1.0
    return (
        float(wilcoxon(diffs, alternative="greater").pvalue),
        float(wilcoxon(diffs, alternative="less").pvalue),
    )


def geomean(values: Sequence[float]) -> float:
    """Geometric mean of positive values."""
    if not values:
        raise ValueError("geometric mean of nothing")
    return math.exp(sum(math.log(v) for v in values) / len(values))
