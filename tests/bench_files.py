"""Results files and plans the bench tests share: a constructed machine record and
environment, a writer of throughput rows, and the tiny plan real measurements use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lmckv.bench.results import ResultsWriter
from lmckv.bench.throughput import Case, ThroughputPlan

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
