"""The suite's command-line options (conformance/README.md, "Options")."""

from __future__ import annotations

import pytest


def add_options(parser: pytest.Parser) -> None:
    """Register ``--impl``, ``--level``, ``--results-json`` and ``--draft-expectations``."""
    group = parser.getgroup("lmckv conformance")
    group.addoption(
        "--impl",
        action="append",
        default=[],
        metavar="SPEC",
        help="implementation under test (repeatable): reference, upstream, python:PKG, "
        "exec:CMD, c, c-asan; servers: reference-server, upstream-server, server:CMD, "
        "server-at:127.0.0.1:PORT; clients: reference-client, upstream-client "
        "(default: reference)",
    )
    group.addoption(
        "--level",
        choices=["MUST", "SHOULD"],
        default=None,
        help="run only the tests of this level",
    )
    group.addoption("--results-json", metavar="PATH", help="write the results file here")
    group.addoption(
        "--draft-expectations",
        metavar="DIR",
        help="write <impl>.txt drafts listing every failing test with its failure message",
    )
