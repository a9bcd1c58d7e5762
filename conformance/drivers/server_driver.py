"""Server implementations under test: a cache server the suite talks to as a client.

A server is a different kind of implementation from the codec drivers: it answers no
TESTEE.md operation; the suite reaches it on a loopback TCP address (SPEC "The protocol on
a connection"). The ``--impl`` values:

- ``reference-server``: ``lmckv serve`` (this repository's reference server), started with
  a small capacity and idle timeout so that the tests of those rules run quickly;
- ``upstream-server``: ``python -m lmcache.v1.server 127.0.0.1 PORT cpu`` (lmcache 0.5.6);
- ``server:CMD``: any command; ``{port}`` in it is replaced by a free loopback port;
- ``server-at:127.0.0.1:PORT``: a server already running on a loopback address.

A release that has no server module (0.5.7rc2 removed ``lmcache.v1.server``) gives a driver
that is :attr:`ServerDriver.absent` with the reason: its tests skip saying so, instead of
failing to start it.

A started server is started once per test process, on first use, and stopped (SIGTERM,
then SIGKILL, by its PID) when the driver is closed. Only loopback addresses are used.
Set ``LMCKV_SERVER_LOG`` to a file to have every started server's ``pid port`` appended
(the self-test that checks nothing is left behind reads it).
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from lmckv.base import process_groups
from lmckv.base.lmcache_release import installed_version
from lmckv.base.memory_peaks import MemoryPeaks, memory_peaks

from .base import Driver, DriverError, ImplInfo

#: Seconds a started server may take until it accepts a connection.
START_TIMEOUT = 10.0
#: lmcache's server imports torch and most of lmcache first; the reference imports torch
#: (both can take long on a loaded machine).
UPSTREAM_START_TIMEOUT = 40.0
REFERENCE_START_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0
#: The reference server as the suite starts it: small enough to test its bounds quickly.
REFERENCE_CAPACITY = 8 << 20
REFERENCE_IDLE_TIMEOUT = 2.0
REFERENCE_MAX_CONNECTIONS = 64


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to send SIGTERM when the process that started
    it dies, so that a test process killed outright leaves no server behind."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def require_loopback(host: str) -> str:
    """``host`` when it is a loopback address literal; DriverError otherwise."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise DriverError(f"{host!r} is not an IP address (loopback only)") from None
    if not address.is_loopback:
        raise DriverError(f"{host} is not a loopback address; the suite connects to no other")
    return str(address)


class ServerDriver(Driver):
    """A cache server on a loopback address, started by the suite or already running."""

    def __init__(
        self,
        name: str,
        version: str | None,
        *,
        command: list[str] | None = None,
        address: tuple[str, int] | None = None,
        start_timeout: float = START_TIMEOUT,
        capacity_bytes: int | None = None,
        idle_timeout: float | None = None,
        env: dict[str, str] | None = None,
        absent: str | None = None,
        max_connections: int | None = None,
        memory_bound: int | None = None,
    ) -> None:
        self.info = ImplInfo(name=name, kind="server", version=version, capabilities=[])
        #: Why this implementation has no server to start (its tests skip with it), or None.
        self.absent = absent
        self.command = command
        self._address = address
        self.start_timeout = start_timeout
        #: The server's stated capacity in payload bytes (None: it states none).
        self.capacity_bytes = capacity_bytes
        #: The server's stated idle timeout in seconds (None: it states none).
        self.idle_timeout = idle_timeout
        #: The server's stated connection limit (None: it states none).
        self.max_connections = max_connections
        #: The most resident memory the server states it holds (None: it states none).
        self.memory_bound = memory_bound
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._start_error: DriverError | None = None

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        return {"ok": False, "error": "unsupported", "message": "a server answers no operation"}

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) of the running server, starting it first if the suite owns it."""
        if self._address is None or (self.command is not None and self.process is None):
            self.start()
        assert self._address is not None
        return self._address

    def start(self) -> None:
        """Start the server once; a failed start is reported again without a retry."""
        if self._start_error is not None:
            raise self._start_error
        if self.command is None or self.process is not None:
            return
        try:
            self._start()
        except DriverError as exc:
            self._start_error = exc
            raise

    def _start(self) -> None:
        assert self.command is not None
        port = free_port()
        argv = [part.replace("{port}", str(port)) for part in self.command]
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            env={**os.environ, **(self.env or {})},
            preexec_fn=_die_with_parent,
            start_new_session=True,  # its own process group: a wrapper's children end with it
        )
        process_groups.register(self.process.pid)
        atexit.register(self.close)
        log = os.environ.get("LMCKV_SERVER_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as out:
                out.write(f"{self.process.pid} {port}\n")
        self._address = ("127.0.0.1", port)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            returncode = self.process.poll()
            if returncode is not None:
                tail = self.stderr_tail()
                self.close()
                raise DriverError(f"{self.name}: exited with {returncode}: {tail}")
            try:
                with socket.create_connection(self._address, timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.close()
        raise DriverError(f"{self.name}: not accepting on port {port} after {self.start_timeout}s")

    def alive(self) -> bool:
        """False once a started server's process has exited."""
        return self.process is None or self.process.poll() is None

    def stderr_tail(self, limit: int = 2000) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - limit))
        return self._stderr.read().decode("utf-8", "replace")

    def memory_peaks(self) -> MemoryPeaks | None:
        """The started server's memory high-water marks (``lmckv.base.memory_peaks``); None
        if unknown."""
        return memory_peaks(None if self.process is None else self.process.pid)

    def close(self) -> None:
        """SIGTERM the server's process group, then kill what is left of it."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(STOP_TIMEOUT)
        if process is not None:
            process_groups.release(process.pid)
            process.wait(STOP_TIMEOUT)
        if self.command is not None:
            self._address = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


#: The module ``python -m`` runs as upstream's server (seed 002's server end).
UPSTREAM_SERVER_MODULE = "lmcache.v1.server"


def module_absent(module: str) -> bool:
    """Whether the installed lmcache has no ``module`` (a release that removed it), judged
    from the files of its top-level package without importing the parents (a parent's
    ``__init__`` may need dependencies the suite does not install); False when the module's
    file is there, also if importing it would fail, which the run then reports."""
    import importlib.machinery
    import importlib.util

    top, _, rest = module.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None:
        return True
    if not rest or spec.submodule_search_locations is None:
        return not rest
    *packages, leaf = rest.split(".")
    for location in spec.submodule_search_locations:
        folder = Path(location).joinpath(*packages)
        if (folder / leaf / "__init__.py").is_file() or any(
            (folder / f"{leaf}{suffix}").is_file() for suffix in importlib.machinery.all_suffixes()
        ):
            return False
    return True


def reference_server(
    capacity_bytes: int = REFERENCE_CAPACITY, idle_timeout: float | None = REFERENCE_IDLE_TIMEOUT
) -> ServerDriver:
    """``lmckv serve`` on a free loopback port, with this capacity and idle timeout (None:
    the server's default)."""
    command = [sys.executable, "-m", "lmckv", "serve", "--port", "{port}"]
    command += ["--capacity-bytes", str(capacity_bytes)]
    command += ["--max-connections", str(REFERENCE_MAX_CONNECTIONS)]
    if idle_timeout is not None:
        command += ["--idle-timeout", str(idle_timeout)]
    return ServerDriver(
        "reference-server",
        None,
        command=command,
        start_timeout=REFERENCE_START_TIMEOUT,
        capacity_bytes=capacity_bytes,
        idle_timeout=idle_timeout,
        max_connections=REFERENCE_MAX_CONNECTIONS,
        # PROTO-SRV-MEMORY as `lmckv serve` states it (reference_impl.protocol.server).
        memory_bound=capacity_bytes + (320 << 20) + REFERENCE_MAX_CONNECTIONS * (640 << 10),
    )


def upstream_server() -> ServerDriver:
    """The installed LMCache's ``lm://`` server, started on a free loopback port (a release
    without it gives a driver whose tests skip, saying so)."""
    version = installed_version()
    if version is None:
        raise DriverError("lmcache is not installed")
    absent = None
    if module_absent(UPSTREAM_SERVER_MODULE):
        absent = f"lmcache {version} has no {UPSTREAM_SERVER_MODULE} (no lm:// server)"
    return ServerDriver(
        "upstream-server",
        version,
        command=[sys.executable, "-m", UPSTREAM_SERVER_MODULE, "127.0.0.1", "{port}", "cpu"],
        start_timeout=UPSTREAM_START_TIMEOUT,
        absent=absent,
    )


def command_server(command: list[str]) -> ServerDriver:
    """A server this command starts; one of its words holds ``{port}``."""
    if not command or not any("{port}" in part for part in command):
        raise DriverError("the command must contain {port}")
    return ServerDriver("server", None, command=command)


def server_at(host: str, port: int) -> ServerDriver:
    """A server already listening at ``host:port`` (loopback only)."""
    return ServerDriver("server-at", None, address=(require_loopback(host), port))
