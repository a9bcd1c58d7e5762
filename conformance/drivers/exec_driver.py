"""``exec:CMD``: a testee program in any language, spoken to over stdin/stdout (TESTEE.md).

The command is split like a POSIX shell would and resolved from the caller's point of
view: a word starting with ``~`` is expanded, a program with a ``/`` in its name is found
relative to the directory the run was started from (``ExecSettings.cwd``), a bare name on
``PATH``, and the testee runs in that directory. The driver says hello, then sends one JSON
line per operation and reads one JSON line back, through
``conformance.core.testee_process``. A testee that crashes, hangs (``ExecSettings.timeout``
seconds) or breaks the protocol fails that one operation with ``raw:testee-crash``,
``raw:testee-timeout`` or ``raw:testee-protocol`` and is restarted for the next one. Its
stderr goes to a log file whose tail is quoted in those failures.

A circuit breaker ends a testee that no longer answers: after ``max_failures``
crashes, timeouts or reply lines over the size limit (``TesteeFailure.unanswered``: a
protocol failure counted like the other two, since nothing was answered) with fewer than
``max_failures`` answered requests between any two of them (so a testee that answers one
request per restart cannot reset it forever) the driver stops starting it, and every later
operation fails at once with ``raw:testee-stopped`` and ``stopped``, the reason, which the
plugin reports on each remaining test.

With a ``Transcript``, every request and reply (or failure) is appended to a JSON Lines
file, for replaying a failure by hand (TESTEE.md, "Transcripts").
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.error_names import RAW_PREFIX
from ..core.operations import CAPABILITIES, reply_problem
from ..core.testee_process import FailureKind, TesteeFailure, TesteeProcess
from ..core.wire import PROTOCOL_VERSION, WireError, to_wire
from .base import Driver, DriverError, ImplInfo

#: How much of the testee's stderr a failure quotes (bytes, from the end).
STDERR_QUOTE = 600
#: Defaults of --testee-timeout and --testee-max-failures.
DEFAULT_TIMEOUT = 20.0
DEFAULT_MAX_FAILURES = 3
#: The error of every operation after the circuit breaker tripped.
STOPPED_ERROR = f"{RAW_PREFIX}testee-stopped"
#: The error of a reply that breaks the operations table (a missing or mistyped field).
PROTOCOL_ERROR = f"{RAW_PREFIX}testee-{FailureKind.PROTOCOL.value}"
#: What the circuit breaker counts, by what ``stop_reason`` calls it: no answer at all.
_CRASH, _TIMEOUT, _OVERLONG = "crash", "timeout", "over-long reply"


class Transcript:
    """An append-only JSON Lines record of every exchange with exec testees.

    Each line is written with one ``write`` on a descriptor opened with ``O_APPEND``, so
    several processes (pytest-xdist workers) can share the file without tearing lines.
    ``test`` is the node id of the test now running, set by the plugin."""

    def __init__(self, path: Path, *, truncate: bool, worker: str | None = None) -> None:
        self.path = path
        self.worker = worker
        self.test: str | None = None
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if truncate else 0)
        self._fd: int | None = os.open(path, flags, 0o644)

    def record(self, impl: str, testee_pid: int | None, **entry: Any) -> None:
        """Append one line: time, impl, worker, test, testee pid, then ``entry``."""
        if self._fd is None:
            return
        line = {
            "time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            "impl": impl,
            "worker": self.worker,
            "test": self.test,
            "testee_pid": testee_pid,
            **entry,
        }
        data = (json.dumps(line, sort_keys=True) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@dataclass
class ExecSettings:
    """How exec testees run: the caller's directory (commands resolve against it and
    testees run in it), the reply timeout, the circuit breaker's limit (0: never stop),
    the transcript, if any, and the longest reply line (None: ``MAX_REPLY_LINE``)."""

    cwd: Path = field(default_factory=Path.cwd)
    timeout: float = DEFAULT_TIMEOUT
    max_failures: int = DEFAULT_MAX_FAILURES
    transcript: Transcript | None = None
    env: Mapping[str, str] | None = None
    max_reply_line: int | None = None


def resolve_command(command: str, cwd: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """``command`` split and resolved as a shell started in ``cwd`` would: words starting
    with ``~`` expanded, a program containing ``/`` taken relative to ``cwd``, a bare name
    looked up on ``PATH``. DriverError (``cannot start PROG: ...``) when there is no such
    program or it is not executable."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise DriverError(f"cannot split the command: {exc}") from exc
    if not argv:
        raise DriverError("exec: needs a command")
    argv = [os.path.expanduser(a) if a.startswith("~") else a for a in argv]
    program = argv[0]
    if "/" in program:
        path = cwd / program
        if not path.exists():
            raise DriverError(f"cannot start {program}: [Errno 2] No such file or directory")
        if path.is_dir() or not os.access(path, os.X_OK):
            raise DriverError(f"cannot start {program}: [Errno 13] Permission denied")
        return [str(path), *argv[1:]]
    search = (env if env is not None else os.environ).get("PATH", os.defpath)
    found = shutil.which(program, path=search)
    if found is None:
        raise DriverError(f"cannot start {program}: not found on PATH")
    return [str(Path(cwd, found)), *argv[1:]]


def failure_reply(failure: TesteeFailure) -> dict[str, Any]:
    """The driver's answer to an operation the testee failed: ``raw:testee-<kind>``."""
    tail = failure.stderr[-STDERR_QUOTE:].strip()
    return {
        "ok": False,
        "error": f"{RAW_PREFIX}testee-{failure.kind.value}",
        "message": f"{failure}; stderr: ...{tail}" if tail else str(failure),
    }


class ExecDriver(Driver):
    """One testee subprocess, restarted when it fails, given up on when it stops
    answering. ``label`` names it in messages (the ``--impl`` value)."""

    def __init__(
        self, command: str, settings: ExecSettings | None = None, *, label: str | None = None
    ) -> None:
        self.settings = settings or ExecSettings()
        self.label = label or f"exec:{command}"
        self.command = command
        self.stopped: str | None = None
        self._unanswered: list[str] = []  # _CRASH, _TIMEOUT or _OVERLONG
        self._answered_since_failure = 0
        self._last_failure = ""
        self._next_id = 1
        try:
            argv = resolve_command(command, self.settings.cwd, self.settings.env)
        except DriverError as exc:
            raise DriverError(f"--impl {self.label}: {exc}") from None
        self.process = TesteeProcess(
            argv,
            timeout=self.settings.timeout,
            cwd=self.settings.cwd,
            env=self.settings.env,
            hello=True,
            max_reply_line=self.settings.max_reply_line,
        )
        self._name = self.label  # transcript lines before the hello name the --impl value
        try:
            self._start()
        except TesteeFailure as exc:
            self.process.close()
            why = _one_line(exc, with_stderr=True)
            raise DriverError(f"--impl {self.label}: no valid hello: {why}") from None
        hello = self.process.hello_reply or {}
        caps = [c for c in hello.get("capabilities") or [] if c in CAPABILITIES]
        name = hello.get("name")
        if not isinstance(name, str) or not name or not name.replace("-", "").isalnum():
            self.process.close()
            raise DriverError(f"--impl {self.label}: hello needs a name of letters, digits and '-'")
        self._name = name
        self.info = ImplInfo(name, "exec", hello.get("version"), caps)

    # -- exchanges, recorded in the transcript ------------------------------------------------

    def _record(self, **entry: Any) -> None:
        if self.settings.transcript is not None:
            self.settings.transcript.record(self._name, self.process.pid, **entry)

    def _start(self) -> None:
        """Start the testee (TesteeProcess numbers requests from 1 in each process, the
        hello first) and record the hello."""
        hello = {"id": 1, "op": "hello", "protocol": PROTOCOL_VERSION}
        try:
            self.process.start()
        except TesteeFailure as exc:
            self._record(request=hello, failure=_failure_entry(exc))
            raise
        self._record(
            request=hello, reply=_wire_reply({"id": 1, **(self.process.hello_reply or {})})
        )
        self._next_id = 2

    def _exchange(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.process.pid is None:
            self._start()
        sent = {**request, "id": self._next_id}
        self._next_id += 1
        pid = self.process.pid
        try:
            reply = self.process.call(request)
        except TesteeFailure as exc:
            if self.settings.transcript is not None:
                self.settings.transcript.record(
                    self._name, pid, request=to_wire(sent), failure=_failure_entry(exc)
                )
            raise
        if self.settings.transcript is not None:
            self._record(request=to_wire(sent), reply=_wire_reply({**reply, "id": sent["id"]}))
        return reply

    # -- the Driver interface ---------------------------------------------------------------

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        if self.stopped is not None:
            return {"ok": False, "error": STOPPED_ERROR, "message": self.stopped}
        try:
            reply = self._exchange({"op": op, **fields})
        except TesteeFailure as exc:
            self._count_failure(exc)
            return failure_reply(exc)
        except WireError as exc:
            raise DriverError(f"the suite built a bad request for {op}: {exc}") from exc
        self._count_answer()
        problem = reply_problem(op, reply)
        if problem is not None:  # answered, but not as the operations table says
            return {"ok": False, "error": PROTOCOL_ERROR, "message": problem}
        return reply

    def _count_answer(self) -> None:
        """An answered request; ``max_failures`` in a row reset the circuit breaker."""
        self._answered_since_failure += 1
        if self._answered_since_failure >= max(self.settings.max_failures, 1):
            self._unanswered.clear()

    def _count_failure(self, failure: TesteeFailure) -> None:
        """The circuit breaker: trip after ``max_failures`` unanswered requests, none of
        them followed by ``max_failures`` answered ones."""
        if not failure.unanswered:
            self._count_answer()  # it answered, if wrongly
            return
        self._answered_since_failure = 0
        if failure.kind is FailureKind.TIMEOUT:
            self._unanswered.append(_TIMEOUT)
        elif failure.kind is FailureKind.CRASH:
            self._unanswered.append(_CRASH)
        else:  # a reply line over the size limit
            self._unanswered.append(_OVERLONG)
        self._last_failure = _one_line(failure, with_stderr=True)
        limit = self.settings.max_failures
        if limit > 0 and len(self._unanswered) >= limit:
            self.stopped = self.stop_reason()
            self.process.stop()

    def stop_reason(self) -> str:
        """Why the circuit breaker tripped, in one line."""
        n = len(self._unanswered)
        timeouts = self._unanswered.count(_TIMEOUT)
        crashes = self._unanswered.count(_CRASH)
        overlong = self._unanswered.count(_OVERLONG)
        seconds = f"{self.settings.timeout:g} s"
        s = "s" if n > 1 else ""
        if timeouts == n:
            what = f"{n} consecutive timeout{s} of {seconds}"
        elif crashes == n:
            what = f"{n} consecutive crash{'es' if n > 1 else ''}"
        elif overlong == n:
            what = f"{n} consecutive reply line{s} over the size limit"
        elif not overlong:
            what = (
                f"{n} consecutive crashes or timeouts ({crashes} crashed, "
                f"{timeouts} timed out after {seconds})"
            )
        else:
            parts = [f"{crashes} crashed"] if crashes else []
            parts += [f"{timeouts} timed out after {seconds}"] if timeouts else []
            parts.append(f"{overlong} over the reply size limit")
            what = f"{n} consecutive unanswered requests ({', '.join(parts)})"
        return (
            f"testee {self.label} stopped answering: {what}; remaining tests not run "
            f"(last: {self._last_failure})"
        )

    def close(self) -> None:
        self.process.close()


def _wire_reply(reply: dict[str, Any]) -> dict[str, Any]:
    """A reply as the testee wrote it (the client decoded hex fields)."""
    try:
        return to_wire(reply)
    except WireError:  # not reachable for a reply from_wire accepted; keep what is there
        return {k: v.hex() if isinstance(v, bytes) else v for k, v in reply.items()}


def _failure_entry(failure: TesteeFailure) -> dict[str, Any]:
    return {
        "kind": failure.kind.value,
        "message": str(failure),
        "stderr": failure.stderr[-STDERR_QUOTE:],
    }


def _one_line(failure: TesteeFailure, *, with_stderr: bool = False) -> str:
    text = str(failure)
    tail = " | ".join(line for line in failure.stderr[-200:].splitlines() if line.strip())
    if with_stderr and tail:
        text += f"; stderr: ...{tail}"
    return text
