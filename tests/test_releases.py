"""Every LMCache release: the known-failure list a release uses, the skip reason of a removed
API, the cross-release steps and the report's release section (no lmcache needed)."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest

import lmckv.reference_impl.keys
import lmckv.reference_impl.kv_codec
import lmckv.reference_impl.protocol
from lmckv.conformance.drivers.python_driver import PythonDriver
from lmckv.conformance.releases import cross, listed_versions
from lmckv.conformance.runner.known_failures import load, upstream_list_path
from lmckv.reports.output import Output
from lmckv.reports.releases_section import (
    format_sentences,
    releases_section,
    rule_table,
    store_table,
)


def _lists(tmp_path: Path, *versions: str) -> Path:
    for v in versions:
        (tmp_path / f"upstream-{v}.txt").write_text("# empty\n")
    (tmp_path / "upstream-notaversion.txt").write_text("# ignored\n")
    return tmp_path


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.5.3", "upstream-0.5.3.txt"),
        ("0.5.4", "upstream-0.5.3.txt"),  # nearest earlier
        ("0.5.7rc1", "upstream-0.5.3.txt"),  # pre-releases sort before their release
        ("0.5.7rc2", "upstream-0.5.7rc2.txt"),
        ("0.5.7", "upstream-0.5.7rc2.txt"),
        ("0.6.0", "upstream-0.5.7rc2.txt"),
        ("0.5.2", None),  # older than every list
        ("main", None),  # not a version
    ],
)
def test_a_release_uses_its_list_or_the_nearest_earlier(
    tmp_path: Path, version: str, expected: str | None
) -> None:
    found = upstream_list_path(version, _lists(tmp_path, "0.5.3", "0.5.7rc2"))
    assert (found.name if found else None) == expected


def test_the_committed_lists_cover_every_listed_release() -> None:
    versions = listed_versions()
    assert versions[:1] == ["0.5.3"] and "0.5.7rc2" in versions
    for version in versions:
        listed = load("upstream", version)
        assert listed.path is not None, version
        assert listed.reasons, version
    fallback = load("upstream", "0.5.4")
    assert fallback.path is not None and fallback.path.name == "upstream-0.5.3.txt"
    assert fallback.source == "upstream-0.5.3.txt (nearest earlier release; no upstream-0.5.4.txt)"
    assert load("upstream", "0.5.7rc2").source == "upstream-0.5.7rc2.txt"
    assert load("reference", "0.1.0").source == "none"


def test_a_removed_api_is_an_undeclared_capability_named_in_the_skip() -> None:
    protocol = types.SimpleNamespace(
        **{k: v for k, v in vars(lmckv.reference_impl.protocol).items() if k != "ClientMetaMessage"}
    )
    driver = PythonDriver(
        "upstream",
        lmckv.reference_impl.kv_codec,
        protocol,
        lmckv.reference_impl.keys,
        version="0.5.7rc2",
        label="lmcache 0.5.7rc2",
    )
    assert not driver.supports("proto.client.read")
    assert driver.supports("proto.server.read") and driver.supports("codec.parse")
    assert driver.unsupported_reason("proto.client.read") == (
        "upstream does not declare capability proto.client.read: "
        "lmcache 0.5.7rc2 has no ClientMetaMessage"
    )
    assert driver.call("proto.client.read", msg=b"")["error"] == "UnsupportedOperation"


def _test(rule: str, outcome: str, n: int, reason: str | None = None) -> dict[str, Any]:
    return {
        "id": f"conformance/suite/test_x.py::t[upstream-{rule}-{n}]",
        "impl": "upstream",
        "rule": rule,
        "outcome": outcome,
        "reason": reason,
        "producer": None,
    }


def _releases(tmp_path: Path) -> Path:
    skip = "upstream does not declare capability proto.client.read: lmcache 0.5.7rc2 has no X"
    runs = {
        "0.5.3": [_test("KV-CRC", "pass", 1), _test("PROTO-A", "known_failure", 1)],
        "0.5.6": [_test("KV-CRC", "pass", 1), _test("PROTO-A", "known_failure", 1)],
        "0.5.7rc2": [_test("KV-CRC", "pass", 1), _test("PROTO-A", "skip", 1, skip)],
    }
    for version, tests in runs.items():
        folder = tmp_path / version / "encoded"
        folder.mkdir(parents=True)
        (folder / "enc-a.bin").write_bytes(b"same bytes")
        (tmp_path / version / "results.json").write_text(json.dumps({"tests": tests}))
        reads = {p: {"enc-a": "pass"} for p in runs}
        (tmp_path / version / "read.json").write_text(json.dumps(reads))
    summary = cross.summarize(tmp_path, list(runs))
    assert cross.problems(summary) == []
    path = tmp_path / "releases.json"
    path.write_text(json.dumps(summary))
    return path


def test_release_table_and_format_sentences(tmp_path: Path) -> None:
    path = _releases(tmp_path)
    summary = json.loads(path.read_text())
    tests = {
        v: json.loads((tmp_path / v / "results.json").read_text())["tests"]
        for v in summary["versions"]
    }
    frame = rule_table(summary["versions"], tests)
    assert frame.set_index("rule").loc["PROTO-A"].tolist() == [
        "protocol messages",
        "known failure",
        "known failure",
        "skipped",
    ]
    sentences = format_sentences(summary, tests)
    assert sentences["encoded KV blob"].startswith("unchanged since 0.5.3")
    assert "1 of 1 canonical inputs encode to identical bytes" in sentences["encoded KV blob"]
    assert "9 of 9 cross-release reads" in sentences["encoded KV blob"]
    assert sentences["protocol messages"] == (
        "changed: lmcache 0.5.7rc2 has no X, so 1 test that ran on 0.5.6 skips there; "
        "every other test as on 0.5.3"
    )
    section = releases_section(path, Output(tmp_path / "report"))
    assert "PROTO-A" in section.body and "o-skip" in section.body


def test_differing_encodes_are_problems(tmp_path: Path) -> None:
    for version, data in (("1.0", b"a"), ("1.1", b"b")):
        (tmp_path / version / "encoded").mkdir(parents=True)
        (tmp_path / version / "encoded" / "enc-a.bin").write_bytes(data)
    found = cross.problems(cross.summarize(tmp_path, ["1.0", "1.1"]))
    assert found[0].startswith("encode enc-a: 1.0=")
    assert "read: 1.0 read nothing" in found[1]


def test_no_releases_file_is_a_visible_note(tmp_path: Path) -> None:
    section = releases_section(None, Output(tmp_path))
    assert "nox -s upstream_versions" in section.body


def test_store_reads_and_fsck_verdicts_in_the_summary_and_section(tmp_path: Path) -> None:
    path = _releases(tmp_path)
    summary = json.loads(path.read_text())
    summary["store_fsck"] = {
        "0.5.3": {"files": 2, "problems": {}},
        "0.5.6": {"files": 2, "problems": {"STORE-BLOB-VALID": 1}},
    }
    summary["store_read"] = {
        "0.5.3": {"0.5.3": {"a.data": "pass", "b.data": "pass"}, "0.5.6": {"a.data": "pass"}},
        "0.5.6": {"0.5.3": {"a.data": "pass", "b.data": "fail: K differs"}},
    }
    frame = store_table(summary)
    assert frame.to_dict("records") == [
        {"written by": "0.5.3", "files": 2, "lmckv fsck": "clean",
         "read by 0.5.3": "2/2", "read by 0.5.6": "1/2"},
        {"written by": "0.5.6", "files": 2, "lmckv fsck": "1 STORE-BLOB-VALID",
         "read by 0.5.3": "1/1", "read by 0.5.6": "-"},
    ]  # fmt: skip
    assert cross.problems(summary) == [
        "store: 0.5.6 reading 0.5.3's store: 1 of 2 files fail, first b.data: fail: K differs"
    ]
    path.write_text(json.dumps(summary))
    section = releases_section(path, Output(tmp_path / "report"))
    assert "read by 0.5.6" in section.body and "1 STORE-BLOB-VALID" in section.body
