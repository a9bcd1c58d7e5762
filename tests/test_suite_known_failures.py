"""Known-failure lists can only shrink: removing a line fails the run, and a listed test that
passes or no longer exists fails the run. That every listed upstream test fails today is what
the strict suite run of ``nox -s tests`` (``--impl reference --impl upstream``, every test,
the release's list) holds: a listed test that passes there is an unexpected pass and fails
the session, so this module checks the mechanism on single tests, not the lists again."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from upstream_required import upstream_missing

from lmckv.conformance.runner.known_failures import KNOWN_FAILURES_DIR, load
from lmckv.conformance.runner.subprocess_suite import run_suite

UPSTREAM_VERSION = "0.5.6"


def _upstream_reasons() -> dict[str, str]:
    if importlib.util.find_spec("lmcache") is None:
        upstream_missing("lmcache 0.5.6 is not installed, so upstream cannot be run")
    return load("upstream", UPSTREAM_VERSION).reasons


def _node(short: str) -> str:
    return "conformance/suite/" + short


def test_removing_a_line_fails_the_run(tmp_path: Path) -> None:
    reasons = _upstream_reasons()
    victim = next(line for line in reasons if "*" not in line)
    copy = tmp_path / "expectations"
    shutil.copytree(KNOWN_FAILURES_DIR, copy)
    listed = load("upstream", UPSTREAM_VERSION).path
    assert listed is not None
    path = copy / listed.name
    kept = [ln for ln in path.read_text().splitlines() if not ln.startswith(victim + " ")]
    path.write_text("\n".join(kept) + "\n")
    run = run_suite(
        ["upstream", "reference"], _node(victim), env={"LMCKV_KNOWN_FAILURES_DIR": str(copy)}
    )
    assert run.returncode == 1
    assert run.outcomes()[_node(victim)] == "fail"


def test_a_listed_test_that_passes_fails_the_run(tmp_path: Path) -> None:
    short = "test_keys.py::test_keys[reference-key-kv-rank-single]"
    (tmp_path / "reference.txt").write_text(f"{short} pretend it is broken\n")
    run = run_suite(["reference"], _node(short), env={"LMCKV_KNOWN_FAILURES_DIR": str(tmp_path)})
    assert run.returncode == 1
    assert run.outcomes()[_node(short)] == "unexpected_pass"


def test_a_stale_line_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "reference.txt").write_text("test_keys.py::test_keys[reference-gone] removed\n")
    run = run_suite(["reference"], env={"LMCKV_KNOWN_FAILURES_DIR": str(tmp_path)})
    assert run.returncode == 1
    assert "stale expectation" in run.output
    # Every test passes but the L2 adapter tests, which the reference does not declare, and
    # the v1 reader's half of the compatibility matrix (the reference reads v2).
    skipped = {i for i, outcome in run.outcomes().items() if outcome == "skip"}
    undeclared = ("test_codec_versions.py::test_v1_reader_", "test_store_load.py::")
    assert all(any(part in i for part in undeclared) for i in skipped), sorted(skipped)[:3]
    assert set(run.outcomes().values()) - {"skip"} == {"pass"}


def test_a_line_without_reason_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "reference.txt").write_text("test_keys.py::test_keys[reference-x]\n")
    run = run_suite(
        ["reference"], "-k", "key-kv-rank-single", env={"LMCKV_KNOWN_FAILURES_DIR": str(tmp_path)}
    )
    assert run.returncode != 0
    assert "has no reason" in run.output


def test_wildcard_lines_and_the_implementations_a_line_names() -> None:
    from lmckv.conformance.runner.known_failures import matches, participants

    line = "test_matrix.py::test_matrix_payload[upstream-to-*-enc-x]"
    assert matches(line, "test_matrix.py::test_matrix_payload[upstream-to-c-asan-enc-x]")
    assert not matches(line, "test_matrix.py::test_matrix_payload[reference-to-c-enc-x]")
    assert participants(line, ["reference", "upstream"]) == {"upstream"}
    exact = "test_matrix.py::test_matrix_payload[upstream-to-c-enc-x]"
    assert participants(exact, ["upstream", "c"]) == {"upstream", "c"}
    # a line naming an implementation the run did not load is never reported stale
    assert participants(exact, ["upstream", "reference"]) is None
    assert participants("test_keys.py::test_keys[upstream-key-a]", ["upstream"]) == {"upstream"}
