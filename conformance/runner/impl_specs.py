"""The ``--impl`` grammar: one table of implementation kinds, each value parsed once into an
``ImplSpec`` and built into its driver.

A value is a bare name (``reference``) or ``PREFIX:ARGUMENT`` (``exec:./my-testee``). The
kinds, in the order ``--help`` and errors list them:

- ``reference``: this repository's ``reference_impl``; ``reference-v1``: its codec reader in
  the v1-only mode (it refuses every v2 blob; reading operations only); ``upstream``:
  LMCache's own modules;
  ``python:PKG``: any importable package with ``PKG.kv_codec``, ``PKG.protocol``, ``PKG.keys``
  laid out like ``reference_impl`` (all three in this process). These four rows, and the
  parsing and building every row goes through, are drivers/in_process.py's: the testees load
  an in-process implementation from there, below the runner that builds them.
- ``exec:CMD``: a program in any language speaking conformance/TESTEE.md on stdin/stdout,
  resolved and run from the caller's directory (``ExecSettings``); ``c`` / ``c-asan``: the C
  testee of conformance/testees/c, built on first use with the system ``cc`` (``c-asan``
  under AddressSanitizer and UndefinedBehaviorSanitizer).
- protocol servers and clients on a loopback connection: ``reference-server``,
  ``upstream-server``, ``server:CMD`` (a command holding ``{port}``),
  ``server-at:127.0.0.1:PORT``, ``reference-client``, ``upstream-client``.
"""

from __future__ import annotations

import shlex

from ..drivers.base import Driver, DriverError
from ..drivers.exec_driver import ExecSettings
from ..drivers.in_process import (
    PYTHON,
    REFERENCE,
    REFERENCE_V1,
    UPSTREAM,
    ImplKind,
    ImplSpec,
    Where,
    build,
    forms,
    parse_among,
)
from ..drivers.schema_check import with_schema_check
from ..drivers.server_driver import ServerDriver


def _exec(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.exec_driver import ExecDriver

    return ExecDriver(spec.required_argument(), settings, label=spec.text)


def _c_testee(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.exec_driver import ExecDriver
    from ..testees.c.build import BuildError, build_testee

    try:
        binary = build_testee(sanitize=spec.kind.name == "c-asan")
    except BuildError as exc:
        raise DriverError(str(exc)) from exc
    return ExecDriver(shlex.quote(str(binary)), settings, label=spec.text)


def _reference_server(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.server_driver import reference_server

    return reference_server()


def _upstream_server(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.server_driver import upstream_server

    return upstream_server()


def _command_server(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.server_driver import command_server

    return command_server(shlex.split(spec.required_argument()))


def _server_at(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.server_driver import server_at

    host, sep, port = spec.required_argument().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise DriverError("expected server-at:127.0.0.1:PORT")
    return server_at(host, int(port))


def _reference_client(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.client_driver import ReferenceClientDriver

    return ReferenceClientDriver()


def _upstream_client(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.client_driver import upstream_client

    return upstream_client()


#: Every kind of ``--impl`` value: the one table the parser, the builders, ``--help`` and the
#: error message read.
KINDS: tuple[ImplKind, ...] = (
    REFERENCE,
    REFERENCE_V1,
    UPSTREAM,
    ImplKind("c", "c", Where.EXEC, _c_testee),
    ImplKind("c-asan", "c-asan", Where.EXEC, _c_testee),
    PYTHON,
    ImplKind("exec", "exec:CMD", Where.EXEC, _exec),
    ImplKind("reference-server", "reference-server", Where.SERVER, _reference_server),
    ImplKind("upstream-server", "upstream-server", Where.SERVER, _upstream_server),
    ImplKind("server", "server:CMD", Where.SERVER, _command_server),
    ImplKind("server-at", "server-at:127.0.0.1:PORT", Where.SERVER, _server_at),
    ImplKind("reference-client", "reference-client", Where.CLIENT, _reference_client),
    ImplKind("upstream-client", "upstream-client", Where.CLIENT, _upstream_client),
)


def expected_forms() -> str:
    """The forms of every kind, as the error message and ``--help`` list them."""
    return forms(KINDS)


def parse(text: str) -> ImplSpec:
    """The ``ImplSpec`` of one ``--impl`` value; DriverError (``--impl TEXT: ...``) when it
    names no kind, or a ``PREFIX:`` kind without its argument."""
    return parse_among(text, KINDS)


def load_driver(text: str, settings: ExecSettings | None = None) -> Driver:
    """Parse and build one ``--impl`` value. With ``LMCKV_TESTEE_SCHEMA_LOG`` set, its
    exchanges are held to the testee schema (drivers/schema_check.py)."""
    return with_schema_check(build(parse(text), settings))


def load_server(text: str) -> ServerDriver:
    """The protocol server ``text`` names; DriverError for any other kind."""
    spec = parse(text)
    if spec.kind.where is not Where.SERVER:
        raise DriverError(f"--impl {text}: not a server (expected one of the server kinds)")
    driver = build(spec)
    assert isinstance(driver, ServerDriver)
    return driver
