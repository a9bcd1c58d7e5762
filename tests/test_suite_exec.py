"""The exec driver and TESTEE.md: a testee over the reference passes, undeclared
capabilities skip with their reason, and a crashing testee fails without hanging."""

from __future__ import annotations

import sys
from pathlib import Path

from lmckv.conformance.runner.subprocess_suite import run_suite

PY = sys.executable
SELECTION = "kv-crc or proto-client-0 or key-kv-rank or key-fs-write or enc-per_page_head-f16-nhd"


def test_python_testee_passes_like_the_reference() -> None:
    run = run_suite(
        [f"exec:{PY} -m lmckv.conformance.testees.python_testee reference"], "-k", SELECTION
    )
    assert run.returncode == 0, run.output[-3000:]
    impls = run.results["impls"]
    assert [(i["name"], i["kind"]) for i in impls] == [("reference-exec", "exec")]
    outcomes = run.outcomes()
    assert len(outcomes) > 50 and set(outcomes.values()) == {"pass"}
    assert {(m["producer"], m["consumer"]) for m in run.results["matrix"]} == {
        ("reference-exec", "reference-exec")
    }


def test_undeclared_capabilities_are_skipped_with_a_reason() -> None:
    spec = f"exec:{PY} -m lmckv.conformance.testees.python_testee reference --only codec.parse"
    run = run_suite([spec], "-k", "enc-per_tensor-f16-nhd-2x4x2x8")
    assert run.returncode == 0, run.output[-3000:]
    tests = run.results["tests"]
    parsed = [t for t in tests if "test_parse[" in t["id"]]
    skipped = [t for t in tests if t["outcome"] == "skip"]
    assert parsed and all(t["outcome"] == "pass" for t in parsed)
    assert skipped and all("does not declare capability" in t["reason"] for t in skipped)
    assert run.results["matrix"] == []


def test_crashing_testee_fails_the_request(tmp_path: Path) -> None:
    script = tmp_path / "crashy.py"
    script.write_text(
        "import json, sys\n"
        "hello = json.loads(sys.stdin.readline())\n"
        "print(json.dumps({'id': hello['id'], 'ok': True, 'name': 'crashy', 'version': None,"
        " 'protocol': 1, 'capabilities': ['key.kv_rank']}), flush=True)\n"
        "sys.stdin.readline()\n"
        "print('segfault imminent', file=sys.stderr, flush=True)\n"
        "sys.exit(3)\n"
    )
    run = run_suite([f"exec:{PY} {script}"], "-k", "key-kv-rank-single or key-kv-rank-zeros")
    assert run.returncode == 1
    failed = [t for t in run.results["tests"] if t["outcome"] == "fail"]
    assert len(failed) == 2
    assert all("testee-crash" in t["reason"] for t in failed)
    assert any("segfault imminent" in t["reason"] for t in failed)
