"""Hold every exchange of a run to the testee schema (schemas/testee.schema.json).

With the environment variable ``LMCKV_TESTEE_SCHEMA_LOG`` set to a file, ``load_driver``
wraps each codec driver (in-process or exec) in :class:`SchemaCheckedDriver`: every request
the suite sends and every reply it gets are put in their wire form (wire.to_wire, as an exec
testee sees them) and validated as one exchange. In-process drivers are thereby held to the
same shapes as exec testees. When the driver closes, one JSON line is appended to the log:
``{"impl", "pid", "validated", "violations", "first_violations"}`` (each pytest-xdist worker
writes its own). Validation never changes an outcome. ``python -m
lmckv.conformance.drivers.schema_check LOG --impl NAME... [--min N]`` reads a log: exit 0
when it holds no violation and every named implementation validated at least N exchanges
(``nox -s tests`` runs the suite's reference, upstream and C testee runs this way).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmckv.base.schemas import SchemaError, validate

from ..core.operations import OPS
from ..core.wire import PROTOCOL_VERSION, WireError, to_wire
from .base import Driver

ENV = "LMCKV_TESTEE_SCHEMA_LOG"
#: How many violations the log line quotes.
QUOTED = 20


class SchemaCheckedDriver(Driver):
    """``inner`` with every exchange validated against the testee schema; anything else
    is the inner driver's."""

    def __init__(self, inner: Driver, log: Path) -> None:
        self.inner = inner
        self.info = inner.info
        self.log = log
        self.validated = 0
        self.violations: list[str] = []
        self._next_id = 1
        hello = getattr(inner, "process", None)
        hello_reply = getattr(hello, "hello_reply", None)
        if isinstance(hello_reply, dict):  # an exec testee's first hello
            request = {"id": 1, "op": "hello", "protocol": PROTOCOL_VERSION}
            self._check("hello", request, {"id": 1, **hello_reply})

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def supports(self, capability: str) -> bool:
        return self.inner.supports(capability)

    def unsupported_reason(self, capability: str) -> str:
        return self.inner.unsupported_reason(capability)

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        reply = self.inner.call(op, **fields)
        if op in OPS:
            ident = self._next_id
            self._next_id += 1
            self._check(op, {"id": ident, "op": op, **fields}, {"id": ident, **reply})
        return reply

    def _check(self, op: str, request: dict[str, Any], reply: dict[str, Any]) -> None:
        try:
            validate({"request": to_wire(request), "reply": to_wire(reply)}, "testee")
        except (SchemaError, WireError, TypeError, AttributeError) as exc:
            self.violations.append(f"{op}: {exc}")
        self.validated += 1

    def close(self) -> None:
        line = {
            "impl": self.name,
            "pid": os.getpid(),
            "validated": self.validated,
            "violations": len(self.violations),
            "first_violations": self.violations[:QUOTED],
        }
        data = (json.dumps(line) + "\n").encode("utf-8")
        fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self.inner.close()


def with_schema_check(driver: Driver) -> Driver:
    """``driver`` wrapped when ``LMCKV_TESTEE_SCHEMA_LOG`` names a log and it answers
    operations (servers and clients of the socket tests answer none); else itself."""
    log = os.environ.get(ENV)
    if not log or driver.info.kind in ("server", "client"):
        return driver
    return SchemaCheckedDriver(driver, Path(log))


def tally(log: Path) -> tuple[dict[str, int], list[str]]:
    """(exchanges validated per implementation, the quoted violations) of a log."""
    validated: dict[str, int] = {}
    violations: list[str] = []
    for text in log.read_text(encoding="utf-8").splitlines():
        line = json.loads(text)
        validated[line["impl"]] = validated.get(line["impl"], 0) + line["validated"]
        violations += [f"{line['impl']}: {v}" for v in line["first_violations"]]
        if line["violations"] > len(line["first_violations"]):
            violations.append(f"{line['impl']}: {line['violations']} violations in all")
    return validated, violations


def main(argv: Sequence[str] | None = None) -> int:
    """Check a log: 0 clean, 1 a violation or an implementation with too few exchanges."""
    parser = argparse.ArgumentParser(prog="python -m lmckv.conformance.drivers.schema_check")
    parser.add_argument("log", type=Path)
    parser.add_argument("--impl", action="append", default=[], help="must appear (repeat)")
    parser.add_argument("--min", type=int, default=1, help="exchanges each must have (1)")
    args = parser.parse_args(argv)
    validated, violations = tally(args.log)
    short = {name: validated.get(name, 0) for name in args.impl}
    short = {name: n for name, n in short.items() if n < args.min}
    for violation in violations:
        print(f"violation: {violation}")
    for name, n in short.items():
        print(f"{name}: {n} exchanges validated, fewer than {args.min}")
    counts = ", ".join(f"{name} {n}" for name, n in sorted(validated.items()))
    print(f"testee schema: {counts}; {len(violations)} violations")
    return 1 if violations or short else 0


if __name__ == "__main__":
    sys.exit(main())
