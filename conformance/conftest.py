"""Registers the conformance plugin and the fixtures tests use: a thin re-export of
conformance/runner/pytest_entry.py, which holds the one definition (and which an installed
lmckv also loads through its ``pytest11`` entry point; the hooks run once either way).

pytest imports this file by its path, under a name it derives from the folders
(``conformance.conftest`` in a checkout, whose folders install under ``lmckv``): a relative
import from here would load a second copy of the plugin beside the installed one, so the
plugin module is imported by its installed name.
"""

from __future__ import annotations

import importlib

import pytest

_ENTRY = importlib.import_module("lmckv.conformance.runner.pytest_entry")

client = _ENTRY.client
impl = _ENTRY.impl
pair = _ENTRY.pair
server = _ENTRY.server

__all__ = ["client", "impl", "pair", "server"]


def pytest_addoption(parser: pytest.Parser) -> None:
    _ENTRY.add_options_once(parser)


def pytest_configure(config: pytest.Config) -> None:
    _ENTRY.start_plugin(config)
