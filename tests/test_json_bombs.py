"""JSON from a peer or a file is bounded and refused with one typed error
(lmckv/base/untrusted_json.py), never a traceback: a testee replying with 100,000 levels of
nesting or a 5,000-digit integer fails its request as a protocol failure (before, each test
failed with a Python RecursionError and the testee was not stopped; at hello it was an
INTERNALERROR), and ``lmckv report``, ``lmckv bench compare`` and ``lmckv fsck --l2-adapter``
given such input exit 2 with one line."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from lmckv import cli
from lmckv.conformance.core.testee_process import FailureKind, TesteeFailure, TesteeProcess

DEEP = "[" * 100_000 + "]" * 100_000
DIGITS = "9" * 5000
BOMBS = {"deep": DEEP, "digits": DIGITS}

# A testee that says hello (or, in mode hello-*, answers hello with the bomb), then answers
# every request with the bomb in a field.
TESTEE = """\
import json, sys
mode, bomb = sys.argv[1], sys.argv[2]
value = "[" * 100000 + "]" * 100000 if bomb == "deep" else "9" * 5000
hello = json.loads(sys.stdin.readline())
if mode == "hello":
    sys.stdout.write('{"id": %d, "ok": true, "x": %s}\\n' % (hello["id"], value))
    sys.stdout.flush()
    sys.stdin.readline()
    sys.exit(0)
print(json.dumps({"id": hello["id"], "ok": True, "name": "bomb", "version": None,
                  "protocol": 1, "capabilities": ["codec.parse"]}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.write('{"id": %d, "ok": true, "x": %s}\\n' % (req["id"], value))
    sys.stdout.flush()
"""


@dataclass(frozen=True)
class Done:
    returncode: int
    stderr: str


@pytest.fixture
def lmckv(capsys: pytest.CaptureFixture[str]) -> Callable[..., Done]:
    """``lmckv ARGS...`` in this process (the command line's own entry point): its exit
    status and what it wrote to stderr; an exception escaping it fails the test."""

    def run(*args: str) -> Done:
        capsys.readouterr()
        status = cli.main(list(args))
        return Done(status, capsys.readouterr().err)

    return run


def refused_in_one_line(done: Done, limit: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and limit in lines[0], lines


@pytest.mark.parametrize(("bomb", "limit"), [("deep", "max_depth"), ("digits", "max_number")])
def test_a_testee_reply_bomb_is_a_protocol_failure(tmp_path: Path, bomb: str, limit: str) -> None:
    script = tmp_path / "testee.py"
    script.write_text(TESTEE)
    with TesteeProcess([sys.executable, str(script), "serve", bomb], hello=True, timeout=20) as t:
        for _ in range(2):  # every request, not only the first
            with pytest.raises(TesteeFailure) as failed:
                t.call({"op": "codec.parse", "blob": b""})
            assert failed.value.kind is FailureKind.PROTOCOL and limit in str(failed.value)


@pytest.mark.parametrize("bomb", ["deep", "digits"])
def test_a_hello_bomb_is_a_protocol_failure(tmp_path: Path, bomb: str) -> None:
    script = tmp_path / "testee.py"
    script.write_text(TESTEE)
    testee = TesteeProcess([sys.executable, str(script), "hello", bomb], hello=True, timeout=20)
    with pytest.raises(TesteeFailure) as failed:
        testee.start()
    testee.close()
    assert failed.value.kind is FailureKind.PROTOCOL


@pytest.mark.parametrize(("bomb", "limit"), [("deep", "max_depth"), ("digits", "max_number")])
def test_report_refuses_a_bomb_in_one_line(
    tmp_path: Path, bomb: str, limit: str, lmckv: Callable[..., Done]
) -> None:
    conformance = tmp_path / "results.json"
    conformance.write_text('{"tests": ' + BOMBS[bomb] + "}")
    refused_in_one_line(lmckv("report", str(conformance), "--out", str(tmp_path / "a")), limit)
    bench = tmp_path / "bench.jsonl"
    bench.write_text('{"kind": "header", "x": ' + BOMBS[bomb] + "}\n")
    refused_in_one_line(lmckv("report", str(bench), "--out", str(tmp_path / "b")), limit)


@pytest.mark.parametrize(("bomb", "limit"), [("deep", "max_depth"), ("digits", "max_number")])
def test_bench_compare_refuses_a_bomb_in_one_line(
    tmp_path: Path, bomb: str, limit: str, lmckv: Callable[..., Done]
) -> None:
    bench = tmp_path / "bench.jsonl"
    bench.write_text('{"kind": "header", "x": ' + BOMBS[bomb] + "}\n")
    refused_in_one_line(lmckv("bench", "compare", str(bench), str(bench)), limit)


def test_fsck_refuses_a_bomb_spec_in_one_line(lmckv: Callable[..., Done]) -> None:
    done = lmckv("fsck", "--l2-adapter", "[" * 5000 + "]" * 5000, "--no-progress")
    refused_in_one_line(done, "max_depth")
