"""``exec:CMD``: a testee program in any language, spoken to over stdin/stdout (TESTEE.md).

The driver starts CMD (split like a shell would, run from the repository root), says
hello, then sends one JSON line per operation and reads one JSON line back, through
``conformance.core.testee_process``. A testee that crashes, hangs (``LMCKV_TESTEE_TIMEOUT``
seconds, default 20) or breaks the protocol fails that one operation with
``raw:testee-crash``, ``raw:testee-timeout`` or ``raw:testee-protocol`` and is restarted
for the next one. Its stderr goes to a log file whose tail is quoted in those failures.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from conformance.core.error_names import RAW_PREFIX
from conformance.core.operations import CAPABILITIES
from conformance.core.testee_process import TesteeFailure, TesteeProcess
from conformance.core.wire import WireError
from conformance.drivers.base import Driver, DriverError, ImplInfo

REPO = Path(__file__).resolve().parents[2]

#: How much of the testee's stderr a failure quotes (bytes, from the end).
STDERR_QUOTE = 600


def failure_reply(failure: TesteeFailure) -> dict[str, Any]:
    """The driver's answer to an operation the testee failed: ``raw:testee-<kind>``."""
    tail = failure.stderr[-STDERR_QUOTE:].strip()
    return {
        "ok": False,
        "error": f"{RAW_PREFIX}testee-{failure.kind.value}",
        "message": f"{failure}; stderr: ...{tail}" if tail else str(failure),
    }


class ExecDriver(Driver):
    """One testee subprocess, restarted when it fails."""

    def __init__(self, command: str) -> None:
        self.command = command
        argv = shlex.split(command)
        if not argv:
            raise DriverError("exec: needs a command")
        timeout = float(os.environ.get("LMCKV_TESTEE_TIMEOUT", "20"))
        self.process = TesteeProcess(argv, timeout=timeout, cwd=REPO, hello=True)
        try:
            self.process.start()
        except TesteeFailure as exc:
            self.process.close()
            raise DriverError(f"exec:{command}: no valid hello: {exc}") from exc
        hello = self.process.hello_reply or {}
        caps = [c for c in hello.get("capabilities") or [] if c in CAPABILITIES]
        name = hello.get("name")
        if not isinstance(name, str) or not name or not name.replace("-", "").isalnum():
            self.process.close()
            raise DriverError(f"exec:{command}: hello needs a name of letters, digits and '-'")
        self.info = ImplInfo(name, "exec", hello.get("version"), caps)

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        try:
            return self.process.call({"op": op, **fields})
        except TesteeFailure as exc:
            return failure_reply(exc)
        except WireError as exc:
            raise DriverError(f"the suite built a bad request for {op}: {exc}") from exc

    def close(self) -> None:
        self.process.close()
