"""Registers the conformance plugin and the fixtures tests use: a thin re-export of
conformance/runner/pytest_entry.py, which holds the one definition (and which an installed
lmckv also loads through its ``pytest11`` entry point; the hooks run once either way)."""

from __future__ import annotations

import pytest

from lmckv.conformance.runner.pytest_entry import (
    add_options_once,
    client,
    impl,
    pair,
    server,
    start_plugin,
)

__all__ = ["client", "impl", "pair", "server"]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options_once(parser)


def pytest_configure(config: pytest.Config) -> None:
    start_plugin(config)
