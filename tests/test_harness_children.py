"""The harness owns its children (TESTEE.md): a testee behind a shell wrapper that does not
``exec`` its program, whose program hangs, leaves no process behind when the testee times
out, when a conformance run stops at its first failure (``-x``), and when the run is sent
SIGTERM or SIGINT; nor do descendants that left the testee's process group (setsid, a double
fork), and a testee that exits while one holds its stdout is a crash, not a timeout. Also
the other bounds a testee cannot stretch: its stderr, a reply line (an over-long one counts
toward the circuit breaker), and the circuit breaker."""

from __future__ import annotations

import contextlib
import os
import shutil
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
from lmckv.conformance.drivers.exec_driver import (
    PROTOCOL_ERROR,
    STOPPED_ERROR,
    ExecDriver,
    ExecSettings,
)
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


# -- over-long replies, escaped descendants, an exit behind a held stdout ----------------------

# The start of every script below (``_script`` prepends it): answer() and hello().
HELLO = """\
import json, os, subprocess, sys, time
def answer(req, **fields):
    sys.stdout.write(json.dumps({"id": req["id"], **fields}) + "\\n")
    sys.stdout.flush()
def hello():
    req = json.loads(sys.stdin.readline())
    answer(req, ok=True, name="t", version=None, protocol=1, capabilities=["codec.parse"])
"""

# Answers hello, then logs each request and writes reply bytes without end (no newline).
OVERLONG = """\
hello()
for line in sys.stdin:
    with open(sys.argv[1], "a") as log:
        log.write(line)
    while True:
        sys.stdout.buffer.write(b"y" * 65536)
"""

# Answers hello, then each request with a line of exactly sys.argv[1] bytes (padded message).
EXACT = """\
hello()
size = int(sys.argv[1])
for line in sys.stdin:
    req = json.loads(line)
    head = json.dumps({"id": req["id"], "ok": False, "error": "x", "message": ""})
    pad = "m" * (size - len(head))
    sys.stdout.write(head[:-2] + pad + '"}' + "\\n")
    sys.stdout.flush()
"""

# Starts a descendant that leaves the testee's group and session (argv[2]: "double-fork", a
# python fork + setsid + fork whose middle process exits, or "setsid-sleep", setsid(1) run
# as a child), records its pid in argv[1], then answers hello and every request.
ESCAPE = """\
pidfile, how = sys.argv[1], sys.argv[2]
if how == "double-fork":
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, str(os.getpid()).encode())
            os.close(w)
            os.closerange(0, 3)
            time.sleep(60)
        os._exit(0)
    os.close(w)
    pid = int(os.read(r, 64))
    os.wait()
else:
    pid = subprocess.Popen(["setsid", "sleep", "60"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid
    for _ in range(200):  # setsid(1) leaves the session right after it starts: wait for it
        if os.getsid(pid) != os.getsid(0):
            break
        time.sleep(0.01)
with open(pidfile + ".tmp", "w") as f:
    f.write(str(pid))
os.rename(pidfile + ".tmp", pidfile)
hello()
for line in sys.stdin:
    answer(json.loads(line), ok=False, error="raw:nope")
"""

# Forks a descendant that keeps the testee's stdout open and sleeps (argv[2] "setsid": it
# also leaves the group), records its pid in argv[1], answers hello, exits 7 on a request.
HOLDER = """\
pidfile, how = sys.argv[1], sys.argv[2]
pid = os.fork()
if pid == 0:
    if how == "setsid":
        os.setsid()
    time.sleep(60)
    os._exit(0)
with open(pidfile, "w") as f:
    f.write(str(pid))
hello()
sys.stdin.readline()
sys.exit(7)
"""

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="escaped descendants are swept on Linux only"
)


def _script(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(HELLO + text)
    return path


def _gone(pid: int, wait: float = 3.0) -> bool:
    """Whether ``pid`` is gone (not even a zombie) within ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not Path(f"/proc/{pid}").exists()


def _read_pid(path: Path, wait: float = 5.0) -> int:
    deadline = time.monotonic() + wait
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return int(path.read_text())


def _kill(pid: int | None) -> None:
    """Stop a process this test started, if it is still there (a failed test's cleanup)."""
    if pid is not None and _alive(pid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def test_over_long_replies_trip_the_circuit_breaker(tmp_path: Path) -> None:
    """Each request answered by bytes past the reply size limit fails as a protocol failure
    and counts toward max_failures like a crash: three requests, then the testee is
    stopped and nothing more is sent."""
    log = tmp_path / "requests.log"
    script = _script(tmp_path, "overlong.py", OVERLONG)
    settings = ExecSettings(cwd=tmp_path, timeout=10, max_failures=3, max_reply_line=1 << 16)
    driver = ExecDriver(f"{PY} {script} {log}", settings)
    started = time.monotonic()
    try:
        errors = [driver.call("codec.parse", blob=b"\0")["error"] for _ in range(5)]
        assert errors == [PROTOCOL_ERROR] * 3 + [STOPPED_ERROR] * 2
        assert driver.stopped is not None and "3 consecutive reply lines over" in driver.stopped
        assert driver.process.pid is None  # stopped, not restarted for the last two
        assert len(log.read_text().splitlines()) == 3
    finally:
        driver.close()
    assert time.monotonic() - started < 5


def test_reply_size_limit_is_exact_and_unanswered(tmp_path: Path) -> None:
    limit = 4096
    exact = _script(tmp_path, "exact.py", EXACT)
    argv = [PY, str(exact), str(limit)]
    with TesteeProcess(argv, timeout=10, hello=True, max_reply_line=limit) as process:
        assert process.call({"op": "codec.parse", "blob": b"\0"})["error"] == "x"
    with TesteeProcess([*argv[:2], str(limit + 1)], timeout=10, hello=True) as process:
        process.max_reply_line = limit
        with pytest.raises(TesteeFailure) as caught:
            process.call({"op": "codec.parse", "blob": b"\0"})
        assert caught.value.kind is FailureKind.PROTOCOL and caught.value.unanswered
        assert f"limit of {limit} bytes" in str(caught.value)
        assert len(process._stdout) == 0


@linux_only
@pytest.mark.parametrize("how", ["double-fork", "setsid-sleep"])
def test_escaped_descendant_ends_with_close(tmp_path: Path, how: str) -> None:
    if how == "setsid-sleep" and shutil.which("setsid") is None:
        pytest.skip("no setsid(1)")
    pidfile = tmp_path / "escaped.pid"
    script = _script(tmp_path, "escape.py", ESCAPE)
    pid = None
    try:
        with TesteeProcess([PY, str(script), str(pidfile), how], timeout=10, hello=True) as p:
            p.start()
            pid = _read_pid(pidfile)
            assert _alive(pid)
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            assert int(stat[3]) != p.pid, "the descendant did not leave the testee's session"
            assert p.call({"op": "codec.parse", "blob": b"\0"})["error"] == "raw:nope"
        assert _gone(pid), f"the escaped descendant {pid} ({how}) outlived close()"
    finally:
        _kill(pid)


@linux_only
@pytest.mark.parametrize("how", ["same-group", "setsid"])
def test_exit_behind_a_held_stdout_is_a_crash(tmp_path: Path, how: str) -> None:
    """The testee exits while its child keeps its stdout open: a crash with its status, at
    once (not a timeout after 30 s); the child ends with close()."""
    pidfile = tmp_path / "holder.pid"
    script = _script(tmp_path, "holder.py", HOLDER)
    pid = None
    try:
        with TesteeProcess([PY, str(script), str(pidfile), how], timeout=30, hello=True) as p:
            p.start()
            pid = _read_pid(pidfile)
            started = time.monotonic()
            with pytest.raises(TesteeFailure) as caught:
                p.call({"op": "codec.parse", "blob": b"\0"})
            assert time.monotonic() - started < 3
            assert caught.value.kind is FailureKind.CRASH
            assert "status 7" in str(caught.value)
        assert _gone(pid), f"the stdout holder {pid} ({how}) outlived close()"
    finally:
        _kill(pid)


@linux_only
def test_sweep_spares_children_started_for_other_purposes(tmp_path: Path) -> None:
    """Children the harness started itself, before the testee (in a new session) and while
    it runs (in ours), outlive the testee's close()."""
    pidfile = tmp_path / "escaped.pid"
    script = _script(tmp_path, "escape.py", ESCAPE)
    before = subprocess.Popen(["sleep", "30"], start_new_session=True)
    during: subprocess.Popen[bytes] | None = None
    pid = None
    try:
        with TesteeProcess(
            [PY, str(script), str(pidfile), "double-fork"], timeout=10, hello=True
        ) as process:
            process.start()
            pid = _read_pid(pidfile)
            during = subprocess.Popen(["sleep", "30"])
        assert _gone(pid)
        assert before.poll() is None and during.poll() is None
    finally:
        for proc in (before, during):
            if proc is not None:
                proc.kill()
                proc.wait()
        _kill(pid)


# On each request, starts a descendant that leaves the session and exits at once (its
# middle process exits first, so it is re-parented to the harness), then answers.
SHORT_LIVED = """\
hello()
for line in sys.stdin:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os._exit(0)
        os._exit(0)
    os.wait()
    answer(json.loads(line), ok=False, error="raw:nope")
"""


def _adopted_zombies() -> list[int]:
    """Our children that exited and were not reaped."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] == "Z" and int(fields[1]) == me:
                    found.append(int(entry.name))
    return found


@linux_only
def test_orphans_that_exit_are_reaped_while_the_testee_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Orphans re-parented to the harness do not pile up as zombies during a long-lived
    testee's run (they are reaped every _REAP_EVERY seconds: here after every request)."""
    monkeypatch.setattr("lmckv.conformance.core.testee_process._REAP_EVERY", 0.0)
    script = _script(tmp_path, "short.py", SHORT_LIVED)
    before = set(_adopted_zombies())  # earlier tests' leftovers are not this testee's
    with TesteeProcess([PY, str(script)], timeout=10, hello=True) as process:
        for _ in range(20):
            process.call({"op": "codec.parse", "blob": b"\0"})
        time.sleep(0.1)
        process.call({"op": "codec.parse", "blob": b"\0"})
        assert len(set(_adopted_zombies()) - before) <= 1
