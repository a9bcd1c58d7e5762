"""The testee client (conformance/core/testee_process.py) against tiny Python testees: it
answers in order, names crash, timeout and protocol failures with the request they hit,
restarts after them, and never leaves a process behind."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lmckv.conformance.core.testee_process import FailureKind, TesteeFailure, TesteeProcess

#: Answers hello, then echoes each request's ``global_rank``; ``BEHAVIOUR`` is pasted into the
#: loop and may act on the request number ``count`` (1 for the first after hello).
TESTEE = """
import json, sys, time
count = 0
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "hello":
        print(json.dumps({{"id": req["id"], "ok": True, "name": "tiny", "version": None,
                          "protocol": 1, "capabilities": []}}), flush=True)
        continue
    count += 1
{behaviour}
    reply = {{"id": req["id"], "ok": True, "global_rank": req["global_rank"]}}
    print(json.dumps(reply), flush=True)
"""

ECHO = ""
CRASH_ON_THIRD = """
    if count == 3:
        print("dying on request 3", file=sys.stderr, flush=True)
        sys.exit(7)
"""
HANG_ON_SECOND = """
    if count == 2:
        time.sleep(600)
"""
GARBAGE_ON_SECOND = """
    if count == 2:
        print("this is not json", flush=True)
        continue
"""
EXIT_BEFORE_HELLO = """
import sys
print("no hello from me", file=sys.stderr, flush=True)
sys.exit(1)
"""


def _testee(tmp_path: Path, behaviour: str) -> list[str]:
    script = tmp_path / "testee.py"
    script.write_text(TESTEE.format(behaviour=textwrap.indent(textwrap.dedent(behaviour), "    ")))
    return [sys.executable, str(script)]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _requests(count: int) -> list[dict[str, int]]:
    """Requests numbered by ``global_rank`` (an int field), which the testee echoes."""
    return [{"op": "key.kv_rank", "global_rank": i} for i in range(count)]


def test_echo_answers_a_batch_in_order_and_stops_cleanly(tmp_path: Path) -> None:
    process = TesteeProcess(_testee(tmp_path, ECHO), timeout=10, hello=True)
    with process:
        assert process.call({"op": "key.kv_rank", "global_rank": 41}) == {
            "ok": True,
            "global_rank": 41,
        }
        assert process.hello_reply is not None and process.hello_reply["name"] == "tiny"
        replies = process.exchange(_requests(500))
        assert [r["global_rank"] for r in replies] == list(range(500))
        pid = process.pid
        assert pid is not None
    assert process.pid is None and _gone(pid)


def test_crash_names_the_third_request_and_quotes_stderr(tmp_path: Path) -> None:
    with TesteeProcess(_testee(tmp_path, CRASH_ON_THIRD), timeout=10) as process:
        with pytest.raises(TesteeFailure) as caught:
            process.exchange(_requests(5))
        failure = caught.value
        assert failure.kind is FailureKind.CRASH
        assert failure.index == 2 and [r["global_rank"] for r in failure.answered] == [0, 1]
        assert "status 7" in str(failure) and "dying on request 3" in failure.stderr
        assert process.pid is None
        # A fresh process takes the rest.
        assert [r["global_rank"] for r in process.exchange(_requests(2))] == [0, 1]


def test_hang_ends_within_the_timeout_and_kills_the_testee(tmp_path: Path) -> None:
    with TesteeProcess(_testee(tmp_path, HANG_ON_SECOND), timeout=1) as process:
        process.start()
        pid = process.pid
        assert pid is not None
        started = time.monotonic()
        with pytest.raises(TesteeFailure) as caught:
            process.exchange(_requests(3))
        assert time.monotonic() - started < 1 + 2
        assert caught.value.kind is FailureKind.TIMEOUT and caught.value.index == 1
        assert process.pid is None and _gone(pid)


def test_garbage_is_a_protocol_failure(tmp_path: Path) -> None:
    with TesteeProcess(_testee(tmp_path, GARBAGE_ON_SECOND), timeout=10) as process:
        process.start()
        pid = process.pid
        assert pid is not None
        with pytest.raises(TesteeFailure) as caught:
            process.exchange(_requests(3))
        assert caught.value.kind is FailureKind.PROTOCOL and caught.value.index == 1
        assert "this is not json" in str(caught.value)
        assert _gone(pid)


def test_exit_before_hello_fails_the_start(tmp_path: Path) -> None:
    script = tmp_path / "quitter.py"
    script.write_text(EXIT_BEFORE_HELLO)
    with TesteeProcess([sys.executable, str(script)], timeout=10, hello=True) as process:
        with pytest.raises(TesteeFailure) as caught:
            process.start()
        assert caught.value.kind is FailureKind.CRASH and caught.value.index == 0
        assert "no hello from me" in caught.value.stderr
        assert process.pid is None


def test_a_program_that_cannot_start_is_a_crash(tmp_path: Path) -> None:
    with TesteeProcess([str(tmp_path / "missing")], timeout=10) as process:
        with pytest.raises(TesteeFailure) as caught:
            process.call({"op": "key.kv_rank"})
        assert caught.value.kind is FailureKind.CRASH and "cannot start" in str(caught.value)
