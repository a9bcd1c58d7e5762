"""The ``--impl`` values: which driver each one builds.

- ``reference``: this repository's ``reference_impl``.
- ``upstream``: LMCache's own modules (lmcache 0.5.6).
- ``python:PKG``: any importable package with ``PKG.kv_codec``, ``PKG.protocol``,
  ``PKG.keys`` laid out like ``reference_impl``.
- ``exec:CMD``: a program in any language speaking conformance/TESTEE.md on stdin/stdout,
  resolved and run from the caller's directory (``ExecSettings``).
- ``c`` / ``c-asan``: the C testee of conformance/testees/c, built on first use with the
  system ``cc`` (``c-asan`` with AddressSanitizer and UndefinedBehaviorSanitizer).
- servers and clients of the protocol on a connection: ``reference-server``,
  ``upstream-server``, ``server:CMD``, ``server-at:127.0.0.1:PORT``, ``reference-client``,
  ``upstream-client`` (conformance/drivers/server_driver.py and client_driver.py).
"""

from __future__ import annotations

import shlex

from lmckv.conformance.drivers.base import Driver, DriverError
from lmckv.conformance.drivers.exec_driver import ExecSettings
from lmckv.conformance.drivers.in_process import load_in_process
from lmckv.conformance.drivers.schema_check import with_schema_check


def load_driver(spec: str, settings: ExecSettings | None = None) -> Driver:
    """Build the driver an ``--impl`` value names (``settings``: how exec testees run);
    DriverError says why it cannot, in one line starting with ``--impl SPEC:``. With
    ``LMCKV_TESTEE_SCHEMA_LOG`` set, its exchanges are held to the testee schema
    (drivers/schema_check.py)."""
    return with_schema_check(_build_driver(spec, settings))


def _build_driver(spec: str, settings: ExecSettings | None) -> Driver:
    try:
        driver = load_in_process(spec)
        if driver is not None:
            return driver
        if spec.endswith(("-server", "-client")) or spec.startswith(("server:", "server-at:")):
            from lmckv.conformance.drivers.client_driver import load_client
            from lmckv.conformance.drivers.server_driver import load_server

            socket_driver = load_server(spec) or load_client(spec)
            if socket_driver is not None:
                return socket_driver
        if spec.startswith("exec:"):
            from lmckv.conformance.drivers.exec_driver import ExecDriver

            return ExecDriver(spec.removeprefix("exec:"), settings, label=spec)
        if spec in ("c", "c-asan"):
            from lmckv.conformance.drivers.exec_driver import ExecDriver
            from lmckv.conformance.testees.c.build import BuildError, build_testee

            try:
                binary = build_testee(sanitize=spec == "c-asan")
            except BuildError as exc:
                raise DriverError(f"--impl {spec}: {exc}") from exc
            return ExecDriver(shlex.quote(str(binary)), settings, label=spec)
    except ImportError as exc:
        raise DriverError(f"--impl {spec}: cannot import it: {exc}") from exc
    raise DriverError(
        f"--impl {spec!r}: expected reference, upstream, c, c-asan, python:PKG, exec:CMD, "
        "reference-server, upstream-server, server:CMD, server-at:127.0.0.1:PORT, "
        "reference-client or upstream-client"
    )
