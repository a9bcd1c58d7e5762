"""Hostile load on a cache server over loopback: ``lmckv bench load --hostile``.

For each attack a fresh server is started on a free 127.0.0.1 port; one attacker thread
runs the attack for ``duration_s`` seconds beside a canary client, which every
``CANARY_GAP_S`` seconds opens a connection and does one round trip (PUT a 4 KiB value,
GET it back, compare). A row records the canary's success rate and p99 latency (lmckv's
one quantile definition, ``bench.common.quantiles``), and the server's peak RSS against its
capacity and stated memory bound (PROTO-SRV-MEMORY), its peak threads and open file
descriptors (psutil's, sampled every 50 ms during the attack and once at its end:
``load.ProcessPeaks``). The peak RSS is the kernel's high-water mark (VmHWM,
``lmckv.base.memory_peaks``); it is null when the server died.

Attacks, each bounded in sockets and time (SPEC "Bounds a peer cannot stretch"):

- ``idle-flood``: more silent connections than the server has slots, each one the server
  closes reopened at once and the oldest reopened every second (PROTO-SRV-SLOTS);
- ``slow-headers``: as many connections, each sending a header one byte per 0.2 s
  (PROTO-SRV-DEADLINES);
- ``stalled-payloads``: 16 connections each announcing a value nearly the capacity and
  sending all of it but the last byte (PROTO-SRV-BUDGET);
- ``unread-replies``: 16 connections each asking for a quarter-capacity value 32 times and
  never reading (PROTO-SRV-BUDGET, PROTO-SRV-DEADLINES);
- ``garbage``: 16 connections sending random bytes, reopened when closed
  (PROTO-SRV-BAD-HEADER);
- ``none``: the canary alone, the baseline.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import random
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lmckv.base.memory_peaks import memory_peaks

from ..common.quantiles import quantile_or_none
from .load import ProcessPeaks, write_rows

ATTACKS = ("none", "idle-flood", "slow-headers", "stalled-payloads", "unread-replies", "garbage")
CANARY_GAP_S = 0.05
CANARY_TIMEOUT_S = 2.0
CANARY_VALUE = 4096
HEADER = struct.Struct("<9i150s")  # command, length, fmt, dtype, location, shape x 4, key
PUT, GET = 1, 2
BINARY, UINT8 = 4, 6
#: Extra connections beyond the server's slots in the idle flood and the slow headers.
EXTRA_CONNECTIONS = 16
#: Connections of the other attacks.
ATTACK_CONNECTIONS = 16
START_TIMEOUT_S = 60.0


@dataclass
class HostilePlan:
    """The server's settings and how long each attack runs."""

    capacity_bytes: int = 64 << 20
    max_connections: int = 256
    duration_s: float = 4.0
    attacks: Sequence[str] = ATTACKS
    #: How the server is started (``{port}`` replaced); None: ``lmckv serve`` here.
    command: Sequence[str] | None = None


def _header(command: int, key: str, length: int = 0) -> bytes:
    return HEADER.pack(command, length, BINARY, UINT8, 0, length, 0, 0, 0, key.encode().ljust(150))


#: The chunk-hash prefix (hex) of each party's keys.
_TAGS = {"slow": "a", "big": "b", "canary": "c", "stall": "d"}


def _key(tag: str, i: int) -> str:
    return f"lmckv-hostile@1@0@{_TAGS[tag]}{i:x}@bfloat16"


def _connect(address: tuple[str, int]) -> socket.socket | None:
    try:
        return socket.create_connection(address, timeout=1.0)
    except OSError:
        return None


class _Attack(threading.Thread):
    """One attack until ``deadline``; every socket it opens is closed when it ends."""

    def __init__(self, name: str, address: tuple[str, int], plan: HostilePlan, deadline: float):
        super().__init__(daemon=True)
        self.name, self.address, self.plan, self.deadline = name, address, plan, deadline
        self.opened = 0
        self.socks: collections.deque[socket.socket] = collections.deque()

    def _open(self) -> socket.socket | None:
        sock = _connect(self.address)
        if sock is not None:
            self.opened += 1
            self.socks.append(sock)
        return sock

    def _drop(self, sock: socket.socket) -> None:
        with contextlib.suppress(ValueError):
            self.socks.remove(sock)
        sock.close()

    def run(self) -> None:
        step: dict[str, Callable[[], None]] = {
            "none": lambda: None,
            "idle-flood": self._idle_flood,
            "slow-headers": self._slow_headers,
            "stalled-payloads": self._stalled_payloads,
            "unread-replies": self._unread_replies,
            "garbage": self._garbage,
        }
        try:
            step[self.name]()
        finally:
            while self.socks:
                self.socks.pop().close()

    def _left(self) -> float:
        return self.deadline - time.monotonic()

    def _idle_flood(self) -> None:
        """Hold more silent connections than there are slots: every one the server
        closes is reopened at once, and the oldest is reopened every second."""
        rotate = time.monotonic()
        while self._left() > 0:
            for sock in list(self.socks):
                if _peer_closed(sock):
                    self._drop(sock)
            while len(self.socks) < self.plan.max_connections + EXTRA_CONNECTIONS:
                if self._left() <= 0 or self._open() is None:
                    break
            if time.monotonic() - rotate > 1.0 and self.socks:
                self._drop(self.socks[0])
                rotate = time.monotonic()
            time.sleep(0.01)

    def _slow_headers(self) -> None:
        frame = _header(GET, _key("slow", 0))
        sent: dict[socket.socket, int] = {}
        for _ in range(self.plan.max_connections + EXTRA_CONNECTIONS):
            if self._left() <= 0:
                return
            sock = self._open()
            if sock is not None:
                sent[sock] = 0
        while self._left() > 0:
            for sock in list(sent):
                try:
                    sock.send(frame[sent[sock] : sent[sock] + 1])
                    sent[sock] = (sent[sock] + 1) % (len(frame) - 1)
                except OSError:
                    del sent[sock]
                    self._drop(sock)
                    new = self._open()
                    if new is not None:
                        sent[new] = 0
            time.sleep(0.2)

    def _stalled_payloads(self) -> None:
        length = max(self.plan.capacity_bytes - 1024, 1)
        body = memoryview(bytes(length - 1))
        i = 0
        while self._left() > 0:
            while len(self.socks) < ATTACK_CONNECTIONS and self._left() > 0:
                sock = self._open()
                if sock is None:
                    break
                i += 1
                try:
                    sock.settimeout(max(min(self._left(), 2.0), 0.1))
                    sock.sendall(_header(PUT, _key("stall", i), length))
                    sock.sendall(body)
                except OSError:
                    self._drop(sock)
                    time.sleep(0.05)
            for sock in list(self.socks):
                if _peer_closed(sock):
                    self._drop(sock)
            time.sleep(0.05)

    def _unread_replies(self) -> None:
        size = self.plan.capacity_bytes // 4
        key = _key("big", 0)
        setup = _connect(self.address)
        if setup is None:
            return
        with setup:
            setup.settimeout(10)
            setup.sendall(_header(PUT, key, size) + bytes(size))
        while self._left() > 0:
            while len(self.socks) < ATTACK_CONNECTIONS and self._left() > 0:
                sock = self._open()
                if sock is None:
                    break
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                try:
                    sock.settimeout(0.5)
                    sock.sendall(_header(GET, key) * 32)
                except OSError:
                    pass  # the server stopped reading: it is not draining this one
            for sock in list(self.socks):
                if _peer_closed(sock, drain=False):
                    self._drop(sock)
            time.sleep(0.1)

    def _garbage(self) -> None:
        rng = random.Random(0)
        while self._left() > 0:
            sock = self._open()
            if sock is None:
                time.sleep(0.02)
                continue
            with contextlib.suppress(OSError):  # the server closed it: a bad header
                sock.sendall(rng.randbytes(4096))
            if len(self.socks) >= ATTACK_CONNECTIONS:
                self._drop(self.socks[0])
            time.sleep(0.02)


def _peer_closed(sock: socket.socket, drain: bool = True) -> bool:
    """Whether the server closed ``sock`` (without waiting: a socket with a timeout
    would first wait that long for data, whatever the flags)."""
    timeout = sock.gettimeout()
    sock.settimeout(0.0)
    try:
        return sock.recv(1, 0 if drain else socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(timeout)


class _Canary(threading.Thread):
    """A well-behaved client: one fresh connection and one PUT+GET round trip per turn."""

    def __init__(self, address: tuple[str, int], deadline: float) -> None:
        super().__init__(daemon=True)
        self.address, self.deadline = address, deadline
        self.latencies: list[float] = []
        self.failures: list[str] = []

    def run(self) -> None:
        from ...reference_impl.protocol.client import CacheClient
        from ...reference_impl.protocol.memory_format import MemoryFormat

        rng = random.Random(1)
        i = 0
        while time.monotonic() < self.deadline:
            i += 1
            key, value = _key("canary", i), rng.randbytes(CANARY_VALUE)
            t0 = time.perf_counter()
            try:
                with CacheClient(*self.address, timeout=CANARY_TIMEOUT_S) as conn:
                    conn.put(key, value, MemoryFormat.BINARY, None, (CANARY_VALUE, 0, 0, 0))
                    got = conn.get(key)
                if got is None or got.data != value:
                    raise ValueError("the value came back different or missing")
                self.latencies.append(time.perf_counter() - t0)
            except Exception as exc:  # a failed turn, counted
                self.failures.append(repr(exc))
            time.sleep(CANARY_GAP_S)


class _Server:
    """A server process on a free loopback port, in its own process group."""

    def __init__(self, plan: HostilePlan) -> None:
        from lmckv.base import process_groups

        base = list(plan.command or [sys.executable, "-m", "lmckv", "serve"])
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        argv = [a.replace("{port}", str(port)) for a in base]
        if plan.command is None:
            argv += ["--port", str(port), "--capacity-bytes", str(plan.capacity_bytes)]
            argv += ["--max-connections", str(plan.max_connections)]
        self.address = ("127.0.0.1", port)
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        process_groups.register(self.proc.pid)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            probe_sock = _connect(self.address)
            if probe_sock is not None:
                probe_sock.close()
                return
            time.sleep(0.1)
        self.close()
        raise RuntimeError(f"the server {argv[0]} did not start listening on port {port}")

    def close(self) -> None:
        from lmckv.base import process_groups

        process_groups.release(self.proc.pid)
        self.proc.wait(10)


def memory_bound(plan: HostilePlan) -> int | None:
    """What the reference server states it holds at most (PROTO-SRV-MEMORY); None for
    another server."""
    if plan.command is not None:
        return None
    from ...reference_impl.protocol.server import ServerConfig

    return ServerConfig(
        capacity_bytes=plan.capacity_bytes, max_connections=plan.max_connections
    ).memory_bound


def run_attack(attack: str, plan: HostilePlan, impl: str = "reference-server") -> dict[str, Any]:
    """One row: ``attack`` beside the canary on a fresh server for ``plan.duration_s``."""
    if attack not in ATTACKS:
        raise ValueError(f"unknown attack {attack!r} (expected one of {', '.join(ATTACKS)})")
    from ...reference_impl.protocol import client  # noqa: F401  (imported before the clock runs)

    server = _Server(plan)
    try:
        deadline = time.monotonic() + plan.duration_s
        sampler = ProcessPeaks(server.proc.pid, deadline + 1 - time.monotonic(), every=0.05)
        attacker = _Attack(attack, server.address, plan, deadline)
        sampler.start()
        attacker.start()
        time.sleep(min(0.5, plan.duration_s / 4))  # the attack takes hold first
        canary = _Canary(server.address, deadline)
        canary.start()
        for thread in (canary, attacker):
            thread.join(plan.duration_s + 30)
        sampler.stop_event.set()
        sampler.join(5)
        alive = server.proc.poll() is None
        peaks = memory_peaks(server.proc.pid) if alive else None
        peak_rss = None if peaks is None else peaks.resident
    finally:
        server.close()
    turns = len(canary.latencies) + len(canary.failures)
    p99 = quantile_or_none(canary.latencies, 0.99)
    bound = memory_bound(plan)
    return {
        "kind": "hostile",
        "impl": impl,
        "attack": attack,
        "duration_s": plan.duration_s,
        "max_connections": plan.max_connections,
        "capacity_bytes": plan.capacity_bytes,
        "attacker_connections": attacker.opened,
        "canary_requests": turns,
        "canary_served": len(canary.latencies),
        "canary_success": len(canary.latencies) / turns if turns else None,
        "canary_p99_ms": None if p99 is None else p99 * 1e3,
        "canary_first_failure": canary.failures[0] if canary.failures else None,
        "peak_rss_bytes": peak_rss,
        "memory_bound_bytes": bound,
        "within_bound": None if peak_rss is None or bound is None else peak_rss <= bound,
        "peak_threads": sampler.peak_threads or None,
        "peak_fds": sampler.peak_fds or None,
        "server_alive": alive,
    }


def run_hostile(plan: HostilePlan, impl: str = "reference-server") -> list[dict[str, Any]]:
    return [run_attack(attack, plan, impl) for attack in plan.attacks]


def format_table(rows: list[dict[str, Any]]) -> str:
    def f(v: Any, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    lines = [
        f"{'server':17} {'attack':17} {'canary ok':>10} {'p99 ms':>8} {'RSS MiB':>8} "
        f"{'bound MiB':>9} {'thr':>4} {'fds':>5} {'attacker conns':>14}"
    ]
    for r in rows:
        ok = f"{r['canary_served']}/{r['canary_requests']}"
        rss = None if r["peak_rss_bytes"] is None else r["peak_rss_bytes"] / 2**20
        bound = None if r["memory_bound_bytes"] is None else r["memory_bound_bytes"] / 2**20
        lines.append(
            f"{r['impl']:17} {r['attack']:17} {ok:>10} {f(r['canary_p99_ms'], '8.1f')} "
            f"{f(rss, '8.0f')} {f(bound, '9.0f')} {f(r['peak_threads'], '4d')} "
            f"{f(r['peak_fds'], '5d')} {r['attacker_connections']:>14}"
        )
    return "\n".join(lines)


def _command(name: str) -> list[str] | None:
    """How ``name`` is started: None for the reference (``lmckv serve`` with the plan's
    settings), the driver's command for another server."""
    if name == "reference-server":
        return None
    from ...conformance.drivers.base import DriverError
    from ...conformance.runner.impl_specs import load_server

    try:
        driver = load_server(name)
    except DriverError as exc:
        raise ValueError(f"unknown server {name!r}: {exc}") from exc
    if driver.command is None:
        raise ValueError(f"server {name!r} is not started by this run")
    return list(driver.command)


def main_hostile(servers: Sequence[str], plan: HostilePlan, out: Path | None) -> int:
    """Run every attack on each server, print the table, write the rows (kind "hostile")
    to a results file when ``out`` is given; exit 1 when a reference row breaks a bound."""
    started = datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    for name in servers:
        try:
            server_plan = dataclasses.replace(plan, command=_command(name))
            rows += run_hostile(server_plan, name)
        except (RuntimeError, ValueError) as exc:
            print(f"lmckv bench load --hostile: {name} skipped: {exc}", file=sys.stderr)
    print(format_table(rows))
    if out is not None:
        config = {"hostile": {**dataclasses.asdict(plan), "servers": list(servers)}}
        print(write_rows(out, config, rows, started))
    broken = [r for r in rows if r["within_bound"] is False or not r["server_alive"]]
    return 1 if broken or not rows else 0
