"""``lmckv bench ab BASE HEAD``: base and head measured side by side, judged in pairs.

Two separate runs compared later (``lmckv bench compare``) carry whatever the machine did
between them; on a shared runner that drift is as large as the changes a gate looks for.
The sound comparison measures both in one session, interleaved (asv's ``continuous``,
pyperf's advice): here ``pairs`` pairs of worker processes, one of each side, the order
alternating base-head, head-base (so a trend over the session falls on both sides alike),
both processes of a pair with the same benchmark order and calls per sample. The decision
is ``bench.gate.decision``'s, paired: the Wilcoxon signed-rank test per operation on the pairs'
head/base of the per-process geometric means, Holm across operations.

A side is a Python interpreter that has lmckv installed with this worker protocol
(``python -m lmckv.bench.throughput.workers SPEC OUT``): ``current`` (this one), the path of an
interpreter, or a venv folder (its ``bin/python``). Two checkouts: install each into its
own venv (``python -m venv A && A/bin/pip install -e CHECKOUT_A``). ``--base-env`` /
``--head-env VAR=VALUE`` set variables for one side's processes (``LMCKV_BENCH_SLOWDOWN``
slows one operation: ``bench.common.impls``).

Writes ``OUT/base/bench-*.jsonl`` and ``OUT/head/bench-*.jsonl`` (ordinary results files,
each naming its side in the header's ``config.ab``), ``OUT/ab.md`` and ``OUT/ab.json``.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.env import collect_env
from ..common.machine import machine_record
from ..common.rows import ResultsWriter, load
from ..throughput.measure import ThroughputPlan, calibrated_numbers
from ..throughput.workers import merge, run_worker
from .compare import (
    Change,
    MinEffects,
    compare_rows,
    document,
    render,
)
from .decision import RUN_ALPHA, RunDecision

#: Seconds a side's interpreter may take to say which lmckv it has.
PROBE_TIMEOUT_S = 120


class SideError(ValueError):
    """A side cannot be used: no such interpreter, or it has no lmckv."""


@dataclass(frozen=True)
class Side:
    """One side of the comparison: the interpreter and the variables for its processes."""

    name: str
    spec: str
    python: str
    env: dict[str, str] = field(default_factory=dict)
    version: str = ""


def parse_env(items: Sequence[str]) -> dict[str, str]:
    """``VAR=VALUE`` items as a mapping."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SideError(f"{item!r} is not VAR=VALUE")
        out[name] = value
    return out


def resolve_side(name: str, spec: str, env: dict[str, str]) -> Side:
    """``current``, an interpreter, or a venv folder; checked by asking it for lmckv's
    version (bounded by PROBE_TIMEOUT_S)."""
    if spec == "current":
        python = sys.executable
    else:
        path = Path(spec)
        python = str(path / "bin" / "python") if path.is_dir() else str(path)
        if not Path(python).is_file():
            raise SideError(f"{name} {spec!r}: no Python interpreter at {python}")
    probe = (
        "import importlib.metadata as m, lmckv.bench.throughput.workers; print(m.version('lmckv'))"
    )
    try:
        proc = subprocess.run(
            [python, "-c", probe],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SideError(f"{name} {spec!r}: {python} did not answer: {exc}") from None
    if proc.returncode != 0:
        raise SideError(f"{name} {spec!r}: {python} has no usable lmckv: {proc.stderr[-500:]}")
    return Side(name, spec, python, env, proc.stdout.strip())


@dataclass(frozen=True)
class AbResult:
    """The two results files, the row changes and the decision."""

    base_file: Path
    head_file: Path
    changes: list[Change]
    decision: RunDecision
    report: str


def measure_pairs(
    out: Path,
    base: Side,
    head: Side,
    *,
    plan: ThroughputPlan,
    pairs: int,
    mode: str = "quick",
    impl_names: tuple[str, ...] = ("reference",),
    threads: int = 1,
    seed: int | None = None,
    progress: Callable[[str], object] = lambda line: None,
) -> tuple[Path, Path]:
    """Measure ``pairs`` pairs of processes, alternating the order; the two results files
    (``mode`` names the plan, quick or full, in their headers)."""
    if pairs < 2:
        raise ValueError("ab needs at least 2 pairs")
    seed = random.randrange(2**31) if seed is None else seed
    results: dict[str, list[list[dict[str, Any]]]] = {base.name: [], head.name: []}
    numbers: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="lmckv-ab-") as tmp:
        for pair in range(pairs):
            order = (base, head) if pair % 2 == 0 else (head, base)
            for side in order:
                spec = {
                    "plan": plan.to_json(),
                    "impls": list(impl_names),
                    "process": pair,
                    "seed": seed + pair,
                    "numbers": numbers,
                    "threads": threads,
                    "progress": False,
                }
                got = run_worker(spec, Path(tmp), python=side.python, env=side.env, tag=side.name)
                results[side.name].append(got)
                if not numbers:
                    numbers = calibrated_numbers(got)
            progress(f"pair {pair + 1}/{pairs} ({order[0].name} first)")
    machine = machine_record()
    env = collect_env(machine["gpu"])
    paths = []
    for side in (base, head):
        config = {
            "throughput": plan.describe(),
            "ab": {
                "side": side.name,
                "spec": side.spec,
                "python": side.python,
                "env": side.env,
                "lmckv": side.version,
                "pairs": pairs,
                "order": "base first in even pairs, head first in odd pairs",
            },
            "seed": seed,
        }
        with ResultsWriter(
            out / side.name, mode=mode, env=env, machine=machine, extra_header={"config": config}
        ) as writer:
            writer.write_all(merge(results[side.name]))
        paths.append(writer.path)
    return paths[0], paths[1]


def run_ab(
    out: Path,
    base: Side,
    head: Side,
    *,
    plan: ThroughputPlan,
    pairs: int,
    mode: str = "quick",
    min_effects: MinEffects | None = None,
    alpha: float = RUN_ALPHA,
    progress: Callable[[str], object] = lambda line: None,
) -> AbResult:
    """Measure, judge in pairs, write ``ab.md`` and ``ab.json`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    base_file, head_file = measure_pairs(
        out, base, head, plan=plan, pairs=pairs, mode=mode, progress=progress
    )
    return judge_files(out, base_file, head_file, min_effects=min_effects, alpha=alpha)


def judge_files(
    out: Path,
    base_file: Path,
    head_file: Path,
    *,
    min_effects: MinEffects | None = None,
    alpha: float = RUN_ALPHA,
) -> AbResult:
    """The paired decision on two files that ``measure_pairs`` wrote."""
    min_effects = min_effects or MinEffects()
    (_, base_rows), (_, head_rows) = load(base_file), load(head_file)
    changes, decision = compare_rows(
        base_rows, head_rows, min_effects=min_effects, alpha=alpha, paired=True
    )
    title = (
        f"ab: base {base_file.name} vs head {head_file.name}, measured interleaved in one "
        f"session; minimum effect {min_effects.default:.0%}"
    )
    report = render(changes, decision, title=title)
    (out / "ab.md").write_text("```\n" + report + "\n```\n")
    data = document(changes, decision, base=str(base_file), head=str(head_file))
    (out / "ab.json").write_text(json.dumps(data, indent=1))
    return AbResult(base_file, head_file, changes, decision, report)
