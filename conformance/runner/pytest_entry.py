"""The conformance suite's pytest hooks and fixtures, in one place.

Two ways load this module, and either may come first:

* the ``pytest11`` entry point ``lmckv`` of an installed lmckv, so that
  ``pytest --pyargs conformance --impl reference`` knows ``--impl`` from any folder;
* ``conformance/conftest.py``, which re-exports it (a checkout without an installed lmckv,
  or ``-p no:lmckv``).

The hooks guard against running twice: options are added once, and the plugin object is
registered once. Loaded through the entry point into a pytest run of some other project,
the module only adds its options and the ``rule`` marker: the conformance plugin starts when
``--impl`` is given or when the suite's conftest loads.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest

from .options import add_options

if TYPE_CHECKING:
    from ..drivers import Driver
    from ..drivers.client_driver import ClientDriver
    from ..drivers.server_driver import ServerDriver

# The plugin (and torch, which the drivers import) load only when the suite runs, so that an
# installed lmckv costs other projects' pytest runs nothing.

#: The name the ``pytest11`` entry point registers this module under (``-p no:lmckv``).
ENTRY_POINT_NAME = "lmckv"
_OPTIONS_ADDED = "_lmckv_conformance_options"


def _this_module() -> object:
    return sys.modules[__name__]


def loaded_by_entry_point(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Whether the entry point registered this module (the conftest then stays passive)."""
    return pluginmanager.get_plugin(ENTRY_POINT_NAME) is _this_module()


def add_options_once(parser: pytest.Parser) -> None:
    if getattr(parser, _OPTIONS_ADDED, False):
        return
    setattr(parser, _OPTIONS_ADDED, True)
    add_options(parser)


def _add_markers(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rule(id): the SPEC rule a conformance test checks")
    config.addinivalue_line(
        "markers", "vector_set(name): the golden vector set (v1, v2) a codec read test reads"
    )


def start_plugin(config: pytest.Config) -> None:
    """Register the conformance plugin for this run, unless it already is."""
    from .plugin import PLUGIN_NAME, ConformancePlugin

    _add_markers(config)
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(ConformancePlugin(config), PLUGIN_NAME)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options_once(parser)


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("impl"):
        start_plugin(config)
    else:
        _add_markers(config)


@pytest.fixture
def impl(request: pytest.FixtureRequest) -> Driver:
    """The implementation under test (parametrized over --impl)."""
    from .plugin import get_plugin

    return get_plugin(request.config).drivers[request.param]


@pytest.fixture
def pair(request: pytest.FixtureRequest) -> tuple[Driver, Driver]:
    """(producer, consumer) of the producer x consumer matrix."""
    from .plugin import get_plugin

    drivers = get_plugin(request.config).drivers
    producer, consumer = request.param
    return drivers[producer], drivers[consumer]


@pytest.fixture
def server(request: pytest.FixtureRequest) -> ServerDriver:
    """A running server under test (parametrized over the server --impl values; started on
    first use in this process)."""
    from ..drivers.server_driver import ServerDriver
    from .plugin import get_plugin

    driver = get_plugin(request.config).drivers[request.param]
    assert isinstance(driver, ServerDriver)
    if driver.absent is not None:
        pytest.skip(f"{driver.name}: {driver.absent}")
    driver.address  # noqa: B018 - starts it
    return driver


@pytest.fixture
def client(request: pytest.FixtureRequest) -> ClientDriver:
    """A client implementation under test (parametrized over the client --impl values)."""
    from ..drivers.client_driver import ClientDriver
    from .plugin import get_plugin

    driver = get_plugin(request.config).drivers[request.param]
    assert isinstance(driver, ClientDriver)
    if driver.absent is not None:
        pytest.skip(f"{driver.name}: {driver.absent}")
    return driver
