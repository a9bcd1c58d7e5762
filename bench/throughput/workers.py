"""Throughput measured in several separate processes, one after another.

Timings of one process share its memory layout, allocator state, huge pages and CPU
placement; on the shared machine here identical code measured 12-16% apart between
processes while each process's own rounds agreed far better. A run therefore measures every
benchmark in ``plan.processes`` (>= 3) fresh interpreters, each with its own shuffle of the
group and benchmark order (seed = run seed + process index), and keeps the samples per
process. The first process calibrates the calls per sample; the others reuse its numbers so
that they spend their time on rounds, not on calibration.

Each worker is ``python -m lmckv.bench.throughput.workers SPEC OUT``: SPEC is a JSON file (plan,
impl names,
seed, process index, numbers, torch threads, progress), OUT the JSON Lines file of its group
results (``bench.throughput.measure.measure``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .measure import ThroughputPlan, calibrated_numbers, rows


class WorkerError(RuntimeError):
    """A worker process failed (its exit status and the end of its stderr)."""


def run_worker(
    spec: dict[str, Any],
    workdir: Path,
    *,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
    tag: str = "",
) -> list[dict[str, Any]]:
    """One worker process of ``python`` (default: this interpreter, which has lmckv
    installed) with ``env`` added to this environment; its group results."""
    index = spec["process"]
    spec_path = workdir / f"spec-{tag}{index}.json"
    out_path = workdir / f"out-{tag}{index}.jsonl"
    spec_path.write_text(json.dumps(spec))
    proc = subprocess.run(
        [python, "-m", "lmckv.bench.throughput.workers", str(spec_path), str(out_path)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=None if spec["progress"] else subprocess.PIPE,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        tail = (proc.stderr or "")[-2000:]
        raise WorkerError(f"benchmark process {index} exited {proc.returncode}: {tail}")
    with open(out_path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def run_processes(
    plan: ThroughputPlan,
    impl_names: tuple[str, ...],
    *,
    seed: int,
    threads: int,
    progress: bool,
) -> Iterator[dict[str, Any]]:
    """Measure ``plan`` in ``plan.processes`` worker processes; yields rows and skips."""
    if plan.processes < 1:
        raise ValueError("processes must be >= 1")
    results: list[list[dict[str, Any]]] = []
    numbers: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="lmckv-bench-") as tmp:
        for index in range(plan.processes):
            spec = {
                "plan": plan.to_json(),
                "impls": list(impl_names),
                "process": index,
                "seed": seed + index,
                "numbers": numbers,
                "threads": threads,
                "progress": progress,
            }
            results.append(run_worker(spec, Path(tmp)))
            if index == 0:
                numbers = calibrated_numbers(results[0])
    yield from merge(results)


def merge(results: list[list[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Rows, skips and telemetry from the group results of each process, in process order."""
    yield from (r for r in results[0] if "group" not in r)  # skips: the same in every process
    groups: dict[str, list[dict[str, Any]]] = {}
    for process_results in results:
        for r in process_results:
            if "group" in r:
                groups.setdefault(r["group"], []).append(r)
    for group_results in groups.values():
        yield from rows(group_results)
        for r in group_results:
            yield from r["telemetry_records"]


def worker_main(spec_path: Path, out_path: Path) -> int:
    """One worker: measure the spec's plan, write its group results as JSON Lines."""
    import torch

    from ...reference_impl.kv_codec.quant_numba import set_threads
    from ..common.impls import load_impls
    from .measure import measure

    spec = json.loads(spec_path.read_text())
    if spec["threads"] > 0:
        torch.set_num_threads(spec["threads"])
        set_threads(spec["threads"])  # the codec's numba kernels: the same thread count
    impls, _ = load_impls(tuple(spec["impls"]))
    plan = ThroughputPlan.from_json(spec["plan"])
    with open(out_path, "w", encoding="utf-8") as out:
        for result in measure(
            plan,
            impls,
            process=spec["process"],
            seed=spec["seed"],
            numbers=spec["numbers"],
            progress=spec["progress"],
        ):
            out.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(Path(sys.argv[1]), Path(sys.argv[2])))
