"""How well the gate holds on this machine: A/A pairs and injected slowdowns, both methods.

    lmckv bench gate-check --out DIR [--pairs 20] [--slowdown encode:1.2] [--ab-pairs 8]
                           [--only compare|ab]

Measures the full quick plan (every case, dtype and implementation it has), with the
reference slowed through ``LMCKV_BENCH_SLOWDOWN`` (``bench.impls``) where a comparison needs
a real change, and judges every comparison exactly as the commands do (``bench.decision``,
default alpha and minimum effect):

- **compare** (two separate runs): ``2 * pairs + 1`` runs alternating plain and slowed, so
  that drift of the machine spreads over both kinds; A/A = each plain run against the next,
  slowdown = each plain run against the slowed run after it.
- **ab** (one interleaved session per comparison, ``bench.ab``): ``pairs`` A/A sessions
  (this interpreter against itself) and ``pairs`` sessions against a slowed head,
  alternating, each of ``ab_pairs`` process pairs.

The gate holds when, for each method measured, at most ``pairs / 20`` A/A comparisons end in
a regression verdict (exit 1), and, for ``ab`` (the form the README's CI snippet uses), at
least ``19 * pairs / 20`` slowed ones do; compare's detection rate is reported, not
required (separate runs cannot promise it under drift). Writes the results files under
``DIR/compare`` and ``DIR/ab`` and a Markdown summary ``DIR/gate-check.md``; exit 0 when it
holds, 1 when not. A full measurement is long (on 2 cores: a quick-plan run or an ab
process pair takes about a minute of throughput work, times 41 runs and ``2 * pairs *
ab_pairs`` pairs): run it on the runner you gate on, with its usual load.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from pathlib import Path

from lmckv.bench.ab import Side, measure_pairs
from lmckv.bench.compare import compare_rows
from lmckv.bench.decision import EXIT_REGRESSION, RunDecision
from lmckv.bench.impls import SLOWDOWN_ENV, parse_slowdown
from lmckv.bench.results import load
from lmckv.bench.runner import run_benchmarks
from lmckv.bench.throughput import QUICK, ThroughputPlan

PLAN = QUICK
METHODS = ("compare", "ab")
#: Process pairs of each ab session: the signed-rank test reaches Holm's first threshold
#: over the quick plan's four CPU operations (0.05 / 4) from 7 pairs on.
AB_PAIRS = 8
#: Largest share of A/A comparisons that may call a regression, and smallest share of
#: slowed ones that must (1 and 19 of 20).
MAX_FALSE_ALARMS = Fraction(1, 20)
MIN_DETECTED = Fraction(19, 20)


@dataclass(frozen=True)
class Outcome:
    """One comparison: its exit code and the head/base estimate per operation."""

    base: str
    head: str
    exit_code: int
    ratios: dict[str, float]


def outcome(base: Path, head: Path, decision: RunDecision) -> Outcome:
    """A decision as an Outcome."""
    ratios = {d.op: d.ratio for d in decision.ops}
    return Outcome(base.name, head.name, decision.exit_code, ratios)


def judge_separate(base: Path, head: Path) -> Outcome:
    """What ``lmckv bench compare base head`` decides."""
    _, decision = compare_rows(load(base)[1], load(head)[1])
    return outcome(base, head, decision)


def judge_paired(base: Path, head: Path) -> Outcome:
    """What ``lmckv bench ab`` decides on the two files of one session."""
    _, decision = compare_rows(load(base)[1], load(head)[1], paired=True)
    return outcome(base, head, decision)


def measure(
    out: Path,
    pairs: int,
    slowdown: str,
    *,
    plan: ThroughputPlan = PLAN,
    progress: Callable[[str], object] = lambda line: None,
) -> tuple[list[Path], list[Path]]:
    """Separate runs: the plain runs (``pairs + 1``) and slowed runs (``pairs``),
    alternating."""
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
            progress(f"compare run {index + 1}/{2 * pairs + 1} ({kind}): {wall:.0f} s")
    finally:
        os.environ.pop(SLOWDOWN_ENV, None)
        if previous is not None:
            os.environ[SLOWDOWN_ENV] = previous
    return plain, slowed


def measure_ab(
    out: Path,
    pairs: int,
    slowdown: str,
    *,
    ab_pairs: int = AB_PAIRS,
    plan: ThroughputPlan = PLAN,
    progress: Callable[[str], object] = lambda line: None,
) -> tuple[list[Outcome], list[Outcome]]:
    """Interleaved sessions: ``pairs`` A/A and ``pairs`` slowed, alternating; judged."""
    parse_slowdown(slowdown)
    plain = Side("base", "current", sys.executable, {SLOWDOWN_ENV: ""})
    same = Side("head", "current", sys.executable, {SLOWDOWN_ENV: ""})
    slowed = Side("head", "current", sys.executable, {SLOWDOWN_ENV: slowdown})
    aa: list[Outcome] = []
    slow: list[Outcome] = []
    for index in range(2 * pairs):
        head, kind = (slowed, "slowed") if index % 2 else (same, "A/A")
        files = measure_pairs(
            out / f"{index:02d}-{'slowed' if index % 2 else 'aa'}",
            plain,
            head,
            plan=plan,
            pairs=ab_pairs,
        )
        result = judge_paired(*files)
        (slow if index % 2 else aa).append(result)
        progress(f"ab session {index + 1}/{2 * pairs} ({kind}): exit {result.exit_code}")
    return aa, slow


def summarize(
    results: dict[str, tuple[Sequence[Outcome], Sequence[Outcome]]], slowdown: str
) -> tuple[bool, str]:
    """(the gate holds, the Markdown summary) from each method's A/A and slowed outcomes."""
    op = next(iter(parse_slowdown(slowdown)))
    holds = True
    rows = []
    for method, (aa, slow) in results.items():
        false_alarms = sum(o.exit_code == EXIT_REGRESSION for o in aa)
        detected = sum(o.exit_code == EXIT_REGRESSION for o in slow)
        ok_aa = false_alarms <= MAX_FALSE_ALARMS * len(aa)
        ok_slow = method != "ab" or detected >= MIN_DETECTED * len(slow)
        holds = holds and ok_aa and ok_slow
        need = f">= {float(MIN_DETECTED * len(slow)):g}" if method == "ab" else "reported"
        rows.append(
            f"| {method} | {len(aa)} | {false_alarms} (<= {float(MAX_FALSE_ALARMS * len(aa)):g})"
            f" | {_codes(aa)} | {_spread(aa, op)} | {detected} ({need}) | {_codes(slow)} | "
            f"{_spread(slow, op)} |"
        )
    lines = [
        f"# gate check: {'HOLDS' if holds else 'DOES NOT HOLD'}",
        "",
        f"Injected slowdown: {slowdown}. Run-level decision: Holm across operations at "
        "family-wise alpha 0.05, minimum effect 10% (bench.decision).",
        "",
        "| method | A/A | A/A regressions | A/A exit 0/1/3 | A/A "
        f"{op} head/base | slowed regressions | slowed exit 0/1/3 | slowed {op} head/base |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
    ]
    return holds, "\n".join(lines) + "\n"


def _codes(outcomes: Sequence[Outcome]) -> str:
    counts = Counter(o.exit_code for o in outcomes)
    return " / ".join(str(counts.get(code, 0)) for code in (0, 1, 3))


def _spread(outcomes: Sequence[Outcome], op: str) -> str:
    values = [o.ratios[op] for o in outcomes if op in o.ratios]
    return f"{min(values):.3f}-{max(values):.3f}" if values else "-"


def run_gate_check(
    out: Path,
    *,
    pairs: int,
    slowdown: str,
    methods: tuple[str, ...] = METHODS,
    ab_pairs: int = AB_PAIRS,
) -> int:
    """Measure, judge, write ``out/gate-check.md``; exit 0 when the gate holds, else 1."""
    parse_slowdown(slowdown)
    out.mkdir(parents=True, exist_ok=True)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    results: dict[str, tuple[Sequence[Outcome], Sequence[Outcome]]] = {}
    if "compare" in methods:
        plain, slowed = measure(out / "compare", pairs, slowdown, progress=say)
        results["compare"] = (
            [judge_separate(a, b) for a, b in pairwise(plain)],
            [judge_separate(a, b) for a, b in zip(plain, slowed, strict=False)],
        )
    if "ab" in methods:
        results["ab"] = measure_ab(out / "ab", pairs, slowdown, ab_pairs=ab_pairs, progress=say)
    holds, text = summarize(results, slowdown)
    (out / "gate-check.md").write_text(text)
    print(text)
    return 0 if holds else 1
