"""The in-process kinds of ``--impl`` and the machinery every kind is parsed and built by.

runner/impl_specs.py holds the one table of every kind (``KINDS``: these four, then the ones
that run a program, a server or a client) and parses ``--impl`` values from it. The pieces
below it live here, in the drivers' layer, so that a testee program can load an in-process
implementation (``load_in_process``) without the runner, which builds the testees
(testees/python_testee.py; the runner builds testees/c).

- ``reference``: this repository's ``reference_impl``; ``reference-v1``: its codec reader in
  the v1-only mode (it refuses every v2 blob; reading operations only); ``upstream``:
  LMCache's own modules; ``python:PKG``: any importable package with ``PKG.kv_codec``,
  ``PKG.protocol``, ``PKG.keys`` laid out like ``reference_impl`` (all in this process).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from .base import Driver, DriverError
from .exec_driver import ExecSettings
from .python_driver import PythonDriver


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

    def required_argument(self) -> str:
        """The text after ``PREFIX:`` of a kind that takes one."""
        assert self.argument is not None, "the parser gives every PREFIX: kind its argument"
        return self.argument


def forms(kinds: Sequence[ImplKind]) -> str:
    """The forms of ``kinds``, as the error message and ``--help`` list them."""
    return ", ".join(kind.form for kind in kinds)


def parse_among(text: str, kinds: Sequence[ImplKind]) -> ImplSpec:
    """The ``ImplSpec`` of one value, a kind of ``kinds``; DriverError (``--impl TEXT: ...``)
    when it names none of them, or a ``PREFIX:`` kind without its argument."""
    by_name = {kind.name: kind for kind in kinds}
    kind = by_name.get(text)
    if kind is not None and not kind.takes_argument:
        return ImplSpec(text, kind, None)
    prefix, sep, argument = text.partition(":")
    kind = by_name.get(prefix)
    if sep and kind is not None and kind.takes_argument:
        if not argument.strip():
            raise DriverError(
                f"--impl {text!r}: {kind.form} needs its {kind.form.partition(':')[2]}"
            )
        return ImplSpec(text, kind, argument)
    raise DriverError(f"--impl {text!r}: expected {forms(kinds)}")


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


def _reference(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from .python_driver import load_package

    return load_package("lmckv.reference_impl", name="reference")


def _reference_v1(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from .v1_reader import reference_v1

    return reference_v1()


def _upstream(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from .upstream_driver import load_upstream

    return load_upstream()


def _python(spec: ImplSpec, settings: ExecSettings | None) -> Driver:
    from .python_driver import load_package

    return load_package(spec.required_argument())


REFERENCE = ImplKind("reference", "reference", Where.IN_PROCESS, _reference)
REFERENCE_V1 = ImplKind("reference-v1", "reference-v1", Where.IN_PROCESS, _reference_v1)
UPSTREAM = ImplKind("upstream", "upstream", Where.IN_PROCESS, _upstream)
PYTHON = ImplKind("python", "python:PKG", Where.IN_PROCESS, _python)
#: The in-process kinds: the rows of impl_specs' ``KINDS`` that run in this process.
IN_PROCESS_KINDS: tuple[ImplKind, ...] = (REFERENCE, REFERENCE_V1, UPSTREAM, PYTHON)


def load_in_process(text: str) -> PythonDriver:
    """The in-process implementation ``text`` names (``reference``, ``reference-v1``,
    ``upstream``, ``python:PKG``); DriverError for any other value."""
    driver = build(parse_among(text, IN_PROCESS_KINDS))
    assert isinstance(driver, PythonDriver)
    return driver
