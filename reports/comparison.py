"""A bench run against a baseline run: the verdicts of ``lmckv bench compare``, as a table.

The comparison itself is :func:`bench.gate.compare.compare_runs`, of the runs the report already
read (no file is read twice), with its defaults (gate on the reference implementation, the
run-level decision of ``bench.gate.decision``: Holm across operations at family-wise alpha 0.05,
10% minimum effect), so the page and the command line agree; runs from different machines
are compared with ``cross_machine=True`` and bench compare's cross-machine note is shown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd

from ..bench.gate.compare import compare_runs, summary
from .inputs import BenchRun

GATED_IMPLS = ("reference",)
# Worst first: the order rows are listed in.
VERDICT_ORDER = {
    "regression": 0,
    "inconclusive": 1,
    "improvement": 2,
    "unchanged": 3,
    "new": 4,
    "missing": 5,
}
VERDICT_CLASS = {
    "regression": "o-fail",
    "inconclusive": "o-known",
    "improvement": "o-pass",
    "unchanged": "o-pass",
    "new": "o-skip",
    "missing": "o-skip",
}


@dataclass(frozen=True)
class Comparison:
    """One row per benchmark id, the verdict counts, and bench compare's notes."""

    table: pd.DataFrame
    counts: dict[str, int]
    notes: list[str] = field(default_factory=list)


def compare(baseline: BenchRun, current: BenchRun) -> Comparison:
    """``lmckv bench compare BASELINE CURRENT`` as a table (verdict ``regression`` for the
    rows that carried the run's regression), of the records the report read (record kinds
    newer than the schema left out)."""
    changes, decision, text = compare_runs(
        baseline.file, current.file, gated_impls=GATED_IMPLS, cross_machine=True
    )
    notes = [
        f"{run.path.name}: records of unknown kind left out of the comparison: "
        + ", ".join(f"{k} ({n})" for k, n in sorted(run.ignored_kinds.items()))
        for run in (baseline, current)
        if run.ignored_kinds
    ]
    notes += [
        line.removeprefix("note: ")
        for line in text.splitlines()
        if line.startswith(("note: ", "CROSS-MACHINE: "))
    ]
    notes.append(
        f"run decision: exit {decision.exit_code}; "
        + "; ".join(f"{d.op} {d.outcome} ({d.reason})" for d in decision.ops)
    )
    rows = []
    for change in changes:
        row = asdict(change)
        ratio = row["ratio"]
        rows.append(
            {
                "benchmark (op/impl/device/scope/dtype/case)": row["id"],
                "baseline median (ms)": _ms(row["base_median_s"]),
                "current median (ms)": _ms(row["head_median_s"]),
                "change": None if ratio is None else f"{(ratio - 1) * 100:+.1f}%",
                "verdict": "regression" if change.regression else row["outcome"],
                "minimum effect": f"+{row['min_effect']:.0%}",
            }
        )
    table = pd.DataFrame(rows)
    if not table.empty:
        order = table["verdict"].map(VERDICT_ORDER).fillna(len(VERDICT_ORDER))
        table = table.iloc[order.argsort(kind="stable")].reset_index(drop=True)
    return Comparison(table, summary(changes), notes)


def counts_text(counts: dict[str, int]) -> str:
    """``N regression(s); faster a, slower b, ...`` from bench compare's summary counts."""
    regressions = counts.get("regressions", 0)
    others = ", ".join(f"{k} {v}" for k, v in counts.items() if k != "regressions")
    if set(counts) <= {"new", "missing", "regressions"}:
        return f"no measurement in common with the baseline ({others})"
    return f"{regressions} regression(s); {others}"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3
