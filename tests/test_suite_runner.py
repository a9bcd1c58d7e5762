"""The conformance runner from the user's point of view: ``lmckv conformance`` from any
directory, exec testees resolved and run there, one-line setup errors, the circuit breaker
for testees that hang or crash, rule ids in failures, the transcript, the known-failure
list named, and the files written (conformance/README.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lmckv.conformance.drivers.base import DriverError
from lmckv.conformance.drivers.exec_driver import resolve_command
from lmckv.conformance.runner.subprocess_suite import REPO, run_suite

PY = sys.executable
HELLO = (
    "import json, os, sys, time\n"
    "hello = json.loads(sys.stdin.readline())\n"
    "print(json.dumps({{'id': hello['id'], 'ok': True, 'name': {name!r}, 'version': None,"
    " 'protocol': 1, 'capabilities': {caps!r}}}), flush=True)\n"
)
CAPS = ["codec.parse", "codec.decode", "codec.encode", "key.kv_rank", "proto.client.read"]


def _testee(path: Path, name: str, body: str, caps: list[str] = CAPS) -> Path:
    """A Python testee script at ``path``: says hello as ``name``, then runs ``body``."""
    path.write_text(f"#!{PY}\n" + HELLO.format(name=name, caps=caps) + body)
    path.chmod(0o755)
    return path


def _lmckv(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``lmckv conformance ARGS`` from ``cwd`` (killed after ``timeout`` seconds)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    code = f"import sys; from lmckv.cli import main; sys.exit(main(['conformance', *{args!r}]))"
    return subprocess.run(
        [PY, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


# -- exec testees from the caller's directory ----------------------------------------------


def test_exec_resolves_and_runs_in_the_callers_directory(tmp_path: Path) -> None:
    """``exec:./t.py`` from the user's folder: found there, run there; --out defaults to
    ./lmckv-conformance there with the three files."""
    script = tmp_path / "t.py"
    script.write_text(
        f"#!{PY}\nimport os, sys\nsys.path.insert(0, {str(REPO)!r})\n"
        "open('cwd.txt', 'w').write(os.getcwd())\n"
        "from lmckv.conformance.testees.python_testee import main\nsys.exit(main(['reference']))\n"
    )
    script.chmod(0o755)
    done = _lmckv(["--impl", "exec:./t.py", "-k", "key-kv-rank-single", "-q"], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert (tmp_path / "cwd.txt").read_text() == str(tmp_path)
    out = tmp_path / "lmckv-conformance"
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml", "results.json", "summary.md"]
    results = json.loads((out / "results.json").read_text())
    assert results["impls"][0]["name"] == "reference-exec"
    assert results["impls"][0]["known_failures"] is None
    assert {t["outcome"] for t in results["tests"]} == {"pass"}
    summary = (out / "summary.md").read_text()
    assert "**every outcome as expected**" in summary
    assert "| reference-exec | exec | 0.1.0 | none |" in summary or "| reference-exec |" in summary
    assert "known failures of reference-exec: none" in done.stdout
    assert "<testcase" in (out / "junit.xml").read_text()


def test_out_dir_and_explicit_outputs(tmp_path: Path) -> None:
    done = _lmckv(
        ["--out", "o", "--summary-md", "s.md", "-q", "-k", "key-kv-rank-single"], tmp_path
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["junit.xml", "results.json"]
    assert "**every outcome as expected**" in (tmp_path / "s.md").read_text()


def test_resolve_command_like_a_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prog = _testee(tmp_path / "t.py", "t", "")
    assert resolve_command("./t.py --x 'a b'", tmp_path) == [str(prog), "--x", "a b"]
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_command("~/t.py ~/data", Path("/")) == [str(prog), str(tmp_path / "data")]
    assert resolve_command("t.py", Path("/"), {"PATH": str(tmp_path)}) == [str(prog)]
    with pytest.raises(DriverError, match=r"cannot start \./nope: \[Errno 2\] No such file"):
        resolve_command("./nope", tmp_path)
    with pytest.raises(DriverError, match="cannot start nope-lmckv: not found on PATH"):
        resolve_command("nope-lmckv", tmp_path, {"PATH": str(tmp_path)})
    (tmp_path / "plain.txt").write_text("")
    with pytest.raises(DriverError, match=r"\[Errno 13\] Permission denied"):
        resolve_command("./plain.txt", tmp_path)


def test_a_testee_that_cannot_start_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _lmckv(["--impl", "exec:./t.py", "-n", "2"], tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "lmckv conformance: --impl exec:./t.py: cannot start ./t.py: "
        "[Errno 2] No such file or directory\n"
    )
    assert "Traceback" not in done.stdout and "INTERNALERROR" not in done.stdout


def test_usage_errors_and_help_name_the_command(tmp_path: Path) -> None:
    done = _lmckv(["--no-such-option"], tmp_path)
    assert done.returncode == 2
    assert "lmckv conformance: error: unrecognized arguments: --no-such-option" in done.stderr
    done = _lmckv(["--help"], tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("usage: lmckv conformance [--impl SPEC]... [--out DIR]")
    for text in ("--testee-timeout", "--testee-max-failures", "--transcript", "--summary-md"):
        assert text in done.stdout
    assert "Exit status: 0 every outcome as expected" in " ".join(done.stdout.split())
    assert not list(tmp_path.iterdir())


# -- the circuit breaker ---------------------------------------------------------------------


def _check_stopped(run_output: str, results: dict[str, object], wall: float, what: str) -> None:
    assert wall < 120, wall
    assert f"stopped answering: 3 consecutive {what}; remaining tests not run" in run_output
    tests = results["tests"]
    assert isinstance(tests, list) and len(tests) > 1000  # the whole suite ended
    assert {t["outcome"] for t in tests} == {"fail"}
    assert "tests not run" in run_output


def test_a_hanging_testee_ends_the_run_quickly(tmp_path: Path) -> None:
    script = _testee(tmp_path / "hang.py", "hang", "sys.stdin.readline()\ntime.sleep(3600)\n")
    start = time.monotonic()
    run = run_suite([f"exec:{script}"], "--testee-timeout", "2", timeout=300, cwd=tmp_path)
    wall = time.monotonic() - start
    assert run.returncode == 1, run.output[-3000:]
    _check_stopped(run.output, run.results, wall, "timeouts of 2 s")
    assert f"testee exec:{script} stopped answering" in run.output


def test_a_crashing_testee_ends_the_run_quickly(tmp_path: Path) -> None:
    body = "sys.stdin.readline()\nprint('boom', file=sys.stderr, flush=True)\nsys.exit(3)\n"
    _testee(tmp_path / "crash.py", "crash", body)
    start = time.monotonic()
    run = run_suite(["exec:./crash.py"], timeout=300, cwd=tmp_path)
    wall = time.monotonic() - start
    assert run.returncode == 1, run.output[-3000:]
    _check_stopped(run.output, run.results, wall, "crashes")
    assert "testee exec:./crash.py stopped answering" in run.output
    assert "(last: testee exited (status 3); stderr: ...boom)" in run.output
    not_run = [t for t in run.results["tests"] if "remaining tests not run" in t["reason"]]
    assert len(not_run) == len(run.results["tests"]) - 3  # the three crashes ran


def test_max_failures_zero_never_gives_up(tmp_path: Path) -> None:
    body = "sys.stdin.readline()\nsys.exit(3)\n"
    _testee(tmp_path / "crash.py", "crash", body, caps=["key.kv_rank"])
    run = run_suite(
        ["exec:./crash.py"], "-k", "key-kv-rank", "--testee-max-failures", "0", cwd=tmp_path
    )
    assert run.returncode == 1
    reasons = [t["reason"] for t in run.results["tests"]]
    assert len(reasons) > 3 and all("testee-crash" in r for r in reasons)


# -- what a failure says ----------------------------------------------------------------------

WRONG = (
    "for line in sys.stdin:\n"
    "    r = json.loads(line)\n"
    "    print(json.dumps({'id': r['id'], 'ok': True, 'kv_rank': 7}), flush=True)\n"
)


def test_failures_name_their_rule_and_are_grouped(tmp_path: Path) -> None:
    _testee(tmp_path / "wrong.py", "wrong", WRONG, caps=["key.kv_rank"])
    md = tmp_path / "summary.md"
    run = run_suite(
        ["exec:./wrong.py"],
        "-k",
        "key-kv-rank",
        "--summary-md",
        str(md),
        "-rf",
        cwd=tmp_path,
        env={"CI": "1"},  # pytest does not cut the short summary lines on CI
    )
    assert run.returncode == 1
    failed = [t for t in run.results["tests"] if t["outcome"] == "fail"]
    assert failed
    rules = {t["rule"] for t in failed}
    for rule in rules:
        tag = f"[{rule} reference_impl/SPEC.md#{rule.lower()}]"
        assert any(
            line.startswith("FAILED ") and f" - {tag} " in line for line in run.output.splitlines()
        ), tag
        assert f"  {rule} (MUST) reference_impl/SPEC.md#{rule.lower()}: " in run.output
        assert f"#### {rule} (MUST): " in md.read_text()
    assert "unexpected outcomes by rule" in run.output
    assert all(not t["reason"].startswith("[") for t in failed)  # the tag is not stored
    text = md.read_text()
    assert text.startswith("## lmckv conformance\n\n**FAILED: ")
    assert "| wrong | MUST |" in text and f"`{failed[0]['id']}`" in text


def test_an_unexpected_pass_names_the_line_to_delete(tmp_path: Path) -> None:
    short = "test_keys.py::test_keys[reference-key-kv-rank-single]"
    listed = tmp_path / "reference.txt"
    listed.write_text(f"# comment\n\n{short} pretend it is broken\n")
    run = run_suite(
        ["reference"],
        "conformance/suite/" + short,
        env={"LMCKV_KNOWN_FAILURES_DIR": str(tmp_path), "CI": "1"},
    )
    assert run.returncode == 1
    message = f"unexpected pass: delete line 3 of {listed}: {short}"
    assert message in run.output
    (test,) = run.results["tests"]
    assert test["outcome"] == "unexpected_pass" and test["reason"] == message
    assert run.results["impls"][0]["known_failures"] == str(listed)
    assert f"known failures of reference: {listed}" in run.output


# -- the transcript --------------------------------------------------------------------------


def test_transcript_records_every_exchange_and_replays(tmp_path: Path) -> None:
    testee = f"exec:{PY} -m lmckv.conformance.testees.python_testee reference"
    run = run_suite(
        [testee],
        "-k",
        "key-kv-rank or proto-client-0 or kv-crc-zero",
        "--transcript",
        "t.jsonl",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.output[-3000:]
    lines = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert {"time", "impl", "worker", "test", "testee_pid", "request", "reply"} <= set(lines[0])
    assert {line["request"]["op"] for line in lines} >= {"hello", "key.kv_rank", "codec.parse"}
    tested = {line["test"] for line in lines if line["test"]}
    assert tested == set(run.outcomes())  # every test's exchanges, named
    assert {line["worker"] for line in lines} == {None}  # no pytest-xdist worker
    requests = "".join(json.dumps(line["request"]) + "\n" for line in lines)
    replay = subprocess.run(
        [PY, "-m", "lmckv.conformance.testees.python_testee", "reference"],
        input=requests,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert replay.returncode == 0, replay.stderr
    replies = [json.loads(x) for x in replay.stdout.splitlines()]
    assert replies == [line["reply"] for line in lines]
