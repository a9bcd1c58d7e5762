"""How well the gate holds on this machine: A/A pairs and injected slowdowns, both methods.

    lmckv bench gate-check --out DIR [--pairs 20] [--slowdown encode:1.2] [--ab-pairs 8]
                           [--only compare|ab] [--load spin,copy]
    lmckv bench gate-check --judge DIR [--judge DIR ...] [--slowdown encode:1.2]

Measures the full quick plan (every case, dtype and implementation it has), with the
reference slowed through ``LMCKV_BENCH_SLOWDOWN`` (``bench.common.impls``) where a comparison needs
a real change, and judges every comparison exactly as the commands do (``bench.gate.decision``,
default alpha and minimum effect):

- **compare** (two separate runs): ``2 * pairs + 1`` runs alternating plain and slowed, so
  that drift of the machine spreads over both kinds; A/A = each plain run against the next,
  slowdown = each plain run against the slowed run after it.
- **ab** (one interleaved session per comparison, ``bench.gate.ab``): ``pairs`` A/A sessions
  (this interpreter against itself) and ``pairs`` sessions against a slowed head,
  alternating, each of ``ab_pairs`` process pairs.

The gate holds when, for each method measured, at most ``pairs / 20`` A/A comparisons end in
a regression verdict (exit 1), and, for ``ab`` (the form the README's CI snippet uses), at
least ``19 * pairs / 20`` slowed ones do; compare's detection rate is reported, not
required (separate runs cannot promise it under drift). Writes the results files under
``DIR/compare`` and ``DIR/ab`` and a Markdown summary ``DIR/gate-check.md``; exit 0 when it
holds, 1 when not. A full measurement is long (on 2 cores: a quick-plan run takes about 3
minutes, an ab session of 8 process pairs about 4, times 41 runs and ``2 * pairs``
sessions): run it on the runner you gate on, with its usual load, or with a stated one
(``--load spin,copy``: ``bench.gate.background``, started before the first run and stopped after
the last). ``--judge DIR...`` judges the files of earlier measurements again, together, and
measures nothing: a long measurement split over several jobs is summarized as one.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from pathlib import Path
from typing import Any

from ..common.impls import SLOWDOWN_ENV, parse_slowdown
from ..common.rows import load, results_order
from ..throughput.measure import QUICK, ThroughputPlan
from ..throughput.runner import run_benchmarks
from .ab import Side, measure_pairs
from .background import background_load
from .compare import EXIT_USAGE, compare_rows
from .decision import EXIT_REGRESSION, RunDecision

PLAN = QUICK
METHODS = ("compare", "ab")
#: Process pairs of each ab session: the signed-rank test reaches Holm's first threshold
#: over the quick plan's eight CPU operations (four of the codec, four of the serde:
#: 0.05 / 8) from 8 pairs on (``decision.processes_needed``).
AB_PAIRS = 8
#: Largest share of A/A comparisons that may call a regression, and smallest share of
#: slowed ones that must (1 and 19 of 20).
MAX_FALSE_ALARMS = Fraction(1, 20)
MIN_DETECTED = Fraction(19, 20)
#: The folders of one measurement: compare's runs by kind, ab's sessions by kind (a
#: session folder is ``NN-aa`` or ``NN-slowed``, NN its place in the series).
PLAIN, SLOWED, AA = "plain", "slowed", "aa"
#: Longest a background load may run (it is stopped when the measurement ends).
LOAD_MAX_S = 12 * 3600


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


Records = Mapping[Path, list[dict[str, Any]]]


def judge_separate(base: Path, head: Path) -> Outcome:
    """What ``lmckv bench compare base head`` decides."""
    return _decide(base, head, {path: _measured(path) for path in (base, head)})


def judge_paired(base: Path, head: Path) -> Outcome:
    """What ``lmckv bench ab`` decides on the two files of one session."""
    return _decide(base, head, {path: _measured(path) for path in (base, head)}, paired=True)


def _decide(base: Path, head: Path, records: Records, *, paired: bool = False) -> Outcome:
    """The decision on two files whose records are already read (``records`` by path)."""
    _, decision = compare_rows(records[base], records[head], paired=paired)
    return outcome(base, head, decision)


class FolderError(ValueError):
    """A measurement that cannot be judged: a session or a run left unfinished."""


def _measured(path: Path) -> list[dict[str, Any]]:
    """The records of a results file that has its throughput rows (a run writes them all
    once its last process is done: a file without them is a run still going or cut off)."""
    records = load(path)[1]
    if not any(r.get("kind") == "throughput" for r in records):
        raise FolderError(f"{path}: no throughput rows (a run left unfinished)")
    return records


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
                out / (SLOWED if slow else PLAIN),
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
) -> None:
    """Interleaved sessions: ``pairs`` A/A and ``pairs`` slowed, alternating, each in its
    own folder (``NN-aa``, ``NN-slowed``)."""
    parse_slowdown(slowdown)
    plain = Side("base", "current", sys.executable, {SLOWDOWN_ENV: ""})
    same = Side("head", "current", sys.executable, {SLOWDOWN_ENV: ""})
    slowed = Side("head", "current", sys.executable, {SLOWDOWN_ENV: slowdown})
    for index in range(2 * pairs):
        session = session_folder(out, index)
        measure_pairs(session, plain, slowed if index % 2 else same, plan=plan, pairs=ab_pairs)
        result = judge_session(session)
        progress(f"ab session {index + 1}/{2 * pairs} ({session.name}): exit {result.exit_code}")


def session_folder(out: Path, index: int) -> Path:
    """The folder of ab session ``index`` (0-based): A/A sessions even, slowed ones odd."""
    return out / f"{index:02d}-{SLOWED if index % 2 else AA}"


def judge_session(session: Path) -> Outcome:
    """One ab session folder (``base/`` and ``head/`` results files) judged."""
    base, head = (_one_file(session / side) for side in ("base", "head"))
    return judge_paired(base, head)


def _one_file(folder: Path) -> Path:
    files = sorted(folder.glob("bench-*.jsonl"))
    if len(files) != 1:
        raise FolderError(f"{folder}: expected one results file, found {len(files)}")
    return files[0]


Results = dict[str, tuple[list[Outcome], list[Outcome]]]


def judge_folders(folders: Sequence[Path]) -> Results:
    """Each method's A/A and slowed outcomes from measurement folders, together.

    compare: in each folder, its plain runs in the order they were made
    (``results.results_order``), each against the next (A/A) and each against the slowed
    run made after it; pairs never span two folders. ab: every session folder, judged on
    its own. A method with nothing in any folder is left out."""
    results: Results = {}
    for folder in folders:
        plain, slowed = (
            sorted((folder / "compare" / kind).glob("bench-*.jsonl"), key=results_order)
            for kind in (PLAIN, SLOWED)
        )
        if plain:
            records = {path: _measured(path) for path in (*plain, *slowed)}  # each read once
            aa, slow = results.setdefault("compare", ([], []))
            aa.extend(_decide(a, b, records) for a, b in pairwise(plain))
            slow.extend(_decide(a, b, records) for a, b in zip(plain, slowed, strict=False))
        for session in sorted((folder / "ab").glob("[0-9][0-9]-*")):
            aa, slow = results.setdefault("ab", ([], []))
            (slow if session.name.endswith(f"-{SLOWED}") else aa).append(judge_session(session))
    return results


def summarize(
    results: Mapping[str, tuple[Sequence[Outcome], Sequence[Outcome]]],
    slowdown: str,
    notes: Sequence[str] = (),
) -> tuple[bool, str]:
    """(the gate holds, the Markdown summary) from each method's A/A and slowed outcomes;
    ``notes``: lines on how they were measured (the load, the folders)."""
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
        "family-wise alpha 0.05, minimum effect 10% (bench.gate.decision).",
        "",
        *(f"{note}\n" for note in notes),
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
    load: tuple[str, ...] = (),
) -> int:
    """Measure (beside the background ``load``, if any), judge, write ``out/gate-check.md``;
    exit 0 when the gate holds, 1 when not, 2 (measuring nothing) when ``out`` holds a
    measurement already: its runs would be judged with the new ones."""
    parse_slowdown(slowdown)
    if any((out / method).exists() for method in METHODS):
        print(
            f"error: {out} holds a measurement already; measure into a new folder and "
            "combine them with --judge",
            file=sys.stderr,
        )
        return EXIT_USAGE
    out.mkdir(parents=True, exist_ok=True)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with background_load(load, max_seconds=LOAD_MAX_S):
        if "compare" in methods:
            measure(out / "compare", pairs, slowdown, progress=say)
        if "ab" in methods:
            measure_ab(out / "ab", pairs, slowdown, ab_pairs=ab_pairs, progress=say)
    described = (
        f"Background load throughout: {', '.join(load)} (bench.gate.background)."
        if load
        else "Background load: none started (the machine as it was)."
    )
    return _report(judge_folders([out]), slowdown, [described], out / "gate-check.md")


def rejudge(folders: Sequence[Path], slowdown: str) -> int:
    """``--judge``: the files of earlier measurements judged again, together; nothing is
    measured or written. Exit 0 when the gate holds, 1 when not, 2 when there is nothing
    to judge or a folder cannot be judged."""
    parse_slowdown(slowdown)
    named = ", ".join(map(str, folders))
    try:
        results = judge_folders(folders)
    except ValueError as error:  # a FolderError, a file that is not a results file
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if not results:
        print(f"error: no compare runs or ab sessions in {named}", file=sys.stderr)
        return EXIT_USAGE
    return _report(results, slowdown, [f"Judged again from: {named}."])


def _report(results: Results, slowdown: str, notes: list[str], path: Path | None = None) -> int:
    holds, text = summarize(results, slowdown, notes)
    if path is not None:
        path.write_text(text)
    print(text)
    return 0 if holds else 1
