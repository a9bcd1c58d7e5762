"""A fixed finding names its SPEC.md differences entry (conformance/runner/differences.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lmckv.conformance.runner.differences import entries, entry_for

LISTS = sorted(
    (Path(__file__).resolve().parents[1] / "conformance" / "known_failures").glob("*.txt")
)


def test_entries_are_numbered_in_order() -> None:
    numbers = [e.number for e in entries()]
    assert numbers == list(range(1, len(numbers) + 1))


def test_cited_item_wins() -> None:
    entry = entry_for("SERDE-READ: cannot read (differences item 38)")
    assert entry is not None and entry.number == 38 and "read back" in entry.title


def test_rule_named_in_an_item() -> None:
    entry = entry_for("KV-TRAILING: bytes after the payload accepted")
    assert entry is not None and entry.number == 3


def test_nothing_to_name() -> None:
    assert entry_for(None) is None
    assert entry_for("no rule here") is None


@pytest.mark.parametrize("path", LISTS, ids=lambda p: p.name)
def test_cited_items_exist(path: Path) -> None:
    """Every "differences item N" a known-failure reason cites is an item of SPEC.md."""
    known = {e.number for e in entries()}
    cited = {int(n) for n in re.findall(r"differences item (\d+)", path.read_text())}
    assert cited <= known, sorted(cited - known)


def test_an_unexpected_pass_names_the_differences_entry(tmp_path: Path) -> None:
    from test_suite_runner import run_suite

    short = "test_keys.py::test_keys[reference-key-kv-rank-single]"
    listed = tmp_path / "reference.txt"
    listed.write_text(f"{short} KV-TRAILING: pretend it is broken (differences item 3)\n")
    run = run_suite(
        ["reference"],
        "conformance/suite/" + short,
        env={"LMCKV_KNOWN_FAILURES_DIR": str(tmp_path), "CI": "1"},
    )
    assert run.returncode == 1
    entry = 'reference_impl/SPEC.md "Differences from upstream" item 3'
    (test,) = run.results["tests"]
    assert test["outcome"] == "unexpected_pass"
    assert f"delete line 1 of {listed} (described in {entry}" in test["reason"]
