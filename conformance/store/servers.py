"""Real loopback servers that LMCache's network L2 adapters write to in lmckv's tests: Debian's
``redis-server`` (the ``resp`` adapter) and moto's S3 server (the ``s3`` adapter). Standard
library only, so that any interpreter can import it.

Each server runs on 127.0.0.1 on a free port, leads its own process group, and is registered
with :mod:`lmckv.base.process_groups` while it runs, so it dies with the harness however the
harness ends. Leaving its ``with`` block, or :meth:`stop`, sends the group SIGTERM, waits a
bounded grace period, then SIGKILLs whatever is left. Every readiness loop is bounded in tries
and time. A start that loses a race for its port is retried a bounded number of times.

The S3 bucket host. LMCache's s3 adapter (awscrt) always addresses a bucket virtual-host style:
it connects to the ``s3_endpoint`` host name verbatim, which must therefore name both the bucket
and a host that resolves to loopback. A name like ``BUCKET.localhost`` does not resolve on a
machine with only ``/etc/hosts`` and DNS, and lmckv must not edit the machine's ``/etc/hosts``.
Two ways were measured to work with lmcache 0.5.6 and 0.5.7rc2:

- the endpoint ``127.1:PORT`` (:func:`loopback_s3_endpoint`): that is bucket ``127`` at host
  ``1``. glibc's getaddrinfo (inet_aton rules) resolves ``127.1`` to 127.0.0.1, and moto, which
  treats only a full dotted quad as path-style, reads the bucket ``127`` from the Host header;
- a private mount namespace: ``unshare --mount`` with a private hosts file bind-mounted over
  ``/etc/hosts`` for the writer process only.

This module uses the first. It needs no privilege. The namespace needs CAP_SYS_ADMIN, which
an unprivileged container drops even for root. The cost is that the bucket must be named
``127``.
"""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

from lmckv.base import process_groups

HOST = "127.0.0.1"
#: The bucket that the endpoint of :func:`loopback_s3_endpoint` names.
LOOPBACK_BUCKET = "127"
#: Starts that may lose the race for a free port before a server gives up.
START_ATTEMPTS = 3
#: Seconds a server gets to exit on SIGTERM before its group is SIGKILLed.
STOP_GRACE_S = 5.0
#: Readiness: at most this many probes, this far apart, within this many seconds.
READY_TRIES = 300
READY_INTERVAL_S = 0.05
READY_DEADLINE_S = 30.0
#: Longest RESP reply line :func:`resp_line` reads.
MAX_REPLY_BYTES = 4096


class ServerError(RuntimeError):
    """A server that would not start; the message names its log."""


class StoreUnavailable(RuntimeError):
    """A store that cannot be opened on this machine; the message says what is missing."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def loopback_s3_endpoint(port: int) -> tuple[str, str]:
    """``(bucket, s3_endpoint)``: bucket ``127`` at ``127.1:PORT``, which resolves to loopback
    without a hosts entry (the module docstring says why)."""
    return LOOPBACK_BUCKET, f"127.1:{port}"


def missing_redis_server(binary: str = "redis-server") -> str | None:
    """Why a :class:`RedisServer` cannot start here, or None when it can."""
    if shutil.which(binary) is None:
        return f"{binary} is not installed (Debian package redis-server)"
    return None


def missing_moto(python: str = sys.executable, timeout: float = 60.0) -> str | None:
    """Why a :class:`MotoS3Server` cannot start under ``python``, or None when it can."""
    probe = "import moto.server, flask, werkzeug"
    try:
        done = subprocess.run(
            [python, "-c", probe], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python} cannot probe for moto: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"moto[server] is not importable by {python}: {last}"
    return None


def resp_line(host: str, port: int, *args: str | bytes, timeout: float = 5.0) -> bytes:
    """Send one RESP command to ``host``:``port``; its one-line reply (``+OK``, ``:1``,
    ``-ERR ...``) without the CRLF. Bulk replies are not read past their first line."""
    request = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode() if isinstance(arg, str) else arg
        request.append(b"$%d\r\n%s\r\n" % (len(data), data))
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(b"".join(request))
        reply = b""
        while b"\r\n" not in reply and len(reply) < MAX_REPLY_BYTES:
            chunk = sock.recv(MAX_REPLY_BYTES)
            if not chunk:
                break
            reply += chunk
    if b"\r\n" not in reply:
        raise ConnectionError(f"no complete RESP reply from {host}:{port}: {reply[:80]!r}")
    return reply.split(b"\r\n", 1)[0]


def _wait_ready(proc: subprocess.Popen[bytes], ready: Callable[[], bool], what: str) -> None:
    """Probe ``ready`` until it says yes; bounded by READY_TRIES and READY_DEADLINE_S."""
    deadline = time.monotonic() + READY_DEADLINE_S
    last: Exception | None = None
    for _ in range(READY_TRIES):
        if proc.poll() is not None:
            raise ServerError(f"{what} exited with code {proc.returncode} while starting")
        try:
            if ready():
                return
        except OSError as exc:
            last = exc
        if time.monotonic() > deadline:
            break
        time.sleep(READY_INTERVAL_S)
    raise ServerError(f"{what} was not ready after {READY_DEADLINE_S:.0f} s (last: {last})")


class _ServerProcess:
    """One server process in its own group, registered with process_groups while it runs."""

    what = "server"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.log_path = workdir / f"{self.what}.log"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    def _argv(self) -> list[str]:
        raise NotImplementedError

    def _ready(self) -> bool:
        raise NotImplementedError

    def start(self) -> Self:
        """Start on a free port and wait until it answers; a :class:`ServerError` if it
        never does (after START_ATTEMPTS ports)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        for _ in range(START_ATTEMPTS):
            self.port = free_port()
            with self.log_path.open("ab") as log:
                self._proc = subprocess.Popen(
                    self._argv(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            process_groups.register(self._proc.pid)
            try:
                _wait_ready(self._proc, self._ready, self.what)
                return self
            except ServerError:
                self.stop()
        raise ServerError(f"{self.what} did not start; see {self.log_path}")

    def stop(self) -> None:
        """SIGTERM the group, wait up to STOP_GRACE_S, then SIGKILL it; idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=STOP_GRACE_S)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        finally:
            process_groups.release(proc.pid)
            proc.wait(timeout=STOP_GRACE_S)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class RedisServer(_ServerProcess):
    """Debian's ``redis-server`` on 127.0.0.1, nothing persisted (``--save ''
    --appendonly no``), its log and working directory in ``workdir``."""

    what = "redis-server"

    def __init__(self, workdir: Path, binary: str = "redis-server") -> None:
        super().__init__(workdir)
        self.binary = binary

    def _argv(self) -> list[str]:
        return [
            self.binary,
            "--bind", HOST, "--port", str(self.port), "--protected-mode", "yes",
            "--save", "", "--appendonly", "no", "--daemonize", "no",
            "--dir", str(self.workdir),
        ]  # fmt: skip

    def _ready(self) -> bool:
        return resp_line(HOST, self.port, "PING", timeout=1.0) == b"+PONG"


class MotoS3Server(_ServerProcess):
    """moto's S3 server (``python -m moto.server``) on 127.0.0.1, run by ``python``, which must
    have ``moto[server]`` installed; its log in ``workdir``."""

    what = "moto-server"

    def __init__(self, workdir: Path, python: str = sys.executable) -> None:
        super().__init__(workdir)
        self.python = python

    @property
    def url(self) -> str:
        """The path-style endpoint clients outside LMCache use (boto3's ``endpoint_url``)."""
        return f"http://{HOST}:{self.port}"

    def _argv(self) -> list[str]:
        return [self.python, "-m", "moto.server", "-H", HOST, "-p", str(self.port)]

    def _request(self, method: str, path: str) -> int:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=5.0)
        try:
            conn.request(method, path, headers={"Content-Length": "0"})
            response = conn.getresponse()
            response.read()
            return response.status
        finally:
            conn.close()

    def _ready(self) -> bool:
        return self._request("GET", "/moto-api/") == 200

    def create_bucket(self, bucket: str) -> None:
        """Create ``bucket`` (a path-style PUT, so no name resolution is needed)."""
        status = self._request("PUT", f"/{bucket}")
        if status != 200:
            raise ServerError(f"creating bucket {bucket!r} answered HTTP {status}")
