"""Load on a cache server over loopback: ``lmckv bench load``.

N clients (threads, one connection each, the reference client) each run up to M round
trips: PUT a value under one of a few keys of their own, then GET it back and compare it
byte for byte. A round trip is two requests. Per server and value size the row records
requests/s, payload bytes/s (both directions), p50/p99 round-trip latency (lmckv's one
quantile definition, ``bench.common.quantiles``), the server's peak RSS (its high-water mark,
``lmckv.base.memory_peaks``) and peak thread count (psutil's, sampled every 20 ms:
:class:`ProcessPeaks`), and how many values were verified. A size stops at M round trips per
client or at the time cap, whichever comes first. Servers are started on a free loopback port
and stopped by PID.

Value sizes are KV_2LTD bfloat16 slices of one layer with 8 KV heads x 128 dims: a 16-token
page (64 KiB) to a 256-token chunk (1 MiB).
"""

from __future__ import annotations

import platform
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from lmckv.base.memory_peaks import memory_peaks

from ..common.quantiles import quantile_or_none

HIDDEN = 8 * 128  # KV heads x head dim
#: name -> tokens: [2, 1, tokens, HIDDEN] bfloat16.
SIZES: dict[str, int] = {"page-16": 16, "chunk-64": 64, "chunk-256": 256}
KEYS_PER_CLIENT = 4
#: The reference server's capacity here: every client's values fit, nothing is evicted.
REFERENCE_CAPACITY = 1 << 30
SERVERS = ("reference-server", "upstream-server")


@dataclass
class LoadPlan:
    clients: int = 8
    ops: int = 200
    time_cap_s: float = 20.0
    sizes: Sequence[str] = tuple(SIZES)


def _value_bytes(size: str) -> int:
    return 2 * SIZES[size] * HIDDEN * 2


class ProcessPeaks(threading.Thread):
    """The largest thread count and number of open file descriptors of process ``pid``
    (psutil's ``num_threads()``, ``num_fds()``), sampled at once, every ``every`` s, and once
    more when stopped; at most ``limit`` s. Sampling ends when the process is gone (a
    zombie too) or unreadable: the peaks seen so far stay. 0: never sampled. (Memory peaks
    are the kernel's high-water marks: ``lmckv.base.memory_peaks``.)"""

    def __init__(self, pid: int | None, limit: float, every: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.pid, self.limit, self.every = pid, limit, every
        self.peak_threads = 0
        self.peak_fds = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        if self.pid is None:
            return
        deadline = time.monotonic() + self.limit
        try:
            process = psutil.Process(self.pid)
            while True:
                self._sample(process)
                if self.stop_event.wait(self.every) or time.monotonic() > deadline:
                    break
            self._sample(process)
        except psutil.Error:  # gone (a zombie too), or AccessDenied
            return

    def _sample(self, process: psutil.Process) -> None:
        with process.oneshot():
            threads, fds = process.num_threads(), process.num_fds()
        self.peak_threads = max(self.peak_threads, threads)
        self.peak_fds = max(self.peak_fds, fds)


def run_size(
    address: tuple[str, int], pid: int | None, size: str, plan: LoadPlan
) -> dict[str, Any]:
    """One load row: ``plan.clients`` clients x ``plan.ops`` round trips of ``size``."""
    import torch

    from ...reference_impl.protocol.client import CacheClient
    from ...reference_impl.protocol.memory_format import MemoryFormat

    n = _value_bytes(size)
    shape = [2, 1, SIZES[size], HIDDEN]
    latencies: list[list[float]] = [[] for _ in range(plan.clients)]
    verified = [0] * plan.clients
    errors: list[str] = []
    deadline = time.monotonic() + plan.time_cap_s

    def client(c: int) -> None:
        rng = random.Random(c)
        values = [rng.randbytes(n) for _ in range(KEYS_PER_CLIENT)]
        keys = [f"lmckv-load@1@{c}@{c * 16 + k:x}@bfloat16" for k in range(KEYS_PER_CLIENT)]
        try:
            with CacheClient(*address, timeout=30) as conn:
                for i in range(plan.ops):
                    if time.monotonic() > deadline:
                        break
                    k = i % KEYS_PER_CLIENT
                    t0 = time.perf_counter()
                    conn.put(keys[k], values[k], MemoryFormat.KV_2LTD, torch.bfloat16, shape)
                    got = conn.get(keys[k])
                    latencies[c].append(time.perf_counter() - t0)
                    if got is None or got.data != values[k]:
                        errors.append(f"client {c} op {i}: value differs")
                        return
                    verified[c] += 1
        except Exception as exc:  # reported in the row
            errors.append(f"client {c}: {exc!r}")

    sampler = ProcessPeaks(pid, plan.time_cap_s + 60)
    sampler.start()
    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(plan.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(plan.time_cap_s + 60)
    wall = time.perf_counter() - t0
    sampler.stop_event.set()
    sampler.join(5)
    lat = [x for per in latencies for x in per]
    trips = len(lat)
    p50, p99 = quantile_or_none(lat, 0.5), quantile_or_none(lat, 0.99)
    peaks = memory_peaks(pid)
    return {
        "kind": "load",
        "size": size,
        "value_bytes": n,
        "clients": plan.clients,
        "round_trips": trips,
        "requests_per_s": 2 * trips / wall if wall > 0 else None,
        "bytes_per_s": 2 * n * trips / wall if wall > 0 else None,
        "p50_ms": None if p50 is None else p50 * 1e3,
        "p99_ms": None if p99 is None else p99 * 1e3,
        "peak_rss_mb": None if peaks is None else peaks.resident / 2**20,
        "peak_threads": sampler.peak_threads or None,
        "verified": sum(verified),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "wall_s": wall,
        "hit_time_cap": time.monotonic() > deadline,
    }


def _server(name: str) -> Any:
    from ...conformance.drivers.server_driver import reference_server
    from ...conformance.runner.impl_specs import load_server

    if name == "reference-server":  # a capacity that holds the whole run: nothing evicted
        return reference_server(capacity_bytes=REFERENCE_CAPACITY, idle_timeout=None)
    return load_server(name)


def run_load(servers: Sequence[str], plan: LoadPlan) -> list[dict[str, Any]]:
    """Every server x size row; each server is started fresh and stopped afterwards."""
    rows = []
    for name in servers:
        driver = _server(name)
        if driver is None:
            raise ValueError(f"unknown server {name!r} (expected one of {', '.join(SERVERS)})")
        try:
            address = driver.address
            for size in plan.sizes:
                row = run_size(address, driver.pid, size, plan)
                rows.append({**row, "impl": name, "impl_version": driver.info.version})
        finally:
            driver.close()
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'server':17} {'size':9} {'value':>8} {'clients':>7} {'trips':>6} {'req/s':>9} "
        f"{'MB/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'RSS MB':>7} {'thr':>4} {'ok':>5} err"
    )
    lines = [head]
    for r in rows:

        def f(v: Any, spec: str) -> str:
            return "-" if v is None else format(v, spec)

        lines.append(
            f"{r['impl']:17} {r['size']:9} {r['value_bytes'] // 1024:>7}K {r['clients']:>7} "
            f"{r['round_trips']:>6} {f(r['requests_per_s'], '9.0f')} "
            f"{f(None if r['bytes_per_s'] is None else r['bytes_per_s'] / 1e6, '8.1f')} "
            f"{f(r['p50_ms'], '8.2f')} {f(r['p99_ms'], '8.2f')} {f(r['peak_rss_mb'], '7.0f')} "
            f"{f(r['peak_threads'], '4d')} {r['verified']:>5} {r['errors']}"
        )
    return "\n".join(lines)


def main_load(servers: Sequence[str], plan: LoadPlan, out: Path | None) -> int:
    """Run, print the table, write a results file when ``out`` is given; exit 1 on any
    error or unverified value."""
    from ..common.env import cpu_count, cpu_model

    started = datetime.now(UTC)
    rows = run_load(servers, plan)
    print(f"machine: {cpu_model()}, {cpu_count()} CPUs ({platform.machine()}), loopback")
    print(format_table(rows))
    if out is not None:
        config = {
            "load": {
                "clients": plan.clients,
                "ops": plan.ops,
                "time_cap_s": plan.time_cap_s,
                "sizes": list(plan.sizes),
                "servers": list(servers),
            }
        }
        print(write_rows(out, config, rows, started))
    return 1 if any(r["errors"] or r["verified"] != r["round_trips"] for r in rows) else 0


def write_rows(
    out: Path, config: dict[str, Any], rows: list[dict[str, Any]], started: datetime
) -> Path:
    """A quick-mode results file in ``out`` holding ``rows`` under a header with this
    machine and ``config``; its path."""
    from ..common.env import collect_env
    from ..common.machine import machine_record
    from ..common.rows import ResultsWriter

    machine = machine_record()
    with ResultsWriter(
        out,
        mode="quick",
        env=collect_env(machine["gpu"]),
        machine=machine,
        started=started,
        extra_header={"config": config},
    ) as writer:
        writer.write_all(rows)
    return writer.path
