"""Registers the conformance plugin and the fixtures tests use (see runner/plugin.py)."""

from __future__ import annotations

import pytest

from conformance.drivers import Driver
from conformance.drivers.client_driver import ClientDriver
from conformance.drivers.server_driver import ServerDriver
from conformance.runner.options import add_options
from conformance.runner.plugin import PLUGIN_NAME, ConformancePlugin, get_plugin


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rule(id): the SPEC rule a conformance test checks")
    config.pluginmanager.register(ConformancePlugin(config), PLUGIN_NAME)


@pytest.fixture
def impl(request: pytest.FixtureRequest) -> Driver:
    """The implementation under test (parametrized over --impl)."""
    return get_plugin(request.config).drivers[request.param]


@pytest.fixture
def pair(request: pytest.FixtureRequest) -> tuple[Driver, Driver]:
    """(producer, consumer) of the producer x consumer matrix."""
    drivers = get_plugin(request.config).drivers
    producer, consumer = request.param
    return drivers[producer], drivers[consumer]


@pytest.fixture
def server(request: pytest.FixtureRequest) -> ServerDriver:
    """A running server under test (parametrized over the server --impl values; started on
    first use in this process)."""
    driver = get_plugin(request.config).drivers[request.param]
    assert isinstance(driver, ServerDriver)
    driver.address  # noqa: B018 - starts it
    return driver


@pytest.fixture
def client(request: pytest.FixtureRequest) -> ClientDriver:
    """A client implementation under test (parametrized over the client --impl values)."""
    driver = get_plugin(request.config).drivers[request.param]
    assert isinstance(driver, ClientDriver)
    return driver
