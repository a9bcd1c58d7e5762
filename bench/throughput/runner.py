"""One benchmark run: throughput, then accuracy, into a new results file.

``run_benchmarks`` is what ``lmckv bench run`` calls; tests call it with a tiny plan (a
deliberately slowed implementation comes through ``LMCKV_BENCH_SLOWDOWN``, ``bench.common.impls``).
Throughput is measured in ``plan.processes`` separate processes (``bench.throughput.workers``),
then, with ``with_store_path`` (``lmckv bench run`` unless ``--no-store-path``), store and load
through LMCache's storage manager in one more (``bench.throughput.store_path``); accuracy in
this one.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ..accuracy import data, e2e, realkv, reconstruction
from ..common.env import collect_env
from ..common.impls import IMPL_MODULES, load_impls
from ..common.machine import machine_record
from ..common.rows import ResultsWriter
from . import store_path
from .measure import ThroughputPlan
from .workers import run_processes


def run_benchmarks(
    out_dir: Path,
    *,
    mode: str,
    plan: ThroughputPlan,
    families: Sequence[str] = tuple(data.FAMILIES),
    real: bool = True,
    with_throughput: bool = True,
    with_accuracy: bool = True,
    with_e2e: bool = True,
    with_store_path: bool = False,
    progress: bool = True,
    impl_names: tuple[str, ...] = tuple(IMPL_MODULES),
    threads: int = 1,
    seed: int | None = None,
) -> tuple[Path, dict[str, int], float]:
    """Measure and write one results file; returns (path, record counts, wall seconds).

    An implementation of ``impl_names`` that cannot be imported becomes a skip row, as do
    real-model data that cannot be loaded and CUDA without a device. ``seed`` shuffles the
    processes' benchmark order (default: drawn at random, recorded in the header).
    ``threads`` sets torch's intra-op threads for the run (0 keeps torch's default). One
    thread is the default: the limits (memcpy, crc32) use one core, and on a shared machine
    OpenMP barriers of several threads stall whenever another process takes a core, which
    made identical runs differ by 10x here.
    """
    previous_threads = torch.get_num_threads()
    if threads > 0:
        torch.set_num_threads(threads)
    try:
        return _run(
            out_dir,
            mode=mode,
            plan=plan,
            families=families,
            real=real,
            with_throughput=with_throughput,
            with_accuracy=with_accuracy,
            with_e2e=with_e2e,
            with_store_path=with_store_path,
            progress=progress,
            impl_names=impl_names,
            threads=threads,
            seed=random.randrange(2**31) if seed is None else seed,
        )
    finally:
        torch.set_num_threads(previous_threads)


def _run(
    out_dir: Path,
    *,
    mode: str,
    plan: ThroughputPlan,
    families: Sequence[str],
    real: bool,
    with_throughput: bool,
    with_accuracy: bool,
    with_e2e: bool,
    with_store_path: bool,
    progress: bool,
    impl_names: tuple[str, ...],
    threads: int,
    seed: int,
) -> tuple[Path, dict[str, int], float]:
    t0 = time.monotonic()
    impls, missing = load_impls(impl_names)
    e2e_plan = e2e.FULL if mode == "full" else e2e.QUICK
    store_batches = store_path.FULL_BATCHES if mode == "full" else store_path.DEFAULT_BATCHES
    config: dict[str, Any] = {
        "throughput": plan.describe() if with_throughput else None,
        "accuracy": {
            "families": list(families),
            "scopes": list(reconstruction.ACCURACY_SCOPES),
            "real": real,
        }
        if with_accuracy
        else None,
        "e2e": e2e.describe(e2e_plan) if with_e2e and real else None,
        "store_path": store_path.describe(store_batches)
        if with_throughput and with_store_path
        else None,
        "impls": {name: impl.version for name, impl in impls.items()},
        "seed": seed,
    }
    machine = machine_record()
    env = collect_env(machine["gpu"])
    with ResultsWriter(
        out_dir, mode=mode, env=env, machine=machine, extra_header={"config": config}
    ) as out:
        if progress:
            print(f"writing {out.path}", file=sys.stderr)
        for name, reason in missing.items():
            out.write({"kind": "skip", "what": f"implementation {name}", "reason": reason})
        if with_throughput:
            out.write_all(
                run_processes(plan, tuple(impls), seed=seed, threads=threads, progress=progress)
            )
            if with_store_path:
                options = ("--batches", str(store_batches))
                out.write_all(store_path.phase(progress=progress, options=options))
        else:
            out.write({"kind": "skip", "what": "throughput (all)", "reason": "--no-throughput"})
        if not with_accuracy:
            out.write({"kind": "skip", "what": "accuracy (all data)", "reason": "--no-accuracy"})
        elif "reference" not in impls:
            reason = missing.get("reference", "reference implementation not loaded")
            out.write({"kind": "skip", "what": "accuracy (all data)", "reason": reason})
        else:
            ref = impls["reference"]
            for family in families:
                out.write_all(
                    reconstruction.evaluate(data.synthetic(family), ref, progress=progress)
                )
            if not real:
                out.write({"kind": "skip", "what": "accuracy real:*", "reason": "--no-real given"})
            else:
                try:
                    dataset, origin = realkv.load_or_capture(progress=progress)
                except realkv.RealKVUnavailable as exc:
                    out.write({"kind": "skip", "what": "accuracy real:*", "reason": str(exc)})
                else:
                    if progress:
                        print(f"real KV: {origin}", file=sys.stderr)
                    out.write_all(reconstruction.evaluate(dataset, ref, progress=progress))
        off = None if with_e2e and real else f"--no-{'e2e' if not with_e2e else 'real'} given"
        out.write_all(e2e.phase(impls.get("reference"), skip=off, progress=progress, plan=e2e_plan))
        return out.path, dict(out.counts), time.monotonic() - t0
