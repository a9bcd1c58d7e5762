"""A hung serving worker's stacks (conformance/store/serving_run.py): the ending of a worker
that went quiet names where each of its threads stood, so that a hang seen once can be found."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from lmckv.conformance.store.serving_run import STACKS_MAX, distinct_stacks, stacks

HUNG = """
import faulthandler, signal, sys, threading, time
faulthandler.register(signal.SIGUSR1, all_threads=True)
def waits_in_a_thread():
    time.sleep(60)
for _ in range(3):
    threading.Thread(target=waits_in_a_thread, daemon=True).start()
def stuck_in_main():
    print("ready", flush=True)
    time.sleep(60)
stuck_in_main()
"""


def test_a_hung_worker_gives_its_main_stack_first_and_each_other_stack_once(
    tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", HUNG], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=out, start_new_session=True,
        )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        text = stacks(proc, log)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    first, _, rest = text.partition("\n[")
    assert first.startswith("[1 thread(s)]") and "stuck_in_main" in first
    assert rest.startswith("3 thread(s)]") and "waits_in_a_thread" in rest
    assert text.count("waits_in_a_thread") == 1


def test_an_ended_worker_has_no_stacks(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.DEVNULL)
    proc.wait(timeout=30)
    assert stacks(proc, tmp_path / "worker.log").startswith("no stacks")


def test_a_worker_that_had_not_registered_for_its_stacks_says_so(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        assert stacks(proc, tmp_path / "worker.log") == (
            "no stacks: the worker had not yet registered for them"
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def test_the_stacks_are_bounded_and_only_faulthandler_blocks_count() -> None:
    frame = '  File "x.py", line 1 in f\n'
    dump = "log line before\nThread 0x00007f0000000001 (most recent call first):\n" + (frame * 1000)
    text = distinct_stacks(dump + "Current thread 0x00007f0000000002 (most recent call first):\n")
    assert len(text) == STACKS_MAX and "log line before" not in text
    assert text.startswith("[1 thread(s)]\n\n[1 thread(s)]")  # the current one, empty, first
    assert distinct_stacks("no dump here\n") == ""
