"""The server and client conformance tests on the reference server and client, run as a
subprocess suite: every test passes, the codec tests do not run for socket
implementations (nor the socket tests for codec ones), and nothing is left behind: every
server the suite started has exited and its port is free again."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pytest

from lmckv.conformance.drivers.base import DriverError
from lmckv.conformance.drivers.server_driver import require_loopback
from lmckv.conformance.runner.impl_specs import load_server
from lmckv.conformance.runner.subprocess_suite import run_suite


def _port_free(port: int) -> bool:
    """Nothing listens on the port (connections in TIME_WAIT may remain)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            return False
    return True


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] == "Z"


def test_reference_server_and_client_pass_and_leave_nothing_behind() -> None:
    with tempfile.TemporaryDirectory(prefix="lmckv-sockets-") as tmp:
        log = Path(tmp) / "servers.txt"
        run = run_suite(
            ["reference-server", "reference-client"],
            "-n",
            "2",
            env={"LMCKV_SERVER_LOG": str(log)},
            timeout=300,
        )
        started = [tuple(map(int, line.split())) for line in log.read_text().splitlines()]
    assert run.returncode == 0, run.output[-3000:]
    outcomes = run.outcomes()
    assert outcomes and set(outcomes.values()) == {"pass"}, run.output[-3000:]
    files = {node.split("::")[0].rsplit("/", 1)[-1] for node in outcomes}
    assert files == {"test_server.py", "test_client.py"}, files
    assert started, "no server was started"
    for pid, port in started:
        assert _pid_gone(pid), f"server pid {pid} still running after the suite"
        assert _port_free(port), f"port {port} still taken after the suite"


def test_codec_run_has_no_socket_tests() -> None:
    run = run_suite(["reference"], "conformance/suite/test_protocol.py", timeout=300)
    assert run.returncode == 0, run.output[-2000:]
    assert not [n for n in run.outcomes() if "test_server" in n or "test_client" in n]


@pytest.mark.parametrize(
    "spec",
    ["server-at:10.0.0.1:80", "server-at:example.com:80", "server-at:127.0.0.1:0", "server:true"],
)
def test_socket_specs_refused(spec: str) -> None:
    """Only loopback addresses; a started server's command names {port}."""
    with pytest.raises(DriverError):
        load_server(spec)


def test_loopback_addresses_accepted() -> None:
    assert require_loopback("127.0.0.1") == "127.0.0.1"
    assert require_loopback("::1") == "::1"
    driver = load_server("server-at:127.0.0.1:5555")
    assert driver is not None and driver.address == ("127.0.0.1", 5555)
    driver.close()
