"""The suite's command-line options (conformance/README.md, "Options"), and the few things
``lmckv conformance`` adds to pytest's parser (``CommandLine``)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from ..drivers.exec_driver import DEFAULT_MAX_FAILURES, DEFAULT_TIMEOUT

#: ``lmckv conformance``'s name in usage errors and help.
COMMAND = "lmckv conformance"
#: What each exit status of ``lmckv conformance`` means (also its --help epilog).
EXIT_STATUS_HELP = (
    "Exit status: 0 every outcome as expected (passes, skips, listed known failures); "
    "1 an unexpected outcome (a failure, an unexpected pass of a listed test, a stale "
    "known-failure line, a testee that stopped answering); 2 a usage or setup error (bad "
    "option or --impl, a testee that cannot start or says no valid hello, an internal "
    "error, no tests collected)."
)


def add_options(parser: pytest.Parser) -> None:
    """Register the suite's options: ``--impl``, ``--level``, the outputs and the exec
    testee settings."""
    group = parser.getgroup("lmckv conformance")
    group.addoption(
        "--impl",
        action="append",
        default=[],
        metavar="SPEC",
        help="implementation under test (repeatable): reference, upstream, python:PKG, "
        "c, c-asan, exec:CMD; servers: reference-server, upstream-server, server:CMD, "
        "server-at:127.0.0.1:PORT; clients: reference-client, upstream-client "
        "(default: reference). exec:CMD is resolved from the current directory like a "
        "shell would, and runs there",
    )
    group.addoption(
        "--level",
        choices=["MUST", "SHOULD"],
        default=None,
        help="run only the tests of this level",
    )
    group.addoption("--results-json", metavar="PATH", help="write the results file here")
    group.addoption(
        "--summary-md",
        metavar="PATH",
        help="write a Markdown summary here (for a CI job summary, e.g. $GITHUB_STEP_SUMMARY)",
    )
    group.addoption(
        "--draft-expectations",
        metavar="DIR",
        help="write <impl>.txt drafts listing every failing test with its failure message",
    )
    group.addoption(
        "--update-expectations",
        action="store_true",
        default=False,
        help="rewrite the observations of the listed known failures that still fail (a "
        "changed failure then passes as known); never adds or removes a line",
    )
    group.addoption(
        "--known-failures",
        action="append",
        default=[],
        metavar="[IMPL=]FILE",
        help="apply the known-failure list FILE to IMPL (default: upstream) instead of the "
        "one its name and version choose (repeatable)",
    )
    group.addoption(
        "--testee-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds an exec testee may take to answer one request (default: "
        f"$LMCKV_TESTEE_TIMEOUT, else {DEFAULT_TIMEOUT:g})",
    )
    group.addoption(
        "--testee-max-failures",
        type=int,
        default=DEFAULT_MAX_FAILURES,
        metavar="N",
        help="after N consecutive crashes, timeouts or over-size replies of an exec testee, "
        "end its remaining "
        f"tests at once as errors; 0 never gives up (default: {DEFAULT_MAX_FAILURES})",
    )
    group.addoption(
        "--transcript",
        metavar="FILE",
        help="record every request to and reply from exec testees in FILE (JSON Lines)",
    )


def testee_timeout(config: pytest.Config) -> float:
    """--testee-timeout, else $LMCKV_TESTEE_TIMEOUT, else the default; UsageError when not
    a positive number."""
    value: Any = config.getoption("testee_timeout")
    source = "--testee-timeout"
    if value is None:
        source = "$LMCKV_TESTEE_TIMEOUT"
        value = os.environ.get("LMCKV_TESTEE_TIMEOUT", DEFAULT_TIMEOUT)
    try:
        seconds = float(value)
    except ValueError:
        raise pytest.UsageError(f"{source}: not a number: {value!r}") from None
    if not seconds > 0:
        raise pytest.UsageError(f"{source}: must be positive, got {value!r}")
    return seconds


class CommandLine:
    """The plugin ``lmckv conformance`` passes to pytest: its name in usage errors and help,
    the exit statuses in the help epilog, and ``--out`` in the help (the command itself
    takes --out out of the arguments before pytest sees them)."""

    def pytest_addoption(self, parser: pytest.Parser) -> None:
        parser.prog = COMMAND
        parser.optparser.usage = f"{COMMAND} [--impl SPEC]... [--out DIR] [pytest options]"
        parser.optparser.epilog = EXIT_STATUS_HELP
        parser.getgroup("lmckv conformance").addoption(
            "--out",
            dest="lmckv_out",
            metavar="DIR",
            help="write junit.xml, results.json and summary.md into DIR (default: "
            "./lmckv-conformance under the current directory)",
        )


def in_command(config: pytest.Config) -> bool:
    """The run was started by ``lmckv conformance``."""
    return any(isinstance(p, CommandLine) for p in config.pluginmanager.get_plugins())
