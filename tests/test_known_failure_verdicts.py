"""Known-failure verdicts on their own (conformance/runner/known_failures.py, Verdicts):
collection reason, outcome of a report, unexpected pass, changed failure, stale lines and
--update-expectations, without running pytest inside pytest."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmckv.conformance.runner import known_failures as exp

KEYS = "test_keys.py::test_keys[{}-key-a]"
MATRIX = "test_matrix.py::test_matrix_payload[upstream-to-{}-enc-x]"


@pytest.fixture
def lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, exp.KnownFailures]:
    monkeypatch.setattr(exp, "KNOWN_FAILURES_DIR", tmp_path)
    (tmp_path / "upstream-0.5.6.txt").write_text(
        "# comment\n"
        f"{KEYS.format('upstream')} keys differ [observed: raw:builtins.ValueError: bad]\n"
        f"{MATRIX.format('*')} upstream's payload is wrong\n"
        "test_keys.py::test_keys[upstream-gone] removed since\n",
        encoding="utf-8",
    )
    (tmp_path / "c.txt").write_text(f"{KEYS.format('c')} c is wrong [observed: accepted]\n")
    return {
        "reference": exp.load("reference", None),
        "upstream": exp.load("upstream", "0.5.6"),
        "c": exp.load("c", None),
    }


def test_reason_comes_from_the_first_listing_implementation(lists) -> None:
    verdicts = exp.Verdicts(lists)
    assert verdicts.reason(KEYS.format("upstream"), ["upstream"]) == "keys differ"
    assert verdicts.reason(KEYS.format("reference"), ["reference"]) is None
    # a matrix test: the consumer's list first, then the producer's; the * matches any consumer
    matrix = MATRIX.format("reference")
    assert verdicts.reason(matrix, ["reference", "upstream"]) == "upstream's payload is wrong"
    assert verdicts.reason(matrix, ["reference"]) is None


def test_a_listed_test_that_passes_names_its_line(lists) -> None:
    verdicts = exp.Verdicts(lists)
    exact = verdicts.on_pass(KEYS.format("upstream"), ["upstream"])
    assert exact.startswith(exp.UNEXPECTED_PASS)
    assert "delete line 2 of " in exact and exact.endswith(f": {KEYS.format('upstream')}")
    pattern = verdicts.on_pass(MATRIX.format("c"), ["c", "upstream"])
    assert "line 3 of " in pattern and "narrow the pattern" in pattern
    assert MATRIX.format("*") in pattern and pattern.endswith(MATRIX.format("c"))
    assert exp.is_unexpected_pass(f"[KEY-A SPEC.md#key-a] {exact}")
    assert exp.is_unexpected_pass("[XPASS(strict)] keys differ")
    assert not exp.is_unexpected_pass("[KEY-A SPEC.md#key-a] AssertionError: x")


def test_a_failure_is_changed_only_against_a_recorded_observation(lists) -> None:
    verdicts = exp.Verdicts(lists)
    upstream = KEYS.format("upstream")
    assert verdicts.on_failure(upstream, ["upstream"], "raw:builtins.ValueError: bad") is None
    changed = verdicts.on_failure(upstream, ["upstream"], "accepted")
    assert changed is not None and changed.startswith(exp.FAILURE_CHANGED)
    assert "raw:builtins.ValueError: bad" in changed and "accepted" in changed
    assert "line 2 of " in changed
    # no observation recorded on the line: any failure is the known one
    assert verdicts.on_failure(MATRIX.format("c"), ["c", "upstream"], "accepted") is None
    # --update-expectations rewrites instead of failing the test
    updating = exp.Verdicts(lists, updating=True)
    assert updating.on_failure(upstream, ["upstream"], "accepted") is None


@pytest.mark.parametrize(
    ("when", "state", "xfailed", "message", "outcome"),
    [
        ("call", "passed", False, "", "pass"),
        ("call", "skipped", True, "", "known_failure"),
        ("call", "skipped", False, "", "skip"),
        ("call", "failed", False, "[XPASS(strict)] listed", "unexpected_pass"),
        ("call", "failed", False, "[R SPEC.md#r] unexpected pass: delete", "unexpected_pass"),
        ("call", "failed", False, "[R SPEC.md#r] AssertionError", "fail"),
        ("setup", "failed", False, "stopped answering", "fail"),
        ("teardown", "failed", False, "", "fail"),
        ("setup", "skipped", False, "", "skip"),
        ("setup", "skipped", True, "", "known_failure"),
        ("setup", "passed", False, "", None),
        ("teardown", "passed", False, "", None),
        ("teardown", "skipped", False, "", None),
    ],
)
def test_outcome_of_a_report(when, state, xfailed, message, outcome) -> None:
    assert exp.Verdicts.outcome(when, state, xfailed, message) == outcome


def test_stale_lines_are_those_no_test_of_a_run_matches(lists) -> None:
    verdicts = exp.Verdicts(lists)
    ran = [KEYS.format("upstream"), MATRIX.format("reference"), KEYS.format("c")]
    stale = verdicts.stale(ran, ["reference", "upstream", "c"])
    assert stale == ["upstream-0.5.6.txt: test_keys.py::test_keys[upstream-gone]"]
    # lines naming an implementation the run did not load are never stale
    assert verdicts.stale([], ["reference"]) == []
    assert len(verdicts.stale([], ["reference", "upstream"])) == 3


def test_rewrite_writes_one_observation_per_line(lists) -> None:
    path = lists["upstream"].path
    assert path is not None
    before = path.read_text()
    matrix_c, matrix_ref = MATRIX.format("c"), MATRIX.format("reference")
    verdicts = exp.Verdicts(lists, updating=True)
    done = verdicts.rewrite(
        [
            (KEYS.format("upstream"), ["upstream"], "fields: a"),
            (matrix_c, ["c", "upstream"], "accepted"),
            (matrix_ref, ["reference", "upstream"], "failed: other"),
            (KEYS.format("reference"), ["reference"], "accepted"),  # listed nowhere
        ]
    )
    assert len(done.problems) == 1 and "2 different failures" in done.problems[0]
    assert MATRIX.format("*") in done.problems[0]
    ((where, changed),) = done.lists
    assert where.endswith("upstream-0.5.6.txt") and changed == [KEYS.format("upstream")]
    after = path.read_text().splitlines()
    assert after[1] == f"{KEYS.format('upstream')} keys differ [observed: fields: a]"
    assert after[0] == "# comment" and after[2:] == before.splitlines()[2:]
    # agreeing tests of a pattern line write their one observation
    again = exp.Verdicts({**lists, "upstream": exp.load("upstream", "0.5.6")})
    done = again.rewrite([(matrix_c, ["c", "upstream"], "accepted")])
    assert done.problems == [] and done.lists[0][1] == [MATRIX.format("*")]
    assert path.read_text().splitlines()[2].endswith("[observed: accepted]")
