"""Known failures record what was observed: a listed upstream test that starts failing with
another message fails the run as "failure changed", naming both observations, and
``--update-expectations`` rewrites the observation (only) on purpose."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from upstream_required import upstream_missing

from lmckv.conformance.core.observations import join_reason, split_reason, stable_key
from lmckv.conformance.runner.known_failures import KNOWN_FAILURES_DIR, load
from lmckv.conformance.runner.subprocess_suite import run_suite

VICTIM = "test_protocol.py::test_protocol[upstream-proto-fmt-id-client-read-fmt-9]"
NODE = "conformance/suite/" + VICTIM
#: A pytest plugin that makes upstream's driver report another message for one failure.
PATCH = """
from lmckv.conformance.drivers.python_driver import PythonDriver

_call = PythonDriver.call


def call(self, op, **fields):
    res = _call(self, op, **fields)
    if not res["ok"] and "is not a valid MemoryFormat" in res.get("message", ""):
        res = {**res, "message": "memory format out of range"}
    return res


PythonDriver.call = call
"""


@pytest.fixture
def patched(tmp_path: Path) -> dict[str, str]:
    if importlib.util.find_spec("lmcache") is None:
        upstream_missing("lmcache 0.5.6 is not installed, so upstream cannot be run")
    (tmp_path / "lmckv_patch_message.py").write_text(PATCH, encoding="utf-8")
    lists = tmp_path / "lists"
    shutil.copytree(KNOWN_FAILURES_DIR, lists)
    return {"PYTHONPATH": str(tmp_path), "LMCKV_KNOWN_FAILURES_DIR": str(lists)}


def test_the_listed_observation_is_what_upstream_does(patched: dict[str, str]) -> None:
    lists = {"LMCKV_KNOWN_FAILURES_DIR": patched["LMCKV_KNOWN_FAILURES_DIR"]}
    assert load("upstream", "0.5.6").observation_for(VICTIM) is not None
    run = run_suite(["upstream"], NODE, env=lists)
    assert run.returncode == 0, run.output[-3000:]
    (test,) = run.results["tests"]
    assert test["outcome"] == "known_failure"
    assert test["observed"] == "raw:builtins.ValueError: # is not a valid MemoryFormat"


def test_a_changed_message_is_a_changed_failure(patched: dict[str, str]) -> None:
    run = run_suite(["upstream"], NODE, "-p", "lmckv_patch_message", env=patched)
    assert run.returncode == 1, run.output[-3000:]
    (test,) = run.results["tests"]
    assert test["outcome"] == "fail"
    assert test["observed"] == "raw:builtins.ValueError: memory format out of range"
    assert "failure changed: " in test["reason"]
    assert "[observed: raw:builtins.ValueError: # is not a valid MemoryFormat]" in test["reason"]
    assert "now [observed: raw:builtins.ValueError: memory format out of range]" in test["reason"]


def test_a_failure_listed_with_alternatives_matches_any_of_them(patched: dict[str, str]) -> None:
    """A line may list the ways a failure shows, timing deciding which: the changed message
    is then one of them, and the test is the known failure again."""
    lists = Path(patched["LMCKV_KNOWN_FAILURES_DIR"]) / "upstream-0.5.6.txt"
    was = "raw:builtins.ValueError: # is not a valid MemoryFormat"
    now = "raw:builtins.ValueError: memory format out of range"
    text = lists.read_text(encoding="utf-8")
    assert f"[observed: {was}]" in text
    lists.write_text(text.replace(f"[observed: {was}]", f"[observed: {was} ‖ {now}]"), "utf-8")
    run = run_suite(["upstream"], NODE, "-p", "lmckv_patch_message", env=patched)
    assert run.returncode == 0, run.output[-3000:]
    (test,) = run.results["tests"]
    assert (test["outcome"], test["observed"]) == ("known_failure", now)


def test_update_expectations_rewrites_only_the_observation(patched: dict[str, str]) -> None:
    path = Path(patched["LMCKV_KNOWN_FAILURES_DIR"]) / "upstream-0.5.6.txt"
    before = path.read_text(encoding="utf-8").splitlines()
    run = run_suite(
        ["upstream"], NODE, "-p", "lmckv_patch_message", "--update-expectations", env=patched
    )
    assert run.returncode == 0, run.output[-3000:]
    after = path.read_text(encoding="utf-8").splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert len(after) == len(before) and len(changed) == 1
    old, new = changed[0]
    assert new.startswith(VICTIM + " ")
    assert split_reason(old.partition(" ")[2])[0] == split_reason(new.partition(" ")[2])[0]
    assert new.endswith("[observed: raw:builtins.ValueError: memory format out of range]")
    again = run_suite(["upstream"], NODE, "-p", "lmckv_patch_message", env=patched)
    assert again.returncode == 0, again.output[-3000:]


def test_every_line_of_every_list_records_an_observation() -> None:
    for path in sorted(KNOWN_FAILURES_DIR.glob("*.txt")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                reason, observed = split_reason(line.partition(" ")[2])
                assert reason and observed, f"{path.name}: {line}"


def test_observation_format_round_trips(tmp_path: Path) -> None:
    text = join_reason("KV-CRC: a reason [with brackets]", "raw:struct.error: x [#]")
    assert text.endswith(" [observed: raw:struct.error: x [#]]")
    assert split_reason(text) == ("KV-CRC: a reason [with brackets]", "raw:struct.error: x [#]")
    assert split_reason("no observation") == ("no observation", None)
    blob = tmp_path / "blob.bin"
    assert stable_key(f"got 4096 bytes from {blob} at 0x7f00ab") == "got # bytes from <path> at #"
