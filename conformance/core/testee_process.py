"""A testee program behind a pipe: the client side of TESTEE.md's stdio protocol.

``TesteeProcess`` starts the program, optionally says hello, sends requests (one or a
batch) and reads their replies in order, each within ``timeout`` seconds. Whatever goes
wrong is a ``TesteeFailure`` of one of three kinds (``FailureKind``): the testee died
(``crash``), stalled (``timeout``) or wrote something that is not the reply it owed
(``protocol``). The failure says which request went unanswered; the process is then
gone (killed and reaped), and the next exchange starts a fresh one.

The harness owns what it starts (``process_groups``): the testee leads its own process
group, and the whole group is killed when the testee is ended, times out or crashes, and
when the harness exits or is signalled, so a wrapper's children do not outlive the run.
What a testee can make the harness hold is bounded: its stderr is read from a pipe into a
ring of the last :data:`STDERR_KEEP` bytes (each failure quotes its tail), and a reply line
longer than :data:`MAX_REPLY_LINE` bytes is a protocol failure that names the limit.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import time
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, NoReturn

from lmckv.base import process_groups

from .wire import PROTOCOL_VERSION, WireError, dumps_line, loads_line

#: How much of the stderr log a failure keeps (bytes, from the end).
STDERR_TAIL = 4096
#: How much of a testee's stderr the harness holds at most (bytes, from the end).
STDERR_KEEP = 64 * 1024
#: The longest reply line accepted (bytes): a testee writing more without a newline fails.
MAX_REPLY_LINE = 256 << 20
#: How long the stderr of a killed testee is still drained for its last words (seconds).
_DRAIN_AFTER_KILL = 1.0


class FailureKind(Enum):
    """Why a testee did not answer a request."""

    CRASH = "crash"  # it exited, closed its stdout, or could not be started
    TIMEOUT = "timeout"  # no complete reply within the timeout
    PROTOCOL = "protocol"  # a reply that is not JSON, not for this request, or lacks ``ok``


class TesteeFailure(Exception):
    """The testee failed the request at index ``len(answered)`` of the exchange.

    ``answered`` holds the replies to the requests before it, ``stderr`` the tail of the
    testee's stderr when it failed."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(
        self,
        kind: FailureKind,
        message: str,
        answered: Sequence[dict[str, Any]] = (),
        stderr: str = "",
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.answered = list(answered)
        self.stderr = stderr

    @property
    def index(self) -> int:
        """The position, in the exchange, of the request left unanswered."""
        return len(self.answered)


class TesteeProcess:
    """One testee program, started on demand and restarted after a failure.

    Requests are dicts of wire fields without ``id``: the client numbers them from 1 in
    each process and checks that every reply carries its request's ``id`` and a boolean
    ``ok`` (and, when ``ok`` is false, a string ``error``). Replies are returned without
    ``id``. With ``hello`` set, every start sends TESTEE.md's hello first and requires an
    ``ok`` reply repeating the protocol version; that reply is kept in ``hello_reply``.
    """

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None,
        hello: bool = False,
        stop_timeout: float = 5.0,
    ) -> None:
        if not argv:
            raise ValueError("a testee needs a command")
        self.argv = list(argv)
        self.timeout = timeout
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.hello = hello
        self.stop_timeout = stop_timeout
        self.hello_reply: dict[str, Any] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stdout = bytearray()
        self._stderr = bytearray()
        self._next_id = 1

    # -- lifetime -------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The running testee's process id (None when none is running)."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the testee unless it runs (and say hello); TesteeFailure when it fails."""
        if self._proc is not None:
            return
        self._stderr.clear()
        try:
            self._proc = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group, killed whole
            )
        except OSError as exc:
            raise TesteeFailure(FailureKind.CRASH, f"cannot start {self.argv[0]}: {exc}") from None
        process_groups.register(self._proc.pid)
        assert self._proc.stdin is not None and self._proc.stderr is not None
        os.set_blocking(self._proc.stdin.fileno(), False)
        os.set_blocking(self._proc.stderr.fileno(), False)
        self._stdout.clear()
        self._next_id = 1
        if self.hello:
            self.hello_reply = self._hello()

    def _hello(self) -> dict[str, Any]:
        (reply,) = self._exchange([{"op": "hello", "protocol": PROTOCOL_VERSION}])
        if not reply["ok"] or reply.get("protocol") != PROTOCOL_VERSION:
            self._fail(FailureKind.PROTOCOL, f"bad hello reply {reply!r}", [])
        return reply

    def stop(self) -> None:
        """End the testee: close its stdin, give it ``stop_timeout`` seconds to exit, then
        kill it; in every case reap it."""
        self._end(graceful=True)

    def close(self) -> None:
        """Stop the testee."""
        self.stop()

    def __enter__(self) -> TesteeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _end(self, graceful: bool) -> int | None:
        """Stop the process (see ``stop``; without ``graceful``, kill it at once), then
        kill what is left of its process group; its exit status."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        with contextlib.suppress(OSError):
            proc.stdin.close()
        if graceful:
            self._drain_stderr(proc, until_exit=self.stop_timeout)
        process_groups.release(proc.pid)  # the testee, if still there, and its children
        proc.wait()
        self._drain_stderr(proc, until_exit=0)
        proc.stdout.close()
        proc.stderr.close()
        return proc.returncode

    def _drain_stderr(self, proc: subprocess.Popen[bytes], until_exit: float) -> None:
        """Read stderr into the ring while waiting up to ``until_exit`` seconds for the
        process to exit (0: only until the pipe is empty or closed, at most
        _DRAIN_AFTER_KILL seconds)."""
        assert proc.stderr is not None
        fd = proc.stderr.fileno()
        deadline = time.monotonic() + (until_exit or _DRAIN_AFTER_KILL)
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                if until_exit and proc.poll() is not None:
                    until_exit = 0  # exited: take what is left in the pipe, then stop
                if not sel.select(min(left, 0.05)):
                    if until_exit:
                        continue
                    return
                if not self._read_stderr(fd):
                    return

    def _read_stderr(self, fd: int) -> bool:
        """Move what stderr holds into the ring; False at its end."""
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            return False
        self._stderr += chunk
        if len(self._stderr) > STDERR_KEEP:
            del self._stderr[:-STDERR_KEEP]
        return bool(chunk)

    def stderr_tail(self, limit: int = STDERR_TAIL) -> str:
        """The last ``limit`` bytes the current (or last) testee wrote to stderr."""
        return bytes(self._stderr[-limit:]).decode("utf-8", "replace")

    # -- requests -------------------------------------------------------------------------

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Send one request and return its reply (TesteeFailure when it has none)."""
        (reply,) = self.exchange([request])
        return reply

    def exchange(self, requests: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Send a batch of requests and return the replies in order.

        The requests are encoded before anything is sent (a WireError is the caller's);
        the testee is started if none runs. On a TesteeFailure the process is gone."""
        self.start()
        return self._exchange(requests)

    def _exchange(self, requests: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        first = self._next_id
        data = b"".join(
            dumps_line({**request, "id": first + i}).encode("ascii")
            for i, request in enumerate(requests)
        )
        self._next_id += len(requests)
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        replies: list[dict[str, Any]] = []
        pending = memoryview(data)
        assert proc.stderr is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout.fileno(), selectors.EVENT_READ)
            sel.register(proc.stderr.fileno(), selectors.EVENT_READ)
            stderr_open = True
            if pending:
                sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
            deadline = time.monotonic() + self.timeout
            while len(replies) < len(requests):
                line = self._take_line()
                if line is not None:
                    replies.append(self._check(line, first + len(replies), replies))
                    deadline = time.monotonic() + self.timeout
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    self._fail(FailureKind.TIMEOUT, f"no answer within {self.timeout} s", replies)
                for key, _ in sel.select(left):
                    if key.fd == proc.stdout.fileno():
                        self._read(proc, replies)
                    elif key.fd == proc.stderr.fileno():
                        if stderr_open and not self._read_stderr(key.fd):
                            stderr_open = False
                            sel.unregister(key.fileobj)
                    else:
                        pending = self._write(proc, pending)
                        if not pending:
                            sel.unregister(key.fileobj)
        if pending:  # the last reply came before its request was read
            self._fail(FailureKind.PROTOCOL, "answered a request it had not read", replies[:-1])
        return replies

    def _take_line(self) -> bytes | None:
        end = self._stdout.find(b"\n")
        if end < 0:
            return None
        line = bytes(self._stdout[:end])
        del self._stdout[: end + 1]
        return line

    def _read(self, proc: subprocess.Popen[bytes], replies: list[dict[str, Any]]) -> None:
        assert proc.stdout is not None
        chunk = os.read(proc.stdout.fileno(), 1 << 20)
        if not chunk:
            status = self._end(graceful=True)
            self._fail(FailureKind.CRASH, f"testee exited (status {status})", replies)
        self._stdout += chunk
        if len(self._stdout) > MAX_REPLY_LINE and b"\n" not in self._stdout:
            self._fail(
                FailureKind.PROTOCOL,
                f"a reply line longer than the limit of {MAX_REPLY_LINE} bytes (MAX_REPLY_LINE)",
                replies,
            )

    @staticmethod
    def _write(proc: subprocess.Popen[bytes], pending: memoryview) -> memoryview:
        """Write what the pipe takes; after a broken pipe nothing is left to write (the
        testee is dying, and its stdout's end of file tells)."""
        assert proc.stdin is not None
        try:
            return pending[os.write(proc.stdin.fileno(), pending[: 1 << 16]) :]
        except BlockingIOError:
            return pending
        except OSError:
            return pending[len(pending) :]

    def _check(self, line: bytes, want_id: int, replies: list[dict[str, Any]]) -> dict[str, Any]:
        """The reply a line holds, or a protocol failure."""
        try:
            reply = loads_line(line.decode("utf-8"))
        except (UnicodeDecodeError, WireError) as exc:
            self._fail(FailureKind.PROTOCOL, f"{exc}: {line[:300]!r}", replies)
        if reply.get("id") != want_id:
            self._fail(FailureKind.PROTOCOL, f"reply id {reply.get('id')}, sent {want_id}", replies)
        if not isinstance(reply.get("ok"), bool):
            self._fail(FailureKind.PROTOCOL, "reply lacks a boolean 'ok'", replies)
        if not reply["ok"] and not isinstance(reply.get("error"), str):
            self._fail(FailureKind.PROTOCOL, "failed reply lacks a string 'error'", replies)
        del reply["id"]
        return reply

    def _fail(self, kind: FailureKind, message: str, replies: list[dict[str, Any]]) -> NoReturn:
        """Kill the testee (if still running) and raise the failure."""
        self._end(graceful=False)
        raise TesteeFailure(kind, message, replies, self.stderr_tail())
