"""A TESTEE.md testee over any Python implementation, for checking the exec path itself.

    python -m lmckv.conformance.testees.python_testee reference
    python -m lmckv.conformance.testees.python_testee upstream --only codec.parse,codec.decode

It answers hello with the name ``<impl>-exec`` and the implementation's capabilities
(or only those given with ``--only``), then serves one JSON line per request until stdin
closes. Requests for undeclared operations get ``UnsupportedOperation``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..core.wire import PROTOCOL_VERSION, WireError, dumps_line, loads_line
from ..drivers.base import DriverError
from ..drivers.in_process import load_in_process


def serve(spec: str, only: list[str] | None) -> int:
    try:
        driver = load_in_process(spec)
    except DriverError as exc:
        print(exc, file=sys.stderr)
        return 2
    caps = [c for c in driver.info.capabilities if only is None or c in only]
    for raw in sys.stdin:
        try:
            request = loads_line(raw)
        except WireError as exc:
            print(f"bad request line: {exc}", file=sys.stderr)
            return 2
        rid = request.pop("id", None)
        op = request.pop("op", None)
        reply: dict[str, Any]
        if op == "hello":
            reply = {
                "ok": True,
                "name": f"{driver.name}-exec",
                "version": driver.info.version,
                "protocol": PROTOCOL_VERSION,
                "capabilities": caps,
            }
        elif op not in caps:
            reply = {"ok": False, "error": "UnsupportedOperation", "message": str(op)}
        else:
            reply = driver.call(op, **request)
        sys.stdout.write(dumps_line({"id": rid, **reply}))
        sys.stdout.flush()
    driver.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("impl", help="reference, upstream or python:PKG")
    parser.add_argument("--only", help="comma-separated capabilities to declare")
    args = parser.parse_args(argv)
    return serve(args.impl, args.only.split(",") if args.only else None)


if __name__ == "__main__":
    sys.exit(main())
