"""A testee program behind a pipe: the client side of TESTEE.md's stdio protocol.

``TesteeProcess`` starts the program, optionally says hello, sends requests (one or a
batch) and reads their replies in order, each within ``timeout`` seconds. Whatever goes
wrong is a ``TesteeFailure`` of one of three kinds (``FailureKind``): the testee died
(``crash``), stalled (``timeout``) or wrote something that is not the reply it owed
(``protocol``). The failure says which request went unanswered; the process is then
gone (killed and reaped), and the next exchange starts a fresh one.

The harness owns what it starts (``process_groups``): the testee leads its own process
group, and the whole group is killed when the testee is ended, times out or crashes, and
when the harness exits or is signalled, so a wrapper's children do not outlive the run. A
descendant that left the group (``setsid``, a double fork) is re-parented to the harness
(a child subreaper on Linux) and killed and reaped by the sweep that follows (see
``process_groups.sweep``); orphans that exit while the testee runs are reaped at most every
:data:`_REAP_EVERY` seconds. The testee's exit is noticed as such (a ``pidfd``, else a poll
every :data:`_POLL` seconds), also while a descendant still holds its stdout open.

What a testee can make the harness hold is bounded: its stderr is read from a pipe into a
ring of the last :data:`STDERR_KEEP` bytes (each failure quotes its tail), and a reply line
longer than :data:`MAX_REPLY_LINE` bytes (or the ``max_reply_line`` given) is a protocol
failure that names the limit, read no further than one byte past it, and counted as a
request left unanswered (``TesteeFailure.unanswered``), like a crash or a timeout.
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
#: How often the reply loop looks whether the testee exited, without a pidfd (seconds).
_POLL = 0.05
#: At most how often orphans that exited are reaped while the testee runs (seconds).
_REAP_EVERY = 1.0
#: The most one read from the testee's stdout takes (bytes).
_READ_CHUNK = 1 << 20


class FailureKind(Enum):
    """Why a testee did not answer a request."""

    CRASH = "crash"  # it exited, closed its stdout, or could not be started
    TIMEOUT = "timeout"  # no complete reply within the timeout
    PROTOCOL = "protocol"  # a reply that is not JSON, not for this request, or lacks ``ok``


class TesteeFailure(Exception):
    """The testee failed the request at index ``len(answered)`` of the exchange.

    ``answered`` holds the replies to the requests before it, ``stderr`` the tail of the
    testee's stderr when it failed. ``unanswered`` says that the testee gave no reply at
    all: a crash, a timeout, or a reply line over the size limit (a protocol failure that
    a circuit breaker counts like the other two); by default, the first two."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(
        self,
        kind: FailureKind,
        message: str,
        answered: Sequence[dict[str, Any]] = (),
        stderr: str = "",
        *,
        unanswered: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.answered = list(answered)
        self.stderr = stderr
        if unanswered is None:
            unanswered = kind in (FailureKind.CRASH, FailureKind.TIMEOUT)
        self.unanswered = unanswered

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
    ``max_reply_line`` is the longest reply line accepted (default :data:`MAX_REPLY_LINE`).
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
        max_reply_line: int | None = None,
    ) -> None:
        if not argv:
            raise ValueError("a testee needs a command")
        self.argv = list(argv)
        self.timeout = timeout
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.hello = hello
        self.stop_timeout = stop_timeout
        self.max_reply_line = MAX_REPLY_LINE if max_reply_line is None else max_reply_line
        if self.max_reply_line < 1:
            raise ValueError("max_reply_line must be positive")
        self.hello_reply: dict[str, Any] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._pidfd: int | None = None  # readable once the testee exited (Linux)
        self._before: frozenset[tuple[int, int]] = frozenset()  # our children before it
        self._reaped_at = 0.0
        self._stdout = bytearray()
        self._searched = 0  # how much of _stdout is known to hold no newline
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
        process_groups.adopt_orphans()  # what leaves its group comes back to us
        self._before = process_groups.children()
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
        self._reaped_at = time.monotonic()
        try:
            self._pidfd = os.pidfd_open(self._proc.pid)
        except (AttributeError, OSError):  # not Linux >= 5.3: poll instead
            self._pidfd = None
        assert self._proc.stdin is not None and self._proc.stderr is not None
        assert self._proc.stdout is not None
        os.set_blocking(self._proc.stdin.fileno(), False)
        os.set_blocking(self._proc.stdout.fileno(), False)
        os.set_blocking(self._proc.stderr.fileno(), False)
        self._stdout.clear()
        self._searched = 0
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
        kill what is left of its process group and every descendant that left it; its exit
        status."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        with contextlib.suppress(OSError):
            proc.stdin.close()
        if graceful:
            self._drain_stderr(proc, until_exit=self.stop_timeout)
        process_groups.release(proc.pid)  # the testee, if still there, and its group
        proc.wait()  # once it is gone, its orphans are ours
        process_groups.sweep(self._before, (proc.pid,))  # and those that left the group
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
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
            if self._pidfd is not None:
                sel.register(self._pidfd, selectors.EVENT_READ)
            exited = False
            deadline = time.monotonic() + self.timeout
            while len(replies) < len(requests):
                line = self._take_line()
                if line is not None:
                    replies.append(self._check(line, first + len(replies), replies))
                    deadline = time.monotonic() + self.timeout
                    continue
                if exited:  # what it wrote before it exited is in the pipe, or nothing is
                    if not self._read(proc, replies):  # its end, or nothing more now
                        self._crashed(replies)
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    self._fail(FailureKind.TIMEOUT, f"no answer within {self.timeout} s", replies)
                events = sel.select(left if self._pidfd is not None else min(left, _POLL))
                if self._pidfd is None and proc.poll() is not None:
                    exited = True
                for key, _ in events:
                    if key.fd == self._pidfd:
                        exited = True
                        sel.unregister(key.fileobj)
                    elif key.fd == proc.stdout.fileno():
                        if self._read(proc, replies) is False:  # its end
                            self._crashed(replies, graceful=True)
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
        if time.monotonic() - self._reaped_at >= _REAP_EVERY:
            self._reaped_at = time.monotonic()
            process_groups.reap_orphans(self._before)
        return replies

    def _take_line(self) -> bytes | None:
        """The first complete line of the buffer, taken out of it (None when there is none;
        the bytes already searched are not searched again)."""
        end = self._stdout.find(b"\n", self._searched)
        if end < 0:
            self._searched = len(self._stdout)
            return None
        with memoryview(self._stdout) as view, view[:end] as part:
            line = bytes(part)  # one copy of a line that may be MAX_REPLY_LINE long
        del self._stdout[: end + 1]
        self._searched = 0
        return line

    def _read(self, proc: subprocess.Popen[bytes], replies: list[dict[str, Any]]) -> bool | None:
        """Read what stdout holds, at most one byte past the reply line limit: True when
        something was read, False at its end, None when it holds nothing now. A line over
        the limit is a protocol failure counted as unanswered.

        The reply loop reads only when the buffer holds no complete line, so the buffer is
        the start of one line: it never grows past ``max_reply_line + 1`` bytes, and only
        the new bytes are searched for its end."""
        assert proc.stdout is not None
        limit = self.max_reply_line
        held = len(self._stdout)
        try:
            chunk = os.read(proc.stdout.fileno(), max(1, min(_READ_CHUNK, limit + 1 - held)))
        except BlockingIOError:
            return None
        except OSError:
            chunk = b""
        if not chunk:
            return False
        self._stdout += chunk
        end = self._stdout.find(b"\n", held)
        if end > limit or (end < 0 and len(self._stdout) > limit):
            self._stdout.clear()
            self._searched = 0
            self._fail(
                FailureKind.PROTOCOL,
                f"a reply line longer than the limit of {limit} bytes (MAX_REPLY_LINE)",
                replies,
                unanswered=True,
            )
        return True

    def _crashed(self, replies: list[dict[str, Any]], *, graceful: bool = False) -> NoReturn:
        """The testee exited (or closed its stdout: with ``graceful``, it gets
        ``stop_timeout`` seconds to exit before it is killed): a crash with its status."""
        status = self._end(graceful=graceful)
        self._fail(FailureKind.CRASH, f"testee exited (status {status})", replies)

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

    def _fail(
        self,
        kind: FailureKind,
        message: str,
        replies: list[dict[str, Any]],
        *,
        unanswered: bool | None = None,
    ) -> NoReturn:
        """Kill the testee (if still running) and raise the failure."""
        self._end(graceful=False)
        raise TesteeFailure(kind, message, replies, self.stderr_tail(), unanswered=unanswered)
