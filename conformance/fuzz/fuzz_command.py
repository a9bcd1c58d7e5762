"""``python -m lmckv.conformance.fuzz --seconds S [--runs N] [--target NAME] ...``

Fuzz every decoder (or the ``--target`` ones). Each reference decoder runs a coverage-guided
atheris campaign and a Hypothesis-driven mutation campaign over the golden vectors, each for
half of ``--seconds`` and at most half of ``--runs`` inputs, in parallel worker processes.
Every input is checked on the reference (documented errors only, no hang, bounded
allocation, round trip) and compared with the C testee (built here with the system cc, under
ASan and UBSan when the compiler supports them). Where clang is installed, ``c.decoders``
also fuzzes the C decoders natively with libFuzzer.

Prints one line per target, ``TARGET: N inputs, F failures``; writes ``summary.json``
(inputs per second, findings), the logs and the failing inputs under ``--out``. Exit status
1 when any target has a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import native
from .findings import dump

ENGINES = ("atheris", "mutate")
DEFAULT_OUT = Path(".lmckv") / "fuzz"


@dataclass(frozen=True)
class Job:
    target: str
    engine: str
    runs: int
    seconds: float
    stats: Path


def _atheris_available() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def _c_binary(no_c: bool) -> tuple[Path | None, bool, str]:
    """The testee to compare with, whether it is sanitized, and a note for the log."""
    if no_c:
        return None, False, "C differential disabled (--no-c)"
    from ..testees.c.build import BuildError, build_testee, sanitizers_available

    reason = sanitizers_available()
    try:
        binary = build_testee(sanitize=reason is None)
    except BuildError as exc:
        raise SystemExit(f"cannot build the C testee: {exc}") from None
    if reason is None:
        return binary, True, "C testee under ASan+UBSan"
    return binary, False, f"C testee without sanitizers: {reason}"


def _worker_command(
    job: Job, args: argparse.Namespace, binary: Path | None, sanitized: bool
) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "lmckv.conformance.fuzz.worker",
        "--target",
        job.target,
        "--engine",
        job.engine,
        "--runs",
        str(job.runs),
        "--seconds",
        str(job.seconds),
        "--stats",
        str(job.stats),
        "--findings",
        str(args.out / "findings"),
        "--alloc-every",
        str(args.alloc_every),
        "--seed",
        str(args.seed),
    ]
    if binary is not None:
        cmd += ["--c-binary", str(binary)] + (["--sanitized"] if sanitized else [])
    if args.keep_corpus and job.engine == "atheris":
        cmd += ["--corpus", str(args.out / "corpus" / job.target)]
    return cmd


def _run_job(job: Job, args: argparse.Namespace, binary: Path | None, sanitized: bool) -> int:
    if job.engine == "libfuzzer":
        dump(job.stats, native.run(job.seconds, job.runs, args.out))
        return 0
    log = args.out / "logs" / f"{job.target}.{job.engine}.log"
    with log.open("wb") as f:
        try:
            return subprocess.run(
                _worker_command(job, args, binary, sanitized),
                stdout=f,
                stderr=subprocess.STDOUT,
                timeout=job.seconds * 1.5 + 300,
            ).returncode
        except subprocess.TimeoutExpired:
            return -9


def _parse(argv: list[str] | None) -> argparse.Namespace:
    from .decoders import TARGETS

    parser = argparse.ArgumentParser(
        prog="lmckv fuzz",
        description="Fuzz every decoder (or the --target ones) of the reference with atheris "
        "and mutation campaigns, comparing with the C testee, and the C decoders with libFuzzer "
        "where clang is installed. Exit status 1 when any target has a failure.",
    )
    parser.add_argument("--seconds", type=float, required=True, help="per target")
    parser.add_argument(
        "--runs", type=int, default=10**12, help="at most this many inputs per target"
    )
    parser.add_argument(
        "--target",
        action="append",
        choices=[*sorted(TARGETS), native.NAME],
        help="fuzz only this target (repeatable)",
    )
    parser.add_argument(
        "--engine",
        action="append",
        choices=ENGINES,
        help="engines of the reference targets (default: both)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--alloc-every",
        type=int,
        default=1,
        help="measure allocations on every n-th input (default: every input)",
    )
    parser.add_argument(
        "--no-c", action="store_true", help="skip the C testee (differential and native)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--keep-corpus", action="store_true", help="keep atheris corpora in OUT/corpus between runs"
    )
    return parser.parse_args(argv)


def _plan(args: argparse.Namespace) -> list[Job]:
    from .decoders import TARGETS

    selected = args.target or [*TARGETS, native.NAME]
    engines = args.engine or list(ENGINES)
    if "atheris" in engines and not _atheris_available():
        print("atheris is not installed: running the mutation engine only", file=sys.stderr)
        engines = [e for e in engines if e != "atheris"] or ["mutate"]
    jobs = []
    for target in selected:
        if target == native.NAME:
            reason = "--no-c" if args.no_c else native.available()
            if reason is not None:
                print(f"{native.NAME}: skipped, {reason}", file=sys.stderr)
                continue
            kinds = ["libfuzzer"]
        else:
            kinds = engines
        for i, engine in enumerate(kinds):
            runs = args.runs // len(kinds) + (i < args.runs % len(kinds))
            stats = args.out / "stats" / f"{target}.{engine}.json"
            stats.unlink(missing_ok=True)
            jobs.append(Job(target, engine, runs, args.seconds / len(kinds), stats))
    return jobs


def _merge(jobs: list[Job], codes: dict[Job, int], args: argparse.Namespace) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "seconds_per_target": args.seconds,
        "runs_per_target": args.runs,
        "alloc_every": args.alloc_every,
        "targets": {},
    }
    for job in jobs:
        entry = summary["targets"].setdefault(
            job.target,
            {
                "inputs": 0,
                "failures": 0,
                "seconds": 0.0,
                "c_compared": 0,
                "engines": {},
                "findings": [],
                "pending": {},
            },
        )
        if job.stats.is_file():
            stats = json.loads(job.stats.read_text(encoding="utf-8"))
        else:
            log = args.out / "logs" / f"{job.target}.{job.engine}.log"
            stats = {
                "inputs": 0,
                "failures": 1,
                "seconds": 0.0,
                "c_compared": 0,
                "findings": [
                    {
                        "kind": "worker",
                        "count": 1,
                        "detail": f"worker exited {codes[job]} without statistics; see {log}",
                    }
                ],
            }
        entry["engines"][job.engine] = {
            k: stats.get(k)
            for k in ("inputs", "failures", "seconds", "c_compared", "accepted", "max_alloc_ratio")
        }
        for key in ("inputs", "failures", "seconds", "c_compared"):
            entry[key] += stats.get(key, 0)
        entry["findings"] += stats.get("findings", [])
        for name, count in stats.get("pending", {}).items():
            entry["pending"][name] = entry["pending"].get(name, 0) + count
    for entry in summary["targets"].values():
        seconds = entry["seconds"]
        entry["inputs_per_second"] = round(entry["inputs"] / seconds, 1) if seconds else None
    return summary


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    (args.out / "logs").mkdir(parents=True, exist_ok=True)
    binary, sanitized, note = _c_binary(args.no_c)
    jobs = _plan(args)
    print(
        f"fuzz: {len(jobs)} campaigns, {args.seconds:g} s and <= {args.runs} inputs per "
        f"target, {args.jobs} jobs; {note}",
        file=sys.stderr,
    )
    started = time.monotonic()
    finished = 0

    def run(job: Job) -> int:
        nonlocal finished
        code = _run_job(job, args, binary, sanitized)
        finished += 1
        print(
            f"  [{finished}/{len(jobs)}] {job.target} {job.engine} finished "
            f"({time.monotonic() - started:.0f} s){'' if code == 0 else f', exit {code}'}",
            file=sys.stderr,
            flush=True,
        )
        return code

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        codes = dict(zip(jobs, pool.map(run, jobs), strict=True))
    summary = _merge(jobs, codes, args)
    summary["wall_seconds"] = round(time.monotonic() - started, 1)
    summary["c_testee"] = {"binary": str(binary) if binary else None, "sanitized": sanitized}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    from .differential import PENDING

    for name, entry in summary["targets"].items():
        print(f"{name}: {entry['inputs']} inputs, {entry['failures']} failures", flush=True)
        for pending, count in entry["pending"].items():
            print(f"  {name} pending x{count}: {pending}: {PENDING[pending][0]}", file=sys.stderr)
        for finding in entry["findings"]:
            first = finding["detail"].splitlines()[0][:200] if finding["detail"] else ""
            print(
                f"  {name} {finding['kind']} x{finding.get('count', 1)}: {first}", file=sys.stderr
            )
    print(
        f"fuzz: {summary['wall_seconds']} s; summary in {args.out / 'summary.json'}",
        file=sys.stderr,
    )
    return 1 if any(e["failures"] for e in summary["targets"].values()) else 0
