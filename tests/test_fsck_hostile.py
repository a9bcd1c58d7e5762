"""``lmckv fsck`` against hostile or broken stores and outputs (SPEC.md "A store"; the fsck
command's exit statuses): each case runs fsck in a process group of its own, under a bound,
and holds it to one line on standard error, its exit status, its time, no traceback, no text
of the server's that could pass for fsck's own lines, and no process left behind."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_servers import resp_server, s3_server, silent_server

#: Seconds every case must end in (the servers stall for longer).
BOUND_S = 30.0
#: Peak resident memory of fsck (and the children it waited for) in every case: the
#: interpreter with its store clients is about 100 MiB; nothing a server sends may add more
#: than a bounded page.
PEAK_RSS_KIB = 250 * 1024
#: The CPU seconds (user and system) fsck may spend on any hostile store: a bound in bytes
#: reached by a quadratic read (a line joined again with each socket read) is reached late.
CPU_S = 4.0


def fsck(*args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
    """``lmckv fsck ARGS --no-progress`` in a process group of its own."""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    return subprocess.Popen(
        [sys.executable, "-m", "lmckv", "fsck", *args, "--no-progress"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env=env, cwd=cwd,
    )  # fmt: skip


def finish(proc: subprocess.Popen[str], timeout: float = BOUND_S) -> tuple[int, str, str, float]:
    """(exit status, stdout, stderr, seconds) of ``proc``; its peak RSS (VmHWM, read every
    poll while it runs: the last read is within a poll of its end) must stay under
    :data:`PEAK_RSS_KIB`, its CPU time under :data:`CPU_S`. It and its group are killed if it
    outlives ``timeout``, and the case fails."""
    streams: dict[str, str] = {}
    readers = [
        threading.Thread(target=lambda n=n, f=f: streams.__setitem__(n, f.read()), daemon=True)
        for n, f in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for reader in readers:
        reader.start()
    start, peak = time.monotonic(), 0
    while True:
        peak = max(peak, _high_water_kib(proc.pid))
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            proc.returncode = -signal.SIGKILL
            pytest.fail(f"fsck ran past {timeout} s")
        time.sleep(0.02)
    seconds = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join(5)
    assert 0 < peak < PEAK_RSS_KIB, f"peak RSS {peak} KiB"
    cpu = usage.ru_utime + usage.ru_stime
    assert cpu < CPU_S, f"{cpu:.1f} s of CPU"
    return proc.returncode, streams.get("out", ""), streams.get("err", ""), seconds


def _high_water_kib(pid: int) -> int:
    """The process's peak resident set size so far (VmHWM; 0 once it has ended). Not
    ``ru_maxrss``: that counts the image of the test process it was forked from."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _running_in_group(pgid: int) -> list[str]:
    """The processes of group ``pgid`` that still run (pid and command). An ended one left
    unreaped (a zombie: its parent, fsck, is gone, and a subreaper took it) is reaped where
    it is this process's child, and not counted."""
    running = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, group = fields[0], int(fields[2])
        if group != pgid:
            continue
        if state == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(int(entry), os.WNOHANG)
            continue
        running.append(entry)
    return running


def assert_clean_ending(proc: subprocess.Popen[str], out: str, err: str) -> None:
    """One line on stderr, no traceback, no control character or forged verdict, and no
    process of its group left."""
    assert "Traceback" not in err + out, err[-2000:]
    assert len(err.strip().splitlines()) == 1, err
    assert "\x1b" not in err + out and "\r" not in err + out
    assert not any(line.startswith("lmckv fsck: 0 problems") for line in (err + out).splitlines())
    assert "clean" not in err.splitlines()[0][:6]
    # Nothing of its group is left (multiprocessing's resource tracker ends on its own once
    # fsck has: given a few seconds).
    for _ in range(200):
        left = _running_in_group(proc.pid)
        if not left:
            return
        time.sleep(0.05)
    pytest.fail(f"processes of fsck's group outlived it: {left}")


@pytest.mark.parametrize(
    ("mode", "needle"),
    [
        ("scan-repeats", "repeated SCAN cursor"),
        ("scan-cursor-text", "malformed"),
        ("scan-huge-page", "malformed"),
        ("scan-endless-line", "larger than"),
        ("scan-error", "hostile"),
    ],
)
def test_a_hostile_resp_listing_ends_in_one_line_and_exit_2(mode: str, needle: str) -> None:
    with resp_server(mode) as port:
        proc = fsck(f"redis://127.0.0.1:{port}/0", "--jobs", "1")
        code, out, err, _ = finish(proc)
    assert code == 2, (out, err)
    assert needle in err
    assert_clean_ending(proc, out, err)


def test_a_strlen_that_is_no_size_is_a_problem_of_that_object() -> None:
    with resp_server("strlen-text") as port:
        proc = fsck(f"redis://127.0.0.1:{port}/0", "--jobs", "1", "--serde", "none")
        code, out, err, _ = finish(proc)
    assert code == 1, (out, err)
    assert "STORE-READ" in out and "STRLEN answered" in out
    assert "Traceback" not in out + err


@pytest.mark.parametrize(
    ("mode", "needle"),
    [
        ("getrange-oversize", "asked for"),  # a few KiB more than asked
        ("getrange-huge-length", "larger than"),  # declares 5 GiB and streams what it can
    ],
)
def test_a_range_reply_larger_than_asked_is_a_problem_of_that_object(
    tmp_path: Path, mode: str, needle: str
) -> None:
    """fsck reads no more than it asked for (its peak RSS is the bound: a reply declaring
    gigabytes is refused before it is read), and the object is a problem of its own."""
    key = tmp_path / "master.key"
    key.write_bytes(bytes(32))
    with resp_server(mode) as port:
        proc = fsck(
            f"redis://127.0.0.1:{port}/0", "--jobs", "1", "--serde", "aesgcm",
            "--key-file", str(key),
        )  # fmt: skip
        code, out, err, _ = finish(proc)
    assert code == 1, (out, err)
    assert "STORE-READ" in out and needle in out, out
    assert "Traceback" not in out + err


@pytest.mark.parametrize(
    ("mode", "needle"),
    [
        ("list-repeats", "repeated continuation token"),
        ("list-no-key", "malformed"),
        ("list-size-text", "malformed"),
        ("list-not-xml", "listing the bucket failed"),  # botocore: a 500 after 3 tries
        ("list-no-token", "without a continuation token"),
        ("list-flood", "larger than"),
        ("list-error", "hostile"),
    ],
)
def test_a_hostile_s3_listing_ends_in_one_line_and_exit_2(mode: str, needle: str) -> None:
    with s3_server(mode) as url:
        proc = fsck("s3://bucket", "--endpoint", url, "--jobs", "1")
        code, out, err, _ = finish(proc)
    assert code == 2, (out, err)
    assert needle in err
    assert_clean_ending(proc, out, err)


@pytest.mark.parametrize("to", ["group", "another thread"])
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_ends_the_run_in_one_line_with_every_worker_gone(
    tmp_path: Path, sig: signal.Signals, code: int, to: str
) -> None:
    """Ctrl-C (to the whole group, as a terminal sends it) or SIGTERM, once a worker is stuck
    on a read that stalls for longer than the bound; ``another thread``: the signal taken by a
    thread of fsck other than its main one, as the kernel may hand a process's signal to any
    of its threads (a wait of the main thread that only that signal could end then never
    ended: the fixed 4 s sleep this case had before passed or failed by where it landed)."""
    key = tmp_path / "master.key"
    key.write_bytes(bytes(32))
    stalled = threading.Event()
    with resp_server("getrange-stalls", stalled) as port, _interruptible_children():
        proc = fsck(
            f"redis://127.0.0.1:{port}/0", "--jobs", "2", "--serde", "aesgcm",
            "--key-file", str(key),
        )  # fmt: skip
        assert stalled.wait(BOUND_S), "no worker reached the stalled read"
        assert proc.poll() is None
        if to == "another thread":
            _signal_another_thread(proc.pid, sig)
        elif sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        status, out, err, seconds = finish(proc, timeout=15)
    assert status == code, (out, err)
    assert seconds < 10 and ("interrupted" if sig == signal.SIGINT else "terminated") in err
    assert_clean_ending(proc, out, err)


@contextlib.contextmanager
def _interruptible_children() -> Iterator[None]:
    """Children started in the block take Ctrl-C as a terminal's foreground job does, though
    this process may have been started with SIGINT ignored (under a runner in the background:
    a shell without job control ignores SIGINT in its asynchronous commands). An ignored
    signal stays ignored through exec, and Python then leaves it so: fsck, rightly, would
    never see the Ctrl-C, and the case passed or failed by which xdist worker ran it. A
    handler, unlike SIG_IGN, is reset to the default by exec."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _signal_another_thread(pid: int, sig: signal.Signals) -> None:
    """``sig`` to one thread of process ``pid`` other than its main one (glibc's tgkill)."""
    tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    assert tids, "fsck runs no thread besides its main one"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(pid, tids[0], int(sig)) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill {pid} {tids[0]}")


def test_a_key_file_that_is_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "master.key"
    os.mkfifo(fifo)
    (tmp_path / "store").mkdir()
    proc = fsck(str(tmp_path / "store"), "--serde", "aesgcm", "--key-file", str(fifo))
    code, out, err, seconds = finish(proc, timeout=15)
    assert code == 2 and "not a regular file" in err and seconds < 10
    assert_clean_ending(proc, out, err)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / f"{'m@01000100@0@' + 'ab' * 32}.data").write_bytes(b"\0" * 64)
    yield folder


def test_an_output_that_cannot_be_written_is_found_before_the_check(
    store: Path, tmp_path: Path
) -> None:
    proc = fsck(str(store), "--json", str(tmp_path / "missing" / "report.json"))
    code, out, err, _ = finish(proc)
    assert code == 2 and "cannot write the report" in err
    assert out == ""  # nothing was checked
    assert_clean_ending(proc, out, err)


def test_the_report_appears_whole_or_not_at_all(store: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    proc = fsck(str(store), "--json", str(report))
    code, _, err, _ = finish(proc)
    assert code in (0, 1), err
    assert report.read_text().rstrip().endswith("}")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


def test_inspect_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    from lmckv.conformance.core.golden_vectors import golden_file, vectors

    blob = tmp_path / "blob.lmckv"
    first = next(v for v in vectors("codec") if v.get("blob") and v.get("result") == "valid")
    blob.write_bytes(golden_file(first["blob"]))
    script = f"{sys.executable} -m lmckv inspect {blob} | head -c 1 >/dev/null"
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script], capture_output=True, text=True, timeout=BOUND_S
    )
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode in (0, 141), done


def test_a_listing_trickled_byte_by_byte_is_stopped_by_the_time_limit() -> None:
    """Each byte comes within the per-read timeout; ``--time-limit`` and its grace (2 s here)
    stop the run wherever it is."""
    with resp_server("scan-trickles") as port:
        proc = fsck(f"redis://127.0.0.1:{port}/0", "--jobs", "1", "--time-limit", "3")
        code, out, err, seconds = finish(proc)
    assert code == 2 and "time-limit" in err, (out, err)
    assert 3 <= seconds < 3 + 2 + 3, seconds  # the limit, its grace, start-up
    assert_clean_ending(proc, out, err)


def test_a_scheduler_address_that_never_answers_is_bounded(store: Path) -> None:
    """Dask's handshake waits forever on a server that accepts and says nothing: fsck bounds
    it (30 s by itself; here the run's --time-limit of 3 s and its grace)."""
    with silent_server() as port:
        proc = fsck(str(store), "--scheduler", f"tcp://127.0.0.1:{port}", "--time-limit", "3")
        code, out, err, seconds = finish(proc)
    assert code == 2 and seconds < 3 + 2 + 5, (seconds, err)
    assert_clean_ending(proc, out, err)


@pytest.mark.parametrize(
    "store",
    [
        "redis://user:hunter2-secret@127.0.0.1/0",  # no port
        "redis://user:hunter2-secret@127.0.0.1:6379/zero",
        '--l2-adapter={"type": "resp", "host": "127.0.0.1", "port": 1, "password": 7}',
        '--l2-adapter={"type": "resp", "host": "h", "port": 1, "password": "hunter2" x}',
        '--l2-adapter={"type": "s3", "s3_endpoint": "b.h:1", "aws_secret_access_key": [1]}',
    ],
)
def test_a_secret_of_the_spec_is_never_shown(store: str) -> None:
    """A spec refused for its form names what is wrong, not the password or key in it."""
    proc = fsck(store, "--jobs", "1")
    code, out, err, _ = finish(proc)
    assert code == 2, (out, err)
    assert "hunter2" not in out + err and "got 7" not in err and "[1]" not in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
