"""The harness owns its children (TESTEE.md): a testee behind a shell wrapper that does not
``exec`` its program, whose program hangs, leaves no process behind when the testee times
out, when a conformance run stops at its first failure (``-x``), and when the run is sent
SIGTERM or SIGINT. Also the other bounds a testee cannot stretch: its stderr, a reply line,
and the circuit breaker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lmckv.conformance.core.testee_process import (
    STDERR_KEEP,
    FailureKind,
    TesteeFailure,
    TesteeProcess,
)
from lmckv.conformance.drivers.exec_driver import ExecDriver, ExecSettings
from lmckv.conformance.runner.subprocess_suite import REPO

PY = sys.executable

# The real testee: records its pid, says hello, then hangs on every request (or, with
# ANSWER_ONCE, answers one request per process and then dies).
CHILD = """\
import json, os, sys, time
piddir, mode = sys.argv[1], sys.argv[2]
open(os.path.join(piddir, str(os.getpid())), "w").close()
hello = json.loads(sys.stdin.readline())
print(json.dumps({"id": hello["id"], "ok": True, "name": "wrapped", "version": None,
                  "protocol": 1, "capabilities": ["codec.parse"]}), flush=True)
if mode == "answer-once":
    req = json.loads(sys.stdin.readline())
    print(json.dumps({"id": req["id"], "ok": False, "error": "raw:nope"}), flush=True)
    sys.stdin.readline()
    sys.exit(3)
if mode == "spew":
    sys.stdin.readline()
    sys.stderr.write("x" * (4 << 20) + "LAST WORDS")
    sys.stderr.flush()
    sys.exit(3)
if mode == "long-line":
    sys.stdin.readline()
    while True:
        sys.stdout.write("y" * (1 << 20))
time.sleep(3600)
"""


def _wrapper(tmp_path: Path, mode: str = "hang") -> tuple[Path, Path]:
    """``wrap.sh``: runs the child without ``exec`` (a command follows it), so the shell
    stays the testee's process and the child its child. Returns it and the pid folder."""
    piddir = tmp_path / "pids"
    piddir.mkdir(exist_ok=True)
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    wrap = tmp_path / "wrap.sh"
    wrap.write_text(f"#!/bin/sh\n{PY} {child} {piddir} {mode}\necho wrapper done >&2\n")
    wrap.chmod(0o755)
    return wrap, piddir


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _left(piddir: Path, wait: float = 5.0) -> list[int]:
    """The recorded pids still alive after up to ``wait`` seconds."""
    pids = [int(p.name) for p in piddir.iterdir()]
    deadline = time.monotonic() + wait
    while (alive := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def _suite_cmd(wrap: Path, *args: str) -> list[str]:
    return [
        PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "no:xdist",
        str(REPO / "conformance"), "--impl", f"exec:{wrap}", "-k", "test_codec", *args,
    ]  # fmt: skip


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def test_timeout_kills_the_wrappers_child(tmp_path: Path) -> None:
    wrap, piddir = _wrapper(tmp_path)
    with TesteeProcess([str(wrap)], timeout=1, hello=True) as process:
        with pytest.raises(TesteeFailure) as caught:
            process.call({"op": "codec.parse", "blob": b"\0"})
        assert caught.value.kind is FailureKind.TIMEOUT
        assert piddir.iterdir(), "the child never started"
        assert _left(piddir) == [], "the wrapper's child outlived the timeout"


def test_run_with_x_leaves_no_process(tmp_path: Path) -> None:
    wrap, piddir = _wrapper(tmp_path)
    cmd = _suite_cmd(wrap, "-x", "--testee-timeout", "1")
    done = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, timeout=180)
    assert done.returncode != 0 and list(piddir.iterdir()), done.stdout[-2000:]
    assert _left(piddir) == [], "a testee's child outlived the -x run"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signalled_run_leaves_no_process(tmp_path: Path, signum: int) -> None:
    wrap, piddir = _wrapper(tmp_path)
    cmd = _suite_cmd(wrap, "--testee-timeout", "600")
    run = subprocess.Popen(
        cmd, cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while not list(piddir.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert list(piddir.iterdir()), "the testee never started"
        time.sleep(1.0)  # the first request is sent and hangs
        run.send_signal(signum)
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert _left(piddir) == [], f"a testee's child outlived {signal.Signals(signum).name}"


def test_stderr_is_kept_within_a_fixed_size(tmp_path: Path) -> None:
    wrap, _ = _wrapper(tmp_path, "spew")
    with TesteeProcess([str(wrap)], timeout=10, hello=True) as process:
        with pytest.raises(TesteeFailure) as caught:
            process.call({"op": "codec.parse", "blob": b"\0"})
        assert caught.value.kind is FailureKind.CRASH
        assert "LAST WORDS" in caught.value.stderr  # the tail, after 4 MiB of noise
        assert len(process._stderr) <= STDERR_KEEP


def test_reply_line_past_the_limit_fails_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("lmckv.conformance.core.testee_process.MAX_REPLY_LINE", 8 << 20)
    wrap, piddir = _wrapper(tmp_path, "long-line")
    with (
        TesteeProcess([str(wrap)], timeout=30, hello=True) as process,
        pytest.raises(TesteeFailure) as caught,
    ):
        process.call({"op": "codec.parse", "blob": b"\0"})
    assert caught.value.kind is FailureKind.PROTOCOL
    assert "MAX_REPLY_LINE" in str(caught.value) and str(8 << 20) in str(caught.value)
    assert _left(piddir) == []


def test_breaker_not_reset_by_one_answer_per_restart(tmp_path: Path) -> None:
    """The testee answers one request per process, then dies: three such deaths with one
    answer between each trip the breaker (max_failures 3)."""
    wrap, piddir = _wrapper(tmp_path, "answer-once")
    driver = ExecDriver(str(wrap), ExecSettings(cwd=tmp_path, timeout=10, max_failures=3))
    try:
        for _ in range(12):
            driver.call("codec.parse", blob=b"\0")
            if driver.stopped is not None:
                break
        assert driver.stopped is not None, "answering once per restart reset the breaker"
    finally:
        driver.close()
    assert _left(piddir) == []


SERVER_CHILD = """\
import os, socket, sys, time
open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
listener = socket.create_server(("127.0.0.1", int(sys.argv[2])))
time.sleep(3600)
"""


def test_server_wrapper_leaves_no_process(tmp_path: Path) -> None:
    """``server:CMD`` through a shell that does not exec: closing the driver ends the
    shell's child too."""
    from lmckv.conformance.drivers.server_driver import ServerDriver

    piddir = tmp_path / "pids"
    piddir.mkdir()
    child = tmp_path / "server_child.py"
    child.write_text(SERVER_CHILD)
    wrap = tmp_path / "serve.sh"
    wrap.write_text(f'#!/bin/sh\n{PY} {child} {piddir} "$1"\necho done >&2\n')
    wrap.chmod(0o755)
    driver = ServerDriver("server", None, command=[str(wrap), "{port}"])
    try:
        assert driver.address[0] == "127.0.0.1"
        assert list(piddir.iterdir()), "the server child never started"
    finally:
        driver.close()
    assert _left(piddir) == [], "the server wrapper's child outlived the driver"
