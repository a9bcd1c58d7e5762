"""Compare two results files: each figure's change, and one decision for the run.

Rows are matched on ``op/impl/device/scope/dtype/case``. A gated implementation's row
(default: reference) is set against its limit (memcpy, crc32; d2d, d2h_pageable or
h2d_pageable on CUDA: the limit of the same device, case and dtype) **process by process**:
its value in a process is the median of its rounds there over the median of its limit's
rounds in the same process (``bench.gate.decision.process_values``). The limit measures the
machine as that process found it, so a process on a slower or busier machine is slower on
both and the quotient cancels it. The process, not the round, is the unit of replication:
rounds inside a process are not independent.

The exit code is the run's decision (``bench.gate.decision``): one test per operation on the
per-process geometric means of its gated rows, Holm across operations at a family-wise
alpha (default 0.05), a minimum effect (default 10%; per-benchmark overrides by glob), the
limits checked for drift between the two files. Each row's own verdict
(``bench.gate.verdict.judge`` on its per-process values, at the same alpha without correction)
is shown for reading, never gating: a row is ``regression`` only when it carried its
operation's regression, and a row that looks slower alone, uncorrected, is
``inconclusive``.

Two separate runs leave drift between them uncontrolled beyond that check: ``lmckv bench
ab`` measures base and head in alternating processes of one session and pairs them.
Rows without a limit, limits and upstream are judged on absolute times and reported, never
gated; ``--absolute`` judges every row on absolute times.

Exit codes (``EXIT_*``): 0 no regression and nothing inconclusive, 1 a regression, 3 no
regression but an operation inconclusive (or nothing to judge), 2 bad usage or input
(including two runs from different machines without ``--cross-machine``).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from lmckv.base.untrusted_text import bare

from ..common.rows import LIMIT_IMPLS, BenchFile, UnknownKinds, read
from .decision import (
    DRIFT_BOUND,
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_REGRESSION,
    RUN_ALPHA,
    RunDecision,
    decide,
    format_decision,
    process_values,
)
from .verdict import MIN_EFFECT, Verdict, judge

KEY_FIELDS = ("op", "impl", "device", "scope", "dtype", "case")
EXIT_USAGE = 2
__all__ = ["EXIT_INCONCLUSIVE", "EXIT_OK", "EXIT_REGRESSION", "EXIT_USAGE"]


def bench_id(row: Mapping[str, Any]) -> str:
    """``op/impl/device/scope/dtype/case`` (``-`` for a null field): what overrides match, and
    what the report prints, each field from the results file as data (one line, escaped)."""
    return "/".join("-" if row[f] is None else bare(str(row[f])) for f in KEY_FIELDS)


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


@dataclass(frozen=True)
class Change:
    """One benchmark's comparison. ``ratio`` and its interval are head/base of what was
    judged (per-process values): time relative to the limit ``relative_to``, or absolute
    time when that is None. ``regression``: the row carried its operation's regression."""

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
    regression: bool = False


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
    alpha: float = RUN_ALPHA,
    gated_impls: tuple[str, ...] = ("reference",),
    relative: bool = True,
    paired: bool = False,
    drift_bound: float = DRIFT_BOUND,
) -> tuple[list[Change], RunDecision]:
    """Every throughput row's change (``missing``/``new`` when one-sided) and the run's
    decision on the gated rows (``paired``: the two sides' processes were measured in
    pairs, ``bench.gate.ab``)."""
    base_rows = {bench_id(r): r for r in base if r.get("kind") == "throughput"}
    head_rows = {bench_id(r): r for r in head if r.get("kind") == "throughput"}
    gated: dict[str, str | None] = {}
    verdicts: dict[str, tuple[str | None, Verdict]] = {}
    for ident in sorted(base_rows.keys() & head_rows.keys()):
        b, h = base_rows[ident], head_rows[ident]
        against = limit_id(h) if relative and h["impl"] in gated_impls else None
        if against not in base_rows or against not in head_rows:
            against = None
        if h["impl"] in gated_impls:
            gated[ident] = against
        base_v = process_values(b, base_rows[against] if against else None)
        head_v = process_values(h, head_rows[against] if against else None)
        verdicts[ident] = (
            against,
            judge(base_v, head_v, alpha=alpha, min_effect=min_effects.for_id(ident)),
        )
    decision = decide(
        base_rows,
        head_rows,
        gated,
        op_of=lambda ident: base_rows[ident]["op"],
        impl_of=lambda ident: base_rows[ident]["impl"],
        min_effect_of=min_effects.for_id,
        paired=paired,
        alpha=alpha,
        limit_ids=[i for i, r in base_rows.items() if r["impl"] in LIMIT_IMPLS],
        drift_bound=drift_bound,
    )
    carried = {ident for op in decision.ops for ident, _ in op.carried_by}
    changes = []
    for ident in sorted(base_rows.keys() | head_rows.keys()):
        before, after = base_rows.get(ident), head_rows.get(ident)
        if before is None or after is None:
            row = after if before is None else before
            assert row is not None
            changes.append(
                Change(
                    ident,
                    row["op"],
                    row["impl"],
                    None if before is None else before["median_s"],
                    None if after is None else after["median_s"],
                    None,
                    "new" if before is None else "missing",
                    False,
                    min_effects.for_id(ident),
                )
            )
            continue
        against, verdict = verdicts[ident]
        changes.append(
            _change(
                ident, before, after, against, verdict, ident in gated, min_effects.for_id(ident)
            )
        )
        if ident in carried:
            changes[-1] = replace(changes[-1], regression=True)
        elif verdict.outcome == "regression":
            # slower when judged alone, uncorrected: not shown by the run's decision
            changes[-1] = replace(changes[-1], outcome="inconclusive")
    return changes, decision


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


def render(
    changes: Sequence[Change],
    decision: RunDecision,
    *,
    title: str,
    notes: Sequence[str] = (),
    cross_machine: bool = False,
) -> str:
    """The printable report: the parameters, notes, the row table, the decision, the exit."""
    code = decision.exit_code
    return "\n".join(
        [
            title,
            *notes,
            format_table(changes, cross_machine=cross_machine),
            *format_decision(decision),
            "summary (rows, each judged alone, uncorrected): "
            + ", ".join(f"{k} {v}" for k, v in summary(changes).items()),
            f"exit {code}: "
            + {
                EXIT_OK: "no regression",
                EXIT_REGRESSION: "regression",
                EXIT_INCONCLUSIVE: "inconclusive (no regression shown, none ruled out)",
            }[code],
        ]
    )


def document(changes: Sequence[Change], decision: RunDecision, **fields: Any) -> dict[str, Any]:
    """The comparison as JSON data: ``fields``, the decision per operation and every row."""
    return {
        **fields,
        "paired": decision.paired,
        "alpha": decision.alpha,
        "exit_code": decision.exit_code,
        "ops": {
            d.op: {**asdict(d), "carried_by": [list(c) for c in d.carried_by]} for d in decision.ops
        },
        "drift": [list(d) for d in decision.drift],
        "summary": summary(changes),
        "changes": [asdict(c) for c in changes],
    }


def compare_files(
    base_path: Path, head_path: Path, **options: Any
) -> tuple[list[Change], RunDecision, str]:
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
    alpha: float = RUN_ALPHA,
    gated_impls: tuple[str, ...] = ("reference",),
    relative: bool = True,
    cross_machine: bool = False,
    drift_bound: float = DRIFT_BOUND,
    json_out: Path | None = None,
) -> tuple[list[Change], RunDecision, str]:
    """Compare two separately made runs already read; the changes, the decision, the report.

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
    changes, decision = compare_rows(
        base_rows,
        head_rows,
        min_effects=min_effects,
        alpha=alpha,
        gated_impls=gated_impls,
        relative=relative,
        drift_bound=drift_bound,
    )
    notes = [
        "separate runs: drift of the machine between them is not controlled (only seen when "
        "the limits moved); `lmckv bench ab BASE HEAD` measures both sides interleaved"
    ]
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
    title = (
        f"base {base_path.name} ({base_header['mode']}), head {head_path.name} "
        f"({head_header['mode']}); minimum effect {min_effects.default:.0%} (overrides: "
        f"{len(min_effects.overrides)}), gated rows judged on "
        + ("times relative to their limit in each process" if relative else "absolute times")
    )
    report = render(changes, decision, title=title, notes=notes, cross_machine=crossed)
    if json_out is not None:
        data = document(
            changes,
            decision,
            base=str(base_path),
            head=str(head_path),
            machines=list(machines),
            cross_machine=crossed,
            min_effect=min_effects.default,
            relative=relative,
            gated_impls=list(gated_impls),
        )
        json_out.write_text(json.dumps(data, indent=1))
    return changes, decision, report
