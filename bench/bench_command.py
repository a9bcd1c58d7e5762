"""Command line: ``lmckv bench run|compare|targets|gate-check|gpu-check|load``.

- ``run [--quick|--full] --out DIR``: throughput (CPU, and CUDA when present, each in
  several processes) and accuracy (synthetic families and real KV); writes a new
  ``DIR/bench-<stamp>-<commit7>.jsonl``.
- ``compare BASE HEAD [--min-effect [PATTERN=]X] [--alpha A] [--gate IMPL]
  [--cross-machine] [--drift-bound X]``: two separate runs, per-figure changes and one
  decision for the run (``bench.gate.compare``, ``bench.gate.decision``).
- ``ab BASE HEAD --out DIR [--pairs N] [--full] [--base-env VAR=VALUE] [--head-env ...]``:
  two interpreters (``current``, a venv, a python) measured in alternating processes of one
  session and judged in pairs (``bench.gate.ab``): the form that holds on a shared runner.
- ``targets FILE [--strict]``: the reference's performance targets; ``--strict`` exits 1
  when one fails.
- ``gate-check --out DIR [--pairs N] [--slowdown OP:FACTOR] [--only compare|ab] [--load
  spin,copy]``: how often ``compare`` (separate runs) and ``ab`` (interleaved) call identical
  code a regression and catch an injected slowdown on this machine, idle or beside a stated
  load (``bench.gate.gate_check``); ``gate-check --judge DIR...`` judges earlier measurements
  again, together.
- ``gpu-check --out DIR``: the short GPU check (``bench.gpu.check``).
- ``e2e --model PATH [--text FILE] [--context N] [--full] --out DIR``: the end-to-end
  measurement on an operator's own model (``bench.accuracy.e2e_run``); a model it cannot run is one
  line on stderr and exit 2.
- ``load [--impl SERVER]... [--clients N] [--ops M] [--time-cap S] [--out DIR]``: loopback
  load on the reference and upstream cache servers (``bench.server_load.load``); with ``--hostile
  [--attack-seconds S]`` the hostile-load scenario instead (``bench.server_load.hostile``).

Exit codes: 0 success / no regression / gate holds, 1 regression / failed target / failed
check / gate does not hold, 2 bad usage or input (``compare``: also runs from different
machines without ``--cross-machine``), 3 ``compare`` inconclusive / ``gpu-check`` skipped (no CUDA),
4 ``gpu-check`` harness error (the device copy runs below its bandwidth floor).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from lmckv.base.schemas import SchemaError


def _run(args: argparse.Namespace) -> int:
    from .common.rows import load
    from .throughput import measure
    from .throughput.runner import run_benchmarks
    from .throughput.targets import check_targets, format_checks

    mode = "full" if args.full else "quick"
    plan = measure.FULL if args.full else measure.QUICK
    if args.wall_clock:
        plan = replace(plan, cpu_timer="perf_counter")
    path, counts, wall = run_benchmarks(
        args.out,
        mode=mode,
        plan=plan,
        real=not args.no_real,
        with_throughput=not args.no_throughput,
        with_accuracy=not args.no_accuracy,
        with_e2e=not args.no_e2e,
        with_store_path=not args.no_store_path,
        threads=args.threads,
        progress=not args.no_progress,
    )
    _, records = load(path)
    print(format_checks(check_targets(records)))
    tally = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    print(f"{path}  ({mode}, {wall:.0f} s: {tally})")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from .gate.compare import EXIT_USAGE, MachineMismatch, MinEffects, compare_files

    try:
        min_effects = MinEffects.parse(args.min_effect)
        _, decision, report = compare_files(
            args.base,
            args.head,
            min_effects=min_effects,
            alpha=args.alpha,
            gated_impls=tuple(args.gate or ("reference",)),
            relative=not args.absolute,
            cross_machine=args.cross_machine,
            drift_bound=args.drift_bound,
            json_out=args.json,
        )
    except (ValueError, MachineMismatch) as exc:
        if isinstance(exc, SchemaError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(report)
    return decision.exit_code


def _at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum`` (else a usage error, exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def _slowdown(text: str) -> str:
    """An argparse type: an injected slowdown ``OP:FACTOR`` (``bench.common.impls``), kept as
    text."""
    from .common.impls import parse_slowdown

    try:
        parse_slowdown(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _load_kinds(text: str) -> tuple[str, ...]:
    """An argparse type: background load kinds (``bench.gate.background``)."""
    from .gate.background import parse_load

    try:
        return parse_load(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _ab(args: argparse.Namespace) -> int:
    from .gate.ab import SideError, parse_env, resolve_side, run_ab
    from .gate.compare import EXIT_USAGE, MinEffects
    from .throughput import measure

    try:
        min_effects = MinEffects.parse(args.min_effect)
        base = resolve_side("base", args.base, parse_env(args.base_env))
        head = resolve_side("head", args.head, parse_env(args.head_env))
    except (ValueError, SideError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    plan = measure.FULL if args.full else measure.QUICK
    result = run_ab(
        args.out,
        base,
        head,
        plan=plan,
        pairs=args.pairs,
        mode="full" if args.full else "quick",
        min_effects=min_effects,
        alpha=args.alpha,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    print(result.report)
    return result.decision.exit_code


def _targets(args: argparse.Namespace) -> int:
    from .common.rows import load
    from .throughput.targets import check_targets, format_checks

    _, records = load(args.file)
    checks = check_targets(records)
    print(format_checks(checks))
    return 1 if args.strict and any(not c.passed for c in checks) else 0


def _gate_check(args: argparse.Namespace) -> int:
    from .gate.compare import EXIT_USAGE
    from .gate.gate_check import AB_PAIRS, METHODS, rejudge, run_gate_check

    if args.judge:
        # --judge measures nothing: the options that say how to measure are refused, not
        # ignored (they default to None so that a given one shows).
        given = [name for name in ("pairs", "only", "ab_pairs", "load") if getattr(args, name)]
        if given:
            flags = ", ".join("--" + name.replace("_", "-") for name in given)
            print(f"error: --judge measures nothing; {flags} apply to --out only", file=sys.stderr)
            return EXIT_USAGE
        return rejudge(args.judge, args.slowdown)
    return run_gate_check(
        args.out,
        pairs=args.pairs or 20,
        slowdown=args.slowdown,
        methods=tuple(args.only or METHODS),
        ab_pairs=args.ab_pairs or AB_PAIRS,
        load=args.load or (),
    )


def _gpu_check(args: argparse.Namespace) -> int:
    from .gpu.check import run_check

    return run_check(args.out, full=args.full)


def _e2e(args: argparse.Namespace) -> int:
    from ..conformance.store.serde_plugins import PluginError, load_all
    from .accuracy.e2e_run import run_model
    from .accuracy.models import ModelUnusable

    try:
        load_all(args.serde_plugin)
    except PluginError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        path, counts, wall = run_model(
            args.model,
            args.out,
            context=args.context,
            full=args.full,
            text=args.text,
            memory_limit=args.memory_limit,
            progress=not args.no_progress,
        )
    except (ModelUnusable, ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, SchemaError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tally = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    print(f"{path}  ({wall:.0f} s: {tally})")
    return 0


def _load(args: argparse.Namespace) -> int:
    from .server_load.load import SERVERS, LoadPlan, main_load

    if args.hostile:
        from .server_load.hostile import HostilePlan, main_hostile

        return main_hostile(
            args.impl or list(SERVERS), HostilePlan(duration_s=args.attack_seconds), args.out
        )

    plan = LoadPlan(clients=args.clients, ops=args.ops, time_cap_s=args.time_cap)
    return main_load(args.impl or list(SERVERS), plan, args.out)


def _decision_options(parser: argparse.ArgumentParser) -> None:
    """The options of the run-level decision (``bench.gate.decision``)."""
    parser.add_argument(
        "--min-effect",
        action="append",
        default=[],
        metavar="[PATTERN=]X",
        help="smallest slowdown called a regression (default 0.10); PATTERN globs "
        "op/impl/device/scope/dtype/case, e.g. 'encode/*/cpu/*/*/page16=0.3'",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="family-wise error rate of the run's regression verdict, Holm across "
        "operations (default 0.05)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``lmckv bench``."""
    parser = argparse.ArgumentParser(
        prog="lmckv bench",
        description="Run benchmarks, compare two results files, check the reference's targets, "
        "or run the short GPU check. Exit status: 0 success / no regression, 1 regression, "
        "failed target or failed check, 2 bad usage or input, 3 compare inconclusive or "
        "gpu-check skipped, 4 gpu-check harness error.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="measure and write a new results file")
    size = run.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="subset of cases, few rounds (default)")
    size.add_argument("--full", action="store_true", help="every case, more rounds")
    run.add_argument("--out", type=Path, required=True, help="folder for the results file")
    run.add_argument("--no-real", action="store_true", help="skip real-model KV")
    run.add_argument("--no-throughput", action="store_true", help="accuracy only")
    run.add_argument("--no-accuracy", action="store_true", help="throughput only")
    run.add_argument(
        "--no-e2e", action="store_true", help="skip the real model's end-to-end accuracy"
    )
    run.add_argument(
        "--no-store-path",
        action="store_true",
        help="skip store and load through LMCache's storage manager (needs lmcache)",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    run.add_argument(
        "--wall-clock",
        action="store_true",
        help="time CPU benchmarks on the wall clock (default: CPU time of the process)",
    )
    run.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads during the run (default 1, like the limits; 0: torch's)",
    )
    run.set_defaults(func=_run)

    cmp_ = sub.add_parser("compare", help="compare two results files")
    cmp_.add_argument("base", type=Path)
    cmp_.add_argument("head", type=Path)
    _decision_options(cmp_)
    cmp_.add_argument(
        "--drift-bound",
        type=float,
        default=0.10,
        help="a limit that moved more than this between the files makes a regression "
        "inconclusive (default 0.10)",
    )
    cmp_.add_argument(
        "--cross-machine",
        action="store_true",
        help="compare runs from different machines (refused otherwise; every row is marked)",
    )
    cmp_.add_argument(
        "--gate", action="append", metavar="IMPL", help="implementations whose regressions fail"
    )
    cmp_.add_argument(
        "--absolute",
        action="store_true",
        help="judge absolute per-round times, not times relative to the limit",
    )
    cmp_.add_argument("--json", type=Path, help="also write the comparison as JSON")
    cmp_.set_defaults(func=_compare)

    ab = sub.add_parser(
        "ab", help="measure two interpreters interleaved in one session and judge in pairs"
    )
    ab.add_argument("base", help="current, a venv folder or a python executable")
    ab.add_argument("head", help="current, a venv folder or a python executable")
    ab.add_argument("--out", type=Path, required=True, help="folder for the files")
    ab.add_argument(
        "--pairs", type=_at_least(2), default=8, help="process pairs, at least 2 (default 8)"
    )
    ab.add_argument("--full", action="store_true", help="the full plan (default: quick)")
    ab.add_argument("--base-env", action="append", default=[], metavar="VAR=VALUE")
    ab.add_argument("--head-env", action="append", default=[], metavar="VAR=VALUE")
    _decision_options(ab)
    ab.set_defaults(func=_ab)

    tgt = sub.add_parser("targets", help="check the reference's targets in a results file")
    tgt.add_argument("file", type=Path)
    tgt.add_argument("--strict", action="store_true", help="exit 1 when a target fails")
    tgt.set_defaults(func=_targets)

    gate = sub.add_parser(
        "gate-check", help="A/A and injected-slowdown comparisons: does compare gate here?"
    )
    source = gate.add_mutually_exclusive_group(required=True)
    source.add_argument("--out", type=Path, help="folder for the runs and summary")
    source.add_argument(
        "--judge",
        type=Path,
        action="append",
        metavar="DIR",
        help="judge the runs of earlier --out folders again, together (measures nothing)",
    )
    gate.add_argument("--pairs", type=_at_least(1), help="comparisons of each kind (20)")
    gate.add_argument(
        "--slowdown",
        type=_slowdown,
        default="encode:1.2",
        help="injected slowdown, OP:FACTOR (encode:1.2)",
    )
    gate.add_argument(
        "--only", action="append", choices=("compare", "ab"), help="measure one method only"
    )
    gate.add_argument("--ab-pairs", type=_at_least(2), help="process pairs of each ab session (8)")
    gate.add_argument(
        "--load",
        type=_load_kinds,
        help="a stated background load while measuring: spin, copy or spin,copy",
    )
    gate.set_defaults(func=_gate_check)

    gpu = sub.add_parser(
        "gpu-check", help="short GPU check: byte identity, limits, accuracy on the device"
    )
    gpu.add_argument("--out", type=Path, required=True, help="folder for the check's files")
    gpu.add_argument("--full", action="store_true", help="more cases and rounds")
    gpu.set_defaults(func=_gpu_check)

    e2e = sub.add_parser(
        "e2e", help="end-to-end accuracy of every serde and scope on your own model"
    )
    e2e.add_argument(
        "--model", type=Path, required=True, help="a Hugging Face model folder or a .gguf file"
    )
    e2e.add_argument(
        "--text", type=Path, help="UTF-8 text to score (default: bench/accuracy/corpus.py)"
    )
    e2e.add_argument(
        "--context", type=int, default=256, help="prefix tokens, a multiple of 16 (default 256)"
    )
    e2e.add_argument(
        "--full", action="store_true", help="also the serdes at 256, 1024 and 2048 tokens"
    )
    e2e.add_argument("--out", type=Path, required=True, help="folder for the results file")
    e2e.add_argument(
        "--memory-limit",
        type=int,
        help="bytes the model may use (default: the memory available now)",
    )
    e2e.add_argument("--no-progress", action="store_true", help="no progress bars")
    e2e.add_argument(
        "--serde-plugin", action="append", default=[], metavar="MODULE[:FUNCTION]",
        help="import MODULE (and call FUNCTION) first: a package that registers serdes with "
        "LMCache's factory; its serdes get rows (may repeat)",
    )  # fmt: skip
    e2e.set_defaults(func=_e2e)

    load = sub.add_parser("load", help="loopback load on cache servers (bench/server_load/load.py)")
    load.add_argument("--impl", action="append", help="reference-server, upstream-server")
    load.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    load.add_argument("--ops", type=int, default=200, help="round trips per client and size")
    load.add_argument("--time-cap", type=float, default=20.0, help="seconds per size at most")
    load.add_argument("--out", type=Path, help="folder for a results file with the load rows")
    load.add_argument(
        "--hostile",
        action="store_true",
        help="the hostile-load scenario instead: each attack (idle flood, slow headers, stalled "
        "payloads, unread replies, garbage) beside a canary client (bench/server_load/hostile.py)",
    )
    load.add_argument(
        "--attack-seconds", type=float, default=20.0, help="seconds per attack (--hostile)"
    )
    load.set_defaults(func=_load)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (OSError, SchemaError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
