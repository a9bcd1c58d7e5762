"""``lmckv fsck --metrics FILE`` (conformance/store/fsck_metrics.py): the Prometheus text file
parses with ``prometheus_client``'s own parser and says what the JSON report says (counts by
verdict, by rule and by model, bytes, duration, when it finished); a model name from the store
is a label value, escaped; a FILE that cannot be written is one line and exit 2 before the
store is read; the file is replaced whole."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_fsck_serdes import FULL, TOKENS, damage, write_store

from lmckv import cli
from lmckv.reference_impl.keys import ObjectKey, object_key_to_filename


def _metrics(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(path.read_text(encoding="utf-8")):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_the_metrics_say_what_the_report_says(tmp_path: Path) -> None:
    root = tmp_path / "store"
    paths = write_store(root, [os.urandom(FULL) for _ in range(8)])
    damage(paths, root, FULL)
    odd = ObjectKey(bytes(32), 'model "q"\nx', 0)  # a name with a quote and a newline
    (root / object_key_to_filename(odd)).write_bytes(os.urandom(FULL))
    metrics, report = tmp_path / "fsck.prom", tmp_path / "fsck.json"
    before = time.time()
    status = cli.main([
        "fsck", str(root), "--chunk-tokens", str(TOKENS), "--no-progress", "--jobs", "1",
        "--json", str(report), "--metrics", str(metrics),
    ])  # fmt: skip
    assert status == 1
    doc, got = json.loads(report.read_text()), _metrics(metrics)
    for status_name, count in doc["counts"].items():
        assert got[("lmckv_fsck_entries", (("status", status_name),))] == count
    for rule, count in doc["problems_by_rule"].items():
        assert got[("lmckv_fsck_problems", (("rule", rule),))] == count
    assert sum(v for (n, _), v in got.items() if n == "lmckv_fsck_problems") == 4
    assert got[("lmckv_fsck_model_objects", (("model", 'model "q"\nx'),))] == 1
    models = {dict(k[1])["model"] for k in got if k[0] == "lmckv_fsck_model_objects"}
    assert models == {t["model_name"] for t in doc["totals"]}
    assert got[("lmckv_fsck_bytes", ())] == doc["bytes"]
    assert got[("lmckv_fsck_checked_objects", ())] == doc["checked"]
    assert got[("lmckv_fsck_incomplete", ())] == 0
    assert 0 < got[("lmckv_fsck_duration_seconds", ())] < 60
    assert before <= got[("lmckv_fsck_last_run_timestamp_seconds", ())] <= time.time()
    info = [dict(k[1]) for k in got if k[0] == "lmckv_fsck_info"]
    assert info == [{"adapter": "fs", "store": str(root), "serde": "unknown"}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fsck.json", "fsck.prom", "store"]


def test_a_metrics_file_that_cannot_be_written_is_exit_2_before_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    write_store(root, [os.urandom(FULL)])
    for bad in (tmp_path / "no-such-folder" / "fsck.prom", tmp_path):
        capsys.readouterr()
        status = cli.main(["fsck", str(root), "--no-progress", "--metrics", str(bad)])
        err = capsys.readouterr()
        assert status == 2 and err.out == ""  # nothing checked, nothing printed
        assert len(err.err.strip().splitlines()) == 1 and "--metrics" in err.err


def test_the_metrics_of_a_repair_say_what_was_repaired(tmp_path: Path) -> None:
    root = tmp_path / "store"
    paths = write_store(root, [os.urandom(FULL) for _ in range(8)])
    damage(paths, root, FULL)  # cut, emptied, flipped (unseen), renamed, foreign
    metrics, report = tmp_path / "fsck.prom", tmp_path / "fsck.json"
    status = cli.main([
        "fsck", str(root), "--serde", "none", "--chunk-tokens", str(TOKENS), "--no-progress",
        "--jobs", "1", "--repair", "--json", str(report), "--metrics", str(metrics),
    ])  # fmt: skip
    assert status == 4  # the renamed and the foreign entry are left
    doc, got = json.loads(report.read_text()), _metrics(metrics)
    assert doc["repair"]["outcomes"]["removed"] == 2 and doc["repair"]["outcomes"]["left"] == 2
    for outcome, count in doc["repair"]["outcomes"].items():
        assert got[("lmckv_fsck_repairs", (("outcome", outcome),))] == count
    repaired = {dict(k[1])["rule"]: v for k, v in got.items() if k[0] == "lmckv_fsck_repaired"}
    assert repaired == {"STORE-SIZE": 1, "STORE-EMPTY": 1}
    assert got[("lmckv_fsck_uncorrected", ())] == 2
    assert got[("lmckv_fsck_read_bytes", ())] == doc["read_bytes"] > 0
