"""The run-level decision of a comparison: one question, one error rate for the whole run.

The exit code of ``lmckv bench compare`` and ``lmckv bench ab`` answers one question, "did
this change make anything slower?", so its false-alarm rate is controlled for the run, not
per row (a per-row test at alpha over ~100 rows raises a false alarm somewhere in most runs):

1. **The process is the unit of replication** (``bench.throughput.workers``: every process measures
   every benchmark of the plan). Rounds inside one process share its memory layout, clock
   and neighbours, so they are not independent samples: a row's value in a process is the
   median of its rounds there, relative to the median of its limit (memcpy, crc32, d2d, ...)
   in the same process (``relative=False``: the absolute median).
2. **One value per operation and process**: the geometric mean of the operation's gated rows
   (every case, dtype and scope the plan has) in that process.
3. **One test per operation**: one-sided Mann-Whitney U on the two sides' process values
   (two separate runs), or the Wilcoxon signed-rank test on the process pairs of an
   interleaved session (``bench.gate.ab``: base and head alternate, so a pair shares the
   machine's state). The change's size is the Hodges-Lehmann estimate of head/base with
   its 90% interval.
4. **Holm's step-down procedure** across the operations keeps the family-wise error rate at
   ``alpha`` (default 0.05: at most one false alarm in twenty runs of identical code, before
   the minimum effect makes it rarer still). An operation is a ``regression`` when Holm
   rejects "not slower" for it and its estimate is at least ``1 + min_effect``;
   ``improvement`` mirrors it (reported, never gating); ``unchanged`` when the 90% interval
   lies within the minimum effect both ways (two one-sided tests); else ``inconclusive``.
   An operation whose test cannot reach Holm's first threshold with the processes it has
   (Mann-Whitney's smallest p is ``1 / C(n + m, n)``, the signed-rank test's ``2 ** -n``)
   is inconclusive, saying how many processes it needs.
5. **Drift between separate runs is not controlled**, and the output says so; where it is
   visible (a kind of limit itself moved by more than ``drift_bound`` between the files:
   the machine changed between the runs), a regression becomes ``inconclusive`` unless the
   lower end of its 90% interval exceeds the minimum effect compounded with the largest
   movement of a limit (a 4x slowdown is not explained by a limit that moved 20%).
6. **The rows that carried a regression** are listed: the operation's rows whose own
   estimate is at least the minimum effect, largest first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

from .verdict import (
    EQUIVALENCE_ALPHA,
    geomean,
    min_p_paired,
    min_p_unpaired,
    one_sided_p,
    paired_shift,
    shift_interval,
)

#: Family-wise error rate of one comparison's regression verdict.
RUN_ALPHA = 0.05
#: How far a limit may move between two separate runs before the machine is taken to have
#: changed between them (head/base of its per-process medians, either way).
DRIFT_BOUND = 0.10
EXIT_OK, EXIT_REGRESSION, EXIT_INCONCLUSIVE = 0, 1, 3


def process_values(row: Mapping[str, Any], limit: Mapping[str, Any] | None = None) -> list[float]:
    """The row's value in each process: the median of its rounds there, over the median of
    its limit's rounds in the same process when ``limit`` is given."""
    groups: list[list[float]] = row["samples_by_process"]
    if limit is None:
        return [median(samples) for samples in groups]
    limits: list[list[float]] = limit["samples_by_process"]
    if len(limits) != len(groups):
        raise ValueError(
            f"{row['op']}/{row['impl']} has {len(groups)} processes but its limit "
            f"{limit['impl']} has {len(limits)}"
        )
    return [median(s) / median(lim) for s, lim in zip(groups, limits, strict=True)]


@dataclass(frozen=True)
class OpDecision:
    """One operation's verdict on its per-process geometric means."""

    op: str
    rows: int
    n_base: int
    n_head: int
    ratio: float
    ci_low: float
    ci_high: float
    p_slower: float
    p_faster: float
    min_effect: float
    outcome: str
    reason: str
    #: (row id, its head/base estimate) of the rows that carried a regression.
    carried_by: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class RunDecision:
    """The verdict of one comparison, its parameters and what the exit code rests on."""

    paired: bool
    alpha: float
    ops: tuple[OpDecision, ...]
    #: (limit kind, head/base of its rows' per-process medians, geometric mean) of the
    #: limits that moved.
    drift: tuple[tuple[str, float], ...]

    @property
    def exit_code(self) -> int:
        """1 an operation regressed; 3 none did but one is inconclusive, or nothing was
        judged; 0 otherwise."""
        outcomes = {op.outcome for op in self.ops}
        if "regression" in outcomes:
            return EXIT_REGRESSION
        if "inconclusive" in outcomes or not self.ops:
            return EXIT_INCONCLUSIVE
        return EXIT_OK


def processes_needed(threshold: float, *, paired: bool) -> int:
    """The fewest processes per side (pairs, when ``paired``) whose test can reach
    ``threshold``."""
    n = 1
    while (min_p_paired(n) if paired else min_p_unpaired(n, n)) > threshold:
        n += 1
    return n


def _estimate(
    base: Sequence[float], head: Sequence[float], *, paired: bool
) -> tuple[float, float, float]:
    """(ratio, low, high) head/base with its two-sided 90% interval, from logs."""
    b = [math.log(x) for x in base]
    h = [math.log(x) for x in head]
    if paired:
        shift, low, high = paired_shift(
            [y - x for x, y in zip(b, h, strict=True)], EQUIVALENCE_ALPHA
        )
    else:
        shift, low, high = shift_interval(b, h, EQUIVALENCE_ALPHA)
    return math.exp(shift), math.exp(low), math.exp(high)


def _op_values(ids: Sequence[str], values: Mapping[str, Sequence[float]]) -> list[float]:
    """Per process, the geometric mean over ``ids`` of their values in that process."""
    n = min(len(values[i]) for i in ids)
    return [geomean([values[i][p] for i in ids]) for p in range(n)]


def drifted_limits(
    base: Mapping[str, Mapping[str, Any]],
    head: Mapping[str, Mapping[str, Any]],
    limit_ids: Iterable[str],
    bound: float,
    *,
    kind_of: Callable[[str], str],
) -> tuple[tuple[str, float], ...]:
    """The kinds of limit (memcpy, crc32, ...) that moved between the runs beyond ``bound``
    either way: per kind, the geometric mean over its rows (every case and dtype) of
    head/base of their per-process medians, so that one noisy limit row moves nothing."""
    ratios: dict[str, list[float]] = {}
    for ident in sorted(limit_ids):
        if ident in base and ident in head:
            ratio = median(process_values(head[ident])) / median(process_values(base[ident]))
            ratios.setdefault(kind_of(ident), []).append(ratio)
    moved = ((kind, geomean(values)) for kind, values in sorted(ratios.items()))
    return tuple((k, r) for k, r in moved if not 1.0 / (1.0 + bound) <= r <= 1.0 + bound)


def decide(
    base: Mapping[str, Mapping[str, Any]],
    head: Mapping[str, Mapping[str, Any]],
    gated: Mapping[str, str | None],
    *,
    op_of: Callable[[str], str],
    impl_of: Callable[[str], str],
    min_effect_of: Callable[[str], float],
    paired: bool,
    alpha: float = RUN_ALPHA,
    limit_ids: Iterable[str] = (),
    drift_bound: float = DRIFT_BOUND,
) -> RunDecision:
    """The run's decision on ``gated`` rows (row id -> the id of its limit, or None to judge
    absolute times), given both sides' rows by id.

    ``op_of`` and ``impl_of`` name a row's operation and implementation; an operation's
    minimum effect is the largest of its rows' (``min_effect_of``), so an override that
    loosens some rows never makes the operation stricter. ``paired``: the sides' processes
    were measured in pairs (``ab``), and both sides have the same number of processes.
    ``limit_ids``: the limit rows checked for drift between separate runs (ignored when
    ``paired``).
    """
    values: dict[str, tuple[list[float], list[float]]] = {}
    for ident, limit in gated.items():
        if ident not in base or ident not in head:
            continue
        if limit is not None and (limit not in base or limit not in head):
            limit = None
        values[ident] = (
            process_values(base[ident], base[limit] if limit else None),
            process_values(head[ident], head[limit] if limit else None),
        )
    by_op: dict[str, list[str]] = {}
    for ident in sorted(values):
        by_op.setdefault(op_of(ident), []).append(ident)
    drift = () if paired else drifted_limits(base, head, limit_ids, drift_bound, kind_of=impl_of)
    # how far the drift seen could move a row relative to its limit, either way
    moved = max((max(r, 1.0 / r) for _, r in drift), default=1.0)
    threshold = alpha / max(len(by_op), 1)  # Holm's first (strictest) threshold
    tests = {}
    for op, ids in by_op.items():
        b = _op_values(ids, {i: values[i][0] for i in ids})
        h = _op_values(ids, {i: values[i][1] for i in ids})
        if paired and len(b) != len(h):
            raise ValueError(f"{op}: paired sides have {len(b)} and {len(h)} processes")
        logs_b, logs_h = [math.log(x) for x in b], [math.log(x) for x in h]
        tests[op] = (b, h, one_sided_p(logs_b, logs_h, paired=paired))
    rejected = _holm({op: t[2][0] for op, t in tests.items()}, alpha)
    decisions = []
    for op, (b, h, (p_slower, p_faster)) in sorted(tests.items()):
        ids = by_op[op]
        effect = max(min_effect_of(i) for i in ids)
        bound = 1.0 + effect
        ratio, low, high = _estimate(b, h, paired=paired)
        smallest = min_p_paired(len(b)) if paired else min_p_unpaired(len(b), len(h))
        carried: tuple[tuple[str, float], ...] = ()
        if op in rejected and ratio >= bound and drift and low < bound * moved:
            outcome = "inconclusive"
            reason = (
                f"slower by {ratio - 1:+.1%}, but the limits moved between the runs "
                f"({', '.join(f'{i} x{r:.2f}' for i, r in drift)}): the machine changed; "
                "measure both sides in one session (lmckv bench ab)"
            )
        elif op in rejected and ratio >= bound:
            outcome, reason = "regression", f"Holm-rejected at family-wise alpha {alpha:g}"
            if drift:
                reason += f", and beyond what the limits' drift (x{moved:.2f}) could explain"
            carried = _carriers(ids, values, bound, paired=paired)
        elif p_faster <= threshold and ratio <= 1.0 / bound:
            outcome, reason = "improvement", f"p_faster {p_faster:.2g} <= {threshold:.2g}"
        elif high < bound and low > 1.0 / bound:
            outcome, reason = "unchanged", f"90% interval within +-{effect:.0%}"
        elif smallest > threshold:
            need = processes_needed(threshold, paired=paired)
            outcome = "inconclusive"
            reason = (
                f"too few processes ({len(b)} vs {len(h)}): the smallest p the test can give "
                f"is {smallest:.2g}, above Holm's first threshold {threshold:.2g}; needs "
                f"{need} {'pairs' if paired else 'per side'}"
            )
        else:
            outcome = "inconclusive"
            reason = f"neither shown slower nor within +-{effect:.0%}"
        decisions.append(
            OpDecision(
                op,
                len(ids),
                len(b),
                len(h),
                ratio,
                low,
                high,
                p_slower,
                p_faster,
                effect,
                outcome,
                reason,
                carried,
            )
        )
    return RunDecision(paired, alpha, tuple(decisions), drift)


def _holm(p_values: Mapping[str, float], alpha: float) -> set[str]:
    """The hypotheses Holm's step-down procedure rejects at family-wise ``alpha``."""
    rejected: set[str] = set()
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    for rank, (name, p) in enumerate(ordered):
        if p > alpha / (len(ordered) - rank):
            break
        rejected.add(name)
    return rejected


def _carriers(
    ids: Sequence[str],
    values: Mapping[str, tuple[list[float], list[float]]],
    bound: float,
    *,
    paired: bool,
) -> tuple[tuple[str, float], ...]:
    """The rows whose own head/base estimate is at least ``bound``, largest first."""
    estimates = [(i, _estimate(*values[i], paired=paired)[0]) for i in ids]
    return tuple(sorted(((i, r) for i, r in estimates if r >= bound), key=lambda x: -x[1]))


def format_decision(decision: RunDecision) -> list[str]:
    """The decision as report lines: one per operation, then the rows that carried it."""
    kind = (
        "interleaved processes (paired: Wilcoxon signed-rank per operation)"
        if decision.paired
        else "separate runs (Mann-Whitney U per operation); drift between the runs is not "
        "controlled beyond the limits' check: lmckv bench ab measures both in one session"
    )
    lines = [
        f"decision: one test per operation on per-process geometric means of its gated rows, "
        f"Holm across {len(decision.ops)} operations at family-wise alpha {decision.alpha:g}; "
        + kind
    ]
    for d in decision.ops:
        lines.append(
            f"  {d.op:16} {d.outcome.upper() if d.outcome == 'regression' else d.outcome:12} "
            f"head/base {d.ratio:.3f} [{d.ci_low:.3f}, {d.ci_high:.3f}] p_slower {d.p_slower:.2g} "
            f"({d.rows} rows, {d.n_base} vs {d.n_head} processes): {d.reason}"
        )
        lines.extend(f"      carried by {ident}: x{ratio:.3f}" for ident, ratio in d.carried_by)
    for ident, ratio in decision.drift:
        lines.append(f"  drift: limit {ident} moved x{ratio:.3f} between the runs")
    return lines
