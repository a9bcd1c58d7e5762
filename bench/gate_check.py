"""How well ``lmckv bench compare`` gates on this machine: A/A pairs and injected slowdowns.

    lmckv bench gate-check --out DIR [--pairs 20] [--slowdown encode:1.2]

Measures ``2 * pairs + 1`` runs of ``PLAN`` (the quick plan cut to ``page16``, float16, CPU:
the shortest calls, where a shared machine's noise is largest), alternating a plain run and
a run whose reference is slowed through ``LMCKV_BENCH_SLOWDOWN`` (``bench.impls``), so that
drift of the machine spreads over both kinds. Then:

- **A/A**: each plain run against the next one (``pairs`` comparisons of identical code);
  the gate holds when at most ``pairs / 20`` of them end in a regression verdict (exit 1);
- **slowdown**: each plain run against the slowed run measured after it; the gate holds
  when at least ``19 * pairs / 20`` of them end in a regression verdict.

Each comparison is exactly what ``lmckv bench compare BASE HEAD`` decides (``bench.compare``,
default alpha and minimum effect). Writes the runs' results files to ``DIR/plain`` and
``DIR/slowed`` and a Markdown summary ``DIR/gate-check.md``; exit 0 when both hold, 1 when
one does not. 20 pairs took 6.5 minutes on an idle 2-core machine.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import pairwise
from pathlib import Path

from lmckv.bench.compare import EXIT_REGRESSION, compare_rows, exit_code, op_geomeans
from lmckv.bench.impls import SLOWDOWN_ENV, parse_slowdown
from lmckv.bench.results import load
from lmckv.bench.runner import run_benchmarks
from lmckv.bench.throughput import CASES, QUICK, ThroughputPlan

PLAN = replace(QUICK, cpu_cases=(CASES["page16"],), dtypes=("float16",), devices=("cpu",))
#: Largest share of A/A pairs that may call a regression, and smallest share of slowed
#: pairs that must (1 and 19 of 20).
MAX_FALSE_ALARMS = Fraction(1, 20)
MIN_DETECTED = Fraction(19, 20)


@dataclass(frozen=True)
class Outcome:
    """One comparison: its exit code (``bench.compare``) and the geomean head/base per op."""

    base: str
    head: str
    exit_code: int
    geomeans: dict[str, float]


def judge_pair(base: Path, head: Path) -> Outcome:
    """What ``lmckv bench compare base head`` decides, with its per-op geomeans."""
    changes = compare_rows(load(base)[1], load(head)[1])
    geo = {op: g for op, (g, _) in op_geomeans(changes).items()}
    return Outcome(base.name, head.name, exit_code(changes), geo)


def measure(
    out: Path,
    pairs: int,
    slowdown: str,
    *,
    plan: ThroughputPlan = PLAN,
    progress: Callable[[str], object] = lambda line: None,
) -> tuple[list[Path], list[Path]]:
    """The plain runs (``pairs + 1``) and slowed runs (``pairs``), alternating."""
    if pairs < 1:
        raise ValueError("pairs must be >= 1")
    parse_slowdown(slowdown)  # a bad spec fails before any run
    plain: list[Path] = []
    slowed: list[Path] = []
    previous = os.environ.pop(SLOWDOWN_ENV, None)
    try:
        for index in range(2 * pairs + 1):
            slow = index % 2 == 1
            if slow:
                os.environ[SLOWDOWN_ENV] = slowdown  # read by the worker processes
            else:
                os.environ.pop(SLOWDOWN_ENV, None)
            path, _, wall = run_benchmarks(
                out / ("slowed" if slow else "plain"),
                mode="quick",
                plan=plan,
                families=(),
                real=False,
                with_accuracy=False,
                with_e2e=False,
                progress=False,
            )
            (slowed if slow else plain).append(path)
            kind = "slowed" if slow else "plain"
            progress(f"run {index + 1}/{2 * pairs + 1} ({kind}): {wall:.0f} s")
    finally:
        os.environ.pop(SLOWDOWN_ENV, None)
        if previous is not None:
            os.environ[SLOWDOWN_ENV] = previous
    return plain, slowed


def summarize(aa: Sequence[Outcome], slow: Sequence[Outcome], slowdown: str) -> tuple[bool, str]:
    """(both hold, the Markdown summary)."""
    false_alarms = sum(o.exit_code == EXIT_REGRESSION for o in aa)
    detected = sum(o.exit_code == EXIT_REGRESSION for o in slow)
    holds = false_alarms <= MAX_FALSE_ALARMS * len(aa) and detected >= MIN_DETECTED * len(slow)
    op = next(iter(parse_slowdown(slowdown)))

    def codes(outcomes: Sequence[Outcome]) -> str:
        counts = Counter(o.exit_code for o in outcomes)
        return " | ".join(str(counts.get(code, 0)) for code in (0, 1, 3))

    def spread(outcomes: Sequence[Outcome]) -> str:
        values = [o.geomeans[op] for o in outcomes if op in o.geomeans]
        return f"{min(values):.3f}-{max(values):.3f}" if values else "-"

    lines = [
        f"# gate check: {'HOLDS' if holds else 'DOES NOT HOLD'}",
        "",
        f"A/A pairs with a regression verdict: {false_alarms} of {len(aa)} (at most "
        f"{float(MAX_FALSE_ALARMS * len(aa)):g} allowed); slowed pairs ({slowdown}) called a "
        f"regression: {detected} of {len(slow)} (at least "
        f"{float(MIN_DETECTED * len(slow)):g} needed).",
        "",
        f"| comparison | pairs | exit 0 | exit 1 (regression) | exit 3 (inconclusive) | "
        f"{op} geomean head/base |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| A/A | {len(aa)} | {codes(aa)} | {spread(aa)} |",
        f"| {slowdown} | {len(slow)} | {codes(slow)} | {spread(slow)} |",
    ]
    return holds, "\n".join(lines) + "\n"


def run_gate_check(out: Path, *, pairs: int, slowdown: str) -> int:
    """Measure, judge, write ``out/gate-check.md``; exit 0 when the gate holds, else 1."""
    out.mkdir(parents=True, exist_ok=True)
    plain, slowed = measure(
        out, pairs, slowdown, progress=lambda line: print(line, file=sys.stderr, flush=True)
    )
    aa = [judge_pair(a, b) for a, b in pairwise(plain)]
    slow = [judge_pair(a, b) for a, b in zip(plain, slowed, strict=False)]
    holds, text = summarize(aa, slow, slowdown)
    (out / "gate-check.md").write_text(text)
    print(text)
    return 0 if holds else 1
