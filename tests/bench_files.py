"""Results files and plans the bench tests share: a constructed machine record and
environment, a writer of throughput rows, synthetic runs shaped like the quick plan (the
decision's and gate-check's tests), and the tiny plan real measurements use."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from lmckv.bench.common.rows import ResultsWriter
from lmckv.bench.throughput.measure import Case, ThroughputPlan

MACHINE = {
    "host_id": "0123456789abcdef",
    "cpu_model": "x",
    "cpu_usable": 2,
    "cpu_logical": 2,
    "governor": None,
    "ram_bytes": 2**30,
    "gpu": None,
}
ENV = {
    "cpu_model": "x",
    "cpu_count": 2,
    "python": "3.11",
    "torch": "2",
    "platform": "p",
    "git_commit": None,
    "lmcache": None,
    "gpu": None,
}


def write_results(out: Path, rows: list[dict[str, Any]], machine: dict[str, Any] = MACHINE) -> Path:
    """A results file of ``rows`` (each given a time span) measured on ``machine``."""
    span = {"started_utc": "2026-01-01T00:00:00+00:00", "ended_utc": "2026-01-01T00:00:01+00:00"}
    with ResultsWriter(out, mode="quick", env=ENV, machine=machine) as writer:
        writer.write_all({**r, **span} for r in rows)
    return writer.path


def tiny_plan(processes: int) -> ThroughputPlan:
    """One small CPU case in float16, encode and parse in two scopes (a slowdown injected
    into one operation, the other to compare with), two rounds in each of ``processes``
    processes: what a real run of the gate needs and no more (each process costs seconds)."""
    return ThroughputPlan(
        cpu_cases=(Case("small", layers=1, pages=4),),
        cuda_cases=(),
        dtypes=("float16",),
        scopes=("PER_TENSOR", "PER_LAYER_HEAD"),
        cpu_ops=("encode", "parse"),
        rounds=2,
        warmup=1,
        min_sample_s=0.002,
        devices=("cpu",),
        processes=processes,
    )


#: A synthetic run has the quick plan's CPU rows: 4 operations x 3 cases x 2 dtypes x 4
#: scopes = 96 gated reference rows, each with its limit.
OPS = {"encode": "memcpy", "parse": "crc32", "decode_fp8": "memcpy", "decode_dequant": "memcpy"}
CASES = ("page16", "chunk256-7b", "64MiB")
DTYPES = ("float16", "bfloat16")
SCOPES = ("PER_TENSOR", "PER_LAYER_HEAD", "PER_PAGE_HEAD", "EXTERNAL")


def throughput_row(
    op: str, impl: str, scope: str | None, case: str, dtype: str, samples: Any
) -> dict[str, Any]:
    """A CPU throughput row of ``samples`` (per process, per round) against its
    operation's limit (``OPS``); a limit's own row when ``scope`` is None."""
    flat = sorted(s for p in samples for s in p)
    return {
        "kind": "throughput",
        "op": op,
        "impl": impl,
        "device": "cpu",
        "scope": scope,
        "dtype": dtype,
        "case": case,
        "bytes": 1000,
        "rounds": len(flat),
        "median_s": flat[len(flat) // 2],
        "iqr_s": 0.0,
        "gbps": 1.0,
        "limit": None if scope is None else OPS.get(op),
        "ratio_to_limit": None,
        "ratio_to_upstream": None,
        "samples_by_process": samples,
        "processes": len(samples),
    }


def synthetic_run(
    seed: int,
    *,
    processes: int = 5,
    rounds: int = 2,
    slowdown: dict[str, float] | None = None,
    machine: list[float] | None = None,
    spread: float = 0.05,
    limit_factor: float = 1.0,
) -> list[dict[str, Any]]:
    """One run's throughput rows. ``machine``: each process's speed (default: drawn, up to
    ``spread`` apart); ``limit_factor`` scales the limits alone (the machine changed in a way
    the limits see)."""
    rng = random.Random(seed)
    speed = machine or [rng.uniform(1.0, 1.0 + spread) for _ in range(processes)]
    rows = []
    for case in CASES:
        for dtype in DTYPES:

            def samples(center: float, factor: float = 1.0) -> list[list[float]]:
                out = []
                for level in speed:
                    process_noise = rng.lognormvariate(0.0, 0.05)  # this row in this process
                    out.append(
                        [
                            center * factor * level * process_noise * rng.lognormvariate(0, 0.03)
                            for _ in range(rounds)
                        ]
                    )
                return out

            for limit in sorted(set(OPS.values())):
                op = "crc32" if limit == "crc32" else "copy"
                rows.append(
                    throughput_row(op, limit, None, case, dtype, samples(0.1, limit_factor))
                )
            for op in OPS:
                factor = (slowdown or {}).get(op, 1.0)
                for scope in SCOPES:
                    rows.append(
                        throughput_row(op, "reference", scope, case, dtype, samples(1.0, factor))
                    )
    return rows
