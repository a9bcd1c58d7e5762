"""The ``--impl`` grammar: one table of implementation kinds, each value parsed once into an
``ImplSpec`` and built into its driver here.

A value is a bare name (``reference``) or ``PREFIX:ARGUMENT`` (``exec:./my-testee``). The
kinds, in the order ``--help`` and errors list them:

- ``reference``: this repository's ``reference_impl``; ``reference-v1``: its codec reader in
  the v1-only mode (it refuses every v2 blob; reading operations only); ``upstream``:
  LMCache's own modules;
  ``python:PKG``: any importable package with ``PKG.kv_codec``, ``PKG.protocol``, ``PKG.keys``
  laid out like ``reference_impl`` (all three in this process).
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
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from ..drivers.base import Driver, DriverError
from ..drivers.exec_driver import ExecSettings
from ..drivers.python_driver import PythonDriver
from ..drivers.schema_check import with_schema_check
from ..drivers.server_driver import ServerDriver


class Where(Enum):
    """Where an implementation runs, relative to the suite."""

    IN_PROCESS = "in-process"
    EXEC = "exec"
    SERVER = "server"
    CLIENT = "client"


@dataclass(frozen=True)
class ImplKind:
    """One row of the table: how the kind is written and what it builds."""

    name: str
    #: How a value of this kind is written, as help and errors show it (``python:PKG``).
    form: str
    where: Where
    build: Callable[[ImplSpec, ExecSettings | None], Driver]

    @property
    def takes_argument(self) -> bool:
        return ":" in self.form


@dataclass(frozen=True)
class ImplSpec:
    """One parsed ``--impl`` value: its kind and the text after ``PREFIX:`` (None for a bare
    name)."""

    text: str
    kind: ImplKind
    argument: str | None


def _reference(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.python_driver import load_package

    return load_package("lmckv.reference_impl", name="reference")


def _reference_v1(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.v1_reader import reference_v1

    return reference_v1()


def _upstream(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.upstream_driver import load_upstream

    return load_upstream()


def _python(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.python_driver import load_package

    return load_package(_argument(spec))


def _exec(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.exec_driver import ExecDriver

    return ExecDriver(_argument(spec), settings, label=spec.text)


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

    return command_server(shlex.split(_argument(spec)))


def _server_at(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from ..drivers.server_driver import server_at

    host, sep, port = _argument(spec).rpartition(":")
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
    ImplKind("reference", "reference", Where.IN_PROCESS, _reference),
    ImplKind("reference-v1", "reference-v1", Where.IN_PROCESS, _reference_v1),
    ImplKind("upstream", "upstream", Where.IN_PROCESS, _upstream),
    ImplKind("c", "c", Where.EXEC, _c_testee),
    ImplKind("c-asan", "c-asan", Where.EXEC, _c_testee),
    ImplKind("python", "python:PKG", Where.IN_PROCESS, _python),
    ImplKind("exec", "exec:CMD", Where.EXEC, _exec),
    ImplKind("reference-server", "reference-server", Where.SERVER, _reference_server),
    ImplKind("upstream-server", "upstream-server", Where.SERVER, _upstream_server),
    ImplKind("server", "server:CMD", Where.SERVER, _command_server),
    ImplKind("server-at", "server-at:127.0.0.1:PORT", Where.SERVER, _server_at),
    ImplKind("reference-client", "reference-client", Where.CLIENT, _reference_client),
    ImplKind("upstream-client", "upstream-client", Where.CLIENT, _upstream_client),
)
_BY_NAME = {kind.name: kind for kind in KINDS}


def _argument(spec: ImplSpec) -> str:
    assert spec.argument is not None, "the parser gives every PREFIX: kind its argument"
    return spec.argument


def expected_forms() -> str:
    """The forms of every kind, as the error message and ``--help`` list them."""
    return ", ".join(kind.form for kind in KINDS)


def parse(text: str) -> ImplSpec:
    """The ``ImplSpec`` of one ``--impl`` value; DriverError (``--impl TEXT: ...``) when it
    names no kind, or a ``PREFIX:`` kind without its argument."""
    kind = _BY_NAME.get(text)
    if kind is not None and not kind.takes_argument:
        return ImplSpec(text, kind, None)
    prefix, sep, argument = text.partition(":")
    kind = _BY_NAME.get(prefix)
    if sep and kind is not None and kind.takes_argument:
        if not argument.strip():
            raise DriverError(
                f"--impl {text!r}: {kind.form} needs its {kind.form.partition(':')[2]}"
            )
        return ImplSpec(text, kind, argument)
    raise DriverError(f"--impl {text!r}: expected {expected_forms()}")


def build(spec: ImplSpec, settings: ExecSettings | None = None) -> Driver:
    """The driver ``spec`` names (``settings``: how exec testees run); DriverError, in one line
    starting with ``--impl TEXT:``, when it cannot be built."""
    try:
        return spec.kind.build(spec, settings)
    except DriverError as exc:
        message = str(exc)
        if message.startswith("--impl "):
            raise
        raise DriverError(f"--impl {spec.text}: {message}") from exc
    except ImportError as exc:
        raise DriverError(f"--impl {spec.text}: cannot import it: {exc}") from exc


def load_driver(text: str, settings: ExecSettings | None = None) -> Driver:
    """Parse and build one ``--impl`` value. With ``LMCKV_TESTEE_SCHEMA_LOG`` set, its
    exchanges are held to the testee schema (drivers/schema_check.py)."""
    return with_schema_check(build(parse(text), settings))


def load_in_process(text: str) -> PythonDriver:
    """The in-process implementation ``text`` names (``reference``, ``upstream``,
    ``python:PKG``); DriverError for any other kind."""
    spec = parse(text)
    if spec.kind.where is not Where.IN_PROCESS:
        raise DriverError(f"--impl {text}: not an in-process implementation")
    driver = build(spec)
    assert isinstance(driver, PythonDriver)
    return driver


def load_server(text: str) -> ServerDriver:
    """The protocol server ``text`` names; DriverError for any other kind."""
    spec = parse(text)
    if spec.kind.where is not Where.SERVER:
        raise DriverError(f"--impl {text}: not a server (expected one of the server kinds)")
    driver = build(spec)
    assert isinstance(driver, ServerDriver)
    return driver
