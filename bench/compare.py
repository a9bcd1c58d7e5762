"""Compare two results files: each figure's change, a verdict with its statistics, a CI gate.

Rows are matched on ``op/impl/device/scope/dtype/case``. Each row of a gated
implementation (default: reference) is judged on its samples **relative to its limit**
measured in the same process: every per-round sample divided by the median of that process's
samples of the row's limit (memcpy, crc32, d2d, d2h_pageable or h2d_pageable; the limit of
the same device, case and dtype). The limit measures the machine as that process found it
(its cores, clock, memory and neighbours), so a process or run on a slower or busier machine
is slower on both and the quotient cancels it; the process median keeps one disturbed limit
sample from moving the row. Rows without a limit, limits and upstream are judged on their
absolute per-round times and are reported, never gated; ``--absolute`` judges every row on
absolute times.

Why not pair each round with a baseline's sample of the same round, or use upstream's row
as the baseline, as this module did before: measured here (20 A/A pairs of ``page16`` runs),
upstream's encode took 3x longer in some processes than in others while the reference's did
not, and one limit sample 30% high moved every row of its round; either way the baseline's
own noise entered the verdict, and 4 of 20 A/A pairs called a regression
(``bench/RESULTS.md``, "Measured on this machine").

The base and head samples (9 per row in quick mode: 3 processes x 3 rounds) go to
``bench.verdict.judge``: one-sided Mann-Whitney U at ``alpha`` (default 0.001 per
direction) and a Hodges-Lehmann estimate of the ratio head/base with its 90% interval
(equivalence), against a minimum effect (default 10%; per-benchmark overrides by glob).
Outcomes: ``regression``, ``improvement``, ``unchanged``, ``inconclusive``;
``new``/``missing`` for one-sided rows.

Exit codes (``EXIT_*``): 0 no gated regression and nothing inconclusive, 1 a gated
regression, 3 no regression but a gated row inconclusive, 2 bad usage or input (including
two runs from different machines without ``--cross-machine``).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import median
from typing import Any

from lmckv.bench.results import LIMIT_IMPLS, BenchFile, UnknownKinds, read
from lmckv.bench.verdict import ALPHA, MIN_EFFECT, Verdict, geomean, judge

KEY_FIELDS = ("op", "impl", "device", "scope", "dtype", "case")
EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3


def bench_id(row: Mapping[str, Any]) -> str:
    """``op/impl/device/scope/dtype/case`` (``-`` for a null field): what overrides match."""
    return "/".join("-" if row[f] is None else str(row[f]) for f in KEY_FIELDS)


@dataclass(frozen=True)
class MinEffects:
    """Default minimum effect, then (glob pattern, effect) overrides; the last match wins."""

    default: float = MIN_EFFECT
    overrides: tuple[tuple[str, float], ...] = ()

    def for_id(self, ident: str) -> float:
        """The minimum effect that applies to benchmark ``ident``."""
        value = self.default
        for pattern, effect in self.overrides:
            if fnmatch.fnmatchcase(ident, pattern):
                value = effect
        return value

    @classmethod
    def parse(cls, specs: Iterable[str]) -> MinEffects:
        """From ``--min-effect`` values: ``0.2`` sets the default, ``PATTERN=0.5``
        overrides it where PATTERN matches."""
        default = MIN_EFFECT
        overrides: list[tuple[str, float]] = []
        for spec in specs:
            pattern, sep, value = spec.rpartition("=")
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"min effect {spec!r}: {value!r} is not a number") from None
            if number <= 0:
                raise ValueError(f"min effect {spec!r} must be positive")
            if sep:
                overrides.append((pattern, number))
            else:
                default = number
        return cls(default, tuple(overrides))


class MachineMismatch(ValueError):
    """The two runs come from different machines (and ``--cross-machine`` was not given)."""


def limit_id(row: Mapping[str, Any]) -> str | None:
    """The id of the limit a row is judged against (same device, case and dtype), or None
    for limits and rows without one."""
    limit = row.get("limit")
    if row["impl"] in LIMIT_IMPLS or not limit:
        return None
    op = "crc32" if limit == "crc32" else "copy"
    return bench_id({**row, "op": op, "impl": limit, "scope": None})


def by_process(row: Mapping[str, Any]) -> list[list[float]]:
    """A row's samples per process, in round order."""
    groups: list[list[float]] = row["samples_by_process"]
    return groups


def relative_to_limit(row: Mapping[str, Any], limit: Mapping[str, Any]) -> list[float]:
    """Each of the row's samples over the median of its limit's samples in the same process
    (a process where the limit has no sample is left out)."""
    out: list[float] = []
    for samples, limit_samples in zip(by_process(row), by_process(limit), strict=False):
        if limit_samples:
            scale = median(limit_samples)
            out.extend(sample / scale for sample in samples)
    return out


@dataclass(frozen=True)
class Change:
    """One benchmark's comparison. ``ratio`` and its interval are head/base of what was
    judged: time relative to the limit ``relative_to``, or absolute time when that is None."""

    id: str
    op: str
    impl: str
    base_median_s: float | None
    head_median_s: float | None
    relative_to: str | None
    outcome: str
    gated: bool
    min_effect: float
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_slower: float | None = None
    p_faster: float | None = None
    n: int | None = None

    @property
    def regression(self) -> bool:
        """A gated row judged a regression."""
        return self.gated and self.outcome == "regression"


def _change(
    ident: str,
    b: Mapping[str, Any],
    h: Mapping[str, Any],
    against: str | None,
    verdict: Verdict,
    gated: bool,
    min_effect: float,
) -> Change:
    return Change(
        ident,
        h["op"],
        h["impl"],
        b["median_s"],
        h["median_s"],
        against,
        verdict.outcome,
        gated,
        min_effect,
        verdict.ratio,
        verdict.ci_low,
        verdict.ci_high,
        verdict.p_slower,
        verdict.p_faster,
        min(verdict.n_base, verdict.n_head),
    )


def compare_rows(
    base: Iterable[Mapping[str, Any]],
    head: Iterable[Mapping[str, Any]],
    *,
    min_effects: MinEffects = MinEffects(),
    alpha: float = ALPHA,
    gated_impls: tuple[str, ...] = ("reference",),
    relative: bool = True,
) -> list[Change]:
    """Changes for every throughput row of either side (``missing``/``new`` when one-sided)."""
    base_rows = {bench_id(r): r for r in base if r.get("kind") == "throughput"}
    head_rows = {bench_id(r): r for r in head if r.get("kind") == "throughput"}
    changes = []
    for ident in sorted(base_rows.keys() | head_rows.keys()):
        b, h = base_rows.get(ident), head_rows.get(ident)
        effect = min_effects.for_id(ident)
        if b is None or h is None:
            row = h if b is None else b
            assert row is not None
            changes.append(
                Change(
                    ident,
                    row["op"],
                    row["impl"],
                    None if b is None else b["median_s"],
                    None if h is None else h["median_s"],
                    None,
                    "new" if b is None else "missing",
                    False,
                    effect,
                )
            )
            continue
        gated = h["impl"] in gated_impls
        against = limit_id(h) if relative and gated else None
        if against not in base_rows or against not in head_rows:
            against = None
        base_s = _flat(b) if against is None else relative_to_limit(b, base_rows[against])
        head_s = _flat(h) if against is None else relative_to_limit(h, head_rows[against])
        verdict = judge(base_s, head_s, alpha=alpha, min_effect=effect)
        changes.append(_change(ident, b, h, against, verdict, gated, effect))
    return changes


def _flat(row: Mapping[str, Any]) -> list[float]:
    return [s for samples in by_process(row) for s in samples]


def exit_code(changes: Sequence[Change]) -> int:
    """EXIT_REGRESSION, else EXIT_INCONCLUSIVE (a gated row inconclusive), else EXIT_OK."""
    if any(c.regression for c in changes):
        return EXIT_REGRESSION
    if any(c.gated and c.outcome == "inconclusive" for c in changes):
        return EXIT_INCONCLUSIVE
    return EXIT_OK


def op_geomeans(changes: Sequence[Change]) -> dict[str, tuple[float, int]]:
    """Per op of the gated rows: geometric mean of their ratios, and how many rows."""
    ratios: dict[str, list[float]] = {}
    for c in changes:
        if c.gated and c.ratio is not None:
            ratios.setdefault(c.op, []).append(c.ratio)
    return {op: (geomean(values), len(values)) for op, values in sorted(ratios.items())}


def summary(changes: Sequence[Change]) -> dict[str, int]:
    """How many rows of each outcome, and how many gated regressions (``regressions``)."""
    counts: dict[str, int] = {}
    for c in changes:
        counts[c.outcome] = counts.get(c.outcome, 0) + 1
    counts["regressions"] = sum(c.regression for c in changes)
    return counts


def format_table(changes: Sequence[Change], *, cross_machine: bool = False) -> str:
    """A plain-text table, one benchmark per line; gated regressions marked ``REGRESSION``."""

    def pct(x: float | None) -> str:
        return f"{(x - 1) * 100:+.1f}%" if x is not None else "-"

    def ms(x: float | None) -> str:
        return f"{x * 1e3:.3f}ms" if x is not None else "-"

    tag = " [cross-machine]" if cross_machine else ""
    lines = [
        f"{'benchmark':58} {'base':>10} {'head':>10} {'change':>8} {'interval':>17} "
        f"{'p':>8} {'judged on':>14}  outcome"
    ]
    for c in changes:
        interval = f"{pct(c.ci_low)}..{pct(c.ci_high)}" if c.ci_low is not None else "-"
        p_value = "-"
        if c.p_slower is not None and c.p_faster is not None:
            p_value = f"{min(c.p_slower, c.p_faster):.1e}"
        judged = f"/{c.relative_to.split('/')[1]}" if c.relative_to else "time"
        flag = "REGRESSION" if c.regression else c.outcome
        ungated = "" if c.gated or c.outcome in ("new", "missing") else " (not gated)"
        lines.append(
            f"{c.id:58} {ms(c.base_median_s):>10} {ms(c.head_median_s):>10} "
            f"{pct(c.ratio):>8} {interval:>17} {p_value:>8} {judged:>14}  "
            f"{flag}{ungated}{tag}"
        )
    return "\n".join(lines)


def compare_files(base_path: Path, head_path: Path, **options: Any) -> tuple[list[Change], str]:
    """:func:`compare_runs` (``options`` are its keywords) of two results files, read
    refusing record kinds this version does not know."""
    return compare_runs(
        read(base_path, unknown=UnknownKinds.REFUSE),
        read(head_path, unknown=UnknownKinds.REFUSE),
        **options,
    )


def compare_runs(
    base: BenchFile,
    head: BenchFile,
    *,
    min_effects: MinEffects = MinEffects(),
    alpha: float = ALPHA,
    gated_impls: tuple[str, ...] = ("reference",),
    relative: bool = True,
    cross_machine: bool = False,
    json_out: Path | None = None,
) -> tuple[list[Change], str]:
    """Compare two runs already read; returns the changes and the printable report.

    Raises MachineMismatch when their ``machine_id`` differ and ``cross_machine`` is False.
    """
    base_path, head_path = base.path, head.path
    base_header, base_rows = base.header, base.records
    head_header, head_rows = head.header, head.records
    machines = (base_header["machine_id"], head_header["machine_id"])
    if machines[0] != machines[1] and not cross_machine:
        raise MachineMismatch(
            f"{base_path.name} was measured on machine {machines[0]}, {head_path.name} on "
            f"{machines[1]}: timings of different machines do not compare "
            "(--cross-machine compares them anyway, marking every row)"
        )
    crossed = machines[0] != machines[1]
    changes = compare_rows(
        base_rows,
        head_rows,
        min_effects=min_effects,
        alpha=alpha,
        gated_impls=gated_impls,
        relative=relative,
    )
    notes = []
    if crossed:
        notes.append(
            f"CROSS-MACHINE: base {machines[0]} vs head {machines[1]}; changes include the "
            "difference between the machines"
        )
    for name in ("cpu_model", "gpu", "torch", "torch_threads", "lmcache"):
        if base_header["env"].get(name) != head_header["env"].get(name):
            notes.append(
                f"note: env.{name} differs ({base_header['env'].get(name)!r} vs "
                f"{head_header['env'].get(name)!r})"
            )
    geo = op_geomeans(changes)
    counts = summary(changes)
    code = exit_code(changes)
    report = "\n".join(
        [
            f"base {base_path.name} ({base_header['mode']}), head {head_path.name} "
            f"({head_header['mode']}); Mann-Whitney U one-sided alpha {alpha:g}, minimum "
            f"effect {min_effects.default:.0%} (overrides: {len(min_effects.overrides)}), "
            "gated rows judged on "
            + ("times relative to their limit in each process" if relative else "absolute times"),
            *notes,
            format_table(changes, cross_machine=crossed),
            "geomean head/base per op (gated rows): "
            + ", ".join(f"{op} {g:.3f} ({n} rows)" for op, (g, n) in geo.items()),
            "summary: " + ", ".join(f"{k} {v}" for k, v in counts.items()),
            f"exit {code}: "
            + {
                EXIT_OK: "no regression",
                EXIT_REGRESSION: "regression",
                EXIT_INCONCLUSIVE: "inconclusive (no regression shown, none ruled out)",
            }[code],
        ]
    )
    if json_out is not None:
        json_out.write_text(
            json.dumps(
                {
                    "base": str(base_path),
                    "head": str(head_path),
                    "machines": list(machines),
                    "cross_machine": crossed,
                    "alpha": alpha,
                    "min_effect": min_effects.default,
                    "relative": relative,
                    "gated_impls": list(gated_impls),
                    "exit_code": code,
                    "geomean": {op: {"ratio": g, "rows": n} for op, (g, n) in geo.items()},
                    "summary": counts,
                    "changes": [{**asdict(c), "regression": c.regression} for c in changes],
                },
                indent=1,
            )
        )
    return changes, report
