"""Fixtures of the protocol-on-a-connection tests: ``server`` and ``client``, parametrized
by the plugin over the --impl values of those kinds (conformance/runner/plugin.py)."""

from __future__ import annotations

import pytest

from conformance.drivers.client_driver import ClientDriver
from conformance.drivers.server_driver import ServerDriver
from conformance.runner.plugin import get_plugin


@pytest.fixture
def server(request: pytest.FixtureRequest) -> ServerDriver:
    """A running server under test (started on first use in this process)."""
    driver = get_plugin(request.config).drivers[request.param]
    assert isinstance(driver, ServerDriver)
    driver.address  # noqa: B018 - starts it
    return driver


@pytest.fixture
def client(request: pytest.FixtureRequest) -> ClientDriver:
    """A client implementation under test."""
    driver = get_plugin(request.config).drivers[request.param]
    assert isinstance(driver, ClientDriver)
    return driver
