"""``exec:CMD``: a testee program in any language, spoken to over stdin/stdout (TESTEE.md).

The driver starts CMD (split like a shell would, run from the repository root), says
hello, then sends one JSON line per operation and reads one JSON line back. A testee that
crashes, hangs (``LMCKV_TESTEE_TIMEOUT`` seconds, default 20) or breaks the protocol fails
that one operation with ``raw:testee-crash``, ``raw:testee-timeout`` or
``raw:testee-protocol`` and is restarted for the next one. Its stderr goes to a log file
whose tail is quoted in those failures.
"""

from __future__ import annotations

import os
import selectors
import shlex
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from conformance.core.error_names import RAW_PREFIX
from conformance.core.operations import CAPABILITIES
from conformance.core.wire import PROTOCOL_VERSION, WireError, dumps_line, loads_line
from conformance.drivers.base import Driver, DriverError, ImplInfo

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = float(os.environ.get("LMCKV_TESTEE_TIMEOUT", "20"))


class _Failure(Exception):
    """The testee failed at the protocol level (crash, hang, garbage)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class ExecDriver(Driver):
    """One testee subprocess, restarted when it dies."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.argv = shlex.split(command)
        if not self.argv:
            raise DriverError("exec: needs a command")
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the driver
            prefix="lmckv-testee-", suffix=".log", delete=False
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.buffer = b""
        self.next_id = 0
        try:
            hello = self._start()
        except _Failure as exc:
            raise DriverError(f"exec:{command}: no valid hello: {exc}") from exc
        caps = [c for c in hello.get("capabilities") or [] if c in CAPABILITIES]
        name = hello.get("name")
        if not isinstance(name, str) or not name or not name.replace("-", "").isalnum():
            raise DriverError(f"exec:{command}: hello needs a name of letters, digits and '-'")
        self.info = ImplInfo(name, "exec", hello.get("version"), caps)

    # -- process --------------------------------------------------------------------------

    def _start(self) -> dict[str, Any]:
        self.proc = subprocess.Popen(
            self.argv,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
        )
        self.buffer = b""
        hello = self._exchange({"op": "hello", "protocol": PROTOCOL_VERSION})
        if not hello.get("ok") or hello.get("protocol") != PROTOCOL_VERSION:
            raise _Failure("testee-protocol", f"bad hello reply {hello!r}")
        return hello

    def _stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()

    def _stderr_tail(self) -> str:
        try:
            data = Path(self.log.name).read_bytes()[-600:]
        except OSError:
            return ""
        text = data.decode("utf-8", "replace").strip()
        return f"; stderr: ...{text}" if text else ""

    def _readline(self, deadline: float) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Failure("testee-timeout", f"no answer within {TIMEOUT_S} s")
                if not sel.select(left):
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    code = self.proc.poll()
                    raise _Failure("testee-crash", f"testee exited (status {code})")
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def _exchange(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        self.next_id += 1
        request = {"id": self.next_id, **request}
        try:
            self.proc.stdin.write(dumps_line(request).encode("ascii"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise _Failure("testee-crash", f"cannot write to the testee: {exc}") from None
        line = self._readline(time.monotonic() + TIMEOUT_S)
        try:
            reply = loads_line(line.decode("utf-8"))
        except (UnicodeDecodeError, WireError) as exc:
            raise _Failure("testee-protocol", str(exc)) from None
        if reply.get("id") != self.next_id:
            raise _Failure("testee-protocol", f"reply id {reply.get('id')}, sent {self.next_id}")
        if not isinstance(reply.get("ok"), bool):
            raise _Failure("testee-protocol", "reply lacks a boolean 'ok'")
        reply.pop("id")
        return reply

    # -- Driver ---------------------------------------------------------------------------

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        try:
            if self.proc is None:
                self._start()
            reply = self._exchange({"op": op, **fields})
        except _Failure as exc:
            self._stop()
            return {
                "ok": False,
                "error": f"{RAW_PREFIX}{exc.kind}",
                "message": f"{exc}{self._stderr_tail()}",
            }
        except WireError as exc:
            raise DriverError(f"the suite built a bad request for {op}: {exc}") from exc
        if not reply["ok"] and not isinstance(reply.get("error"), str):
            reply["error"] = f"{RAW_PREFIX}testee-protocol"
        return reply

    def close(self) -> None:
        self._stop()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)
