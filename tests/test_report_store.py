"""The report's "Stores" section, from what ``lmckv fsck --json`` wrote about a store whose
names come from the store (data: escaped wherever the page shows them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lmckv import cli
from lmckv.reference_impl.keys import ObjectKey, object_key_to_filename
from lmckv.reports.output import Output
from lmckv.reports.store_section import StoreInputError, store_section


def _fsck_json(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    root.mkdir()
    for i in range(3):
        key = ObjectKey(bytes([i]), "org/<b>model</b>", 0, 0, "")
        (root / object_key_to_filename(key)).write_bytes(os.urandom(4096))
    (root / "<script>alert(1).txt").write_text("x")
    out = tmp_path / "fsck.json"
    assert cli.main(["fsck", str(root), "--json", str(out), "--no-progress", "--jobs", "1"]) == 1
    return out


def test_the_section_shows_the_store_its_problems_and_totals(tmp_path: Path) -> None:
    section = store_section([_fsck_json(tmp_path)], Output(tmp_path / "report"))
    assert "fs store" in section.body and "1 problems" in section.body
    assert "only sizes were checked" in section.body
    assert "STORE-FOREIGN" in section.body
    assert "<script>" not in section.body and "&lt;script&gt;" in section.body
    assert "<b>model" not in section.body
    assert (tmp_path / "report" / "store_0_totals.csv").is_file()


def test_the_section_shows_what_a_repair_did(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    for i in range(4):
        key = ObjectKey(bytes([i]), "org/model", 0, 0, "")
        (root / object_key_to_filename(key)).write_bytes(os.urandom(4096 if i else 100))
    out = tmp_path / "fsck.json"
    argv = ["fsck", str(root), "--serde", "none", "--repair", "--json", str(out), "--no-progress"]
    assert cli.main(argv) == 1  # the one damaged object removed: all corrected
    section = store_section([out], Output(tmp_path / "report"))
    assert "Repaired: 1 removed, 0 quarantined" in section.body
    assert "0 problems left in the store" in section.body
    assert ">removed<" in section.body  # the problem's row says how its repair ended


def test_no_store_is_a_note_and_a_bad_file_is_refused(tmp_path: Path) -> None:
    assert "no store checked" in store_section([], Output(tmp_path / "r")).body
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "lmckv-fsck"}))
    with pytest.raises(StoreInputError, match="not an lmckv fsck report"):
        store_section([bad], Output(tmp_path / "r2"))


def test_fsck_json_of_a_store_with_many_problems_reads_back(tmp_path: Path) -> None:
    """Past what a whole read allows (a million JSON items): 250k problems, as fsck writes
    them; the page counts them all and shows the first ones. Cut short, or with a count
    that disagrees, the file is refused."""
    from lmckv.conformance.store.fsck import Report, Verdict
    from lmckv.conformance.store.spec import from_target

    report = Report(from_target(str(tmp_path)), "none", False)
    for i in range(250_000):
        report.add(Verdict(f"junk-{i}.txt", 1, "foreign").problem("STORE-FOREIGN", "foreign"))
    path = tmp_path / "fsck.json"
    with path.open("w", encoding="utf-8") as out:
        report.write_json(out)
    report.close()
    section = store_section([path], Output(tmp_path / "report"))
    assert "250000 problems" in section.body and "junk-0.txt" in section.body
    assert "junk-249999.txt" not in section.body  # only the first are shown
    text = path.read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    with pytest.raises(StoreInputError):
        store_section([cut], Output(tmp_path / "r2"))
    fewer = tmp_path / "fewer.json"
    lines = text.splitlines(keepends=True)
    gone = next(i for i, line in enumerate(lines) if '"junk-1000.txt"' in line)
    fewer.write_text("".join(lines[:gone] + lines[gone + 1 :]))  # one problem line less
    with pytest.raises(StoreInputError):
        store_section([fewer], Output(tmp_path / "r3"))
    long_line = tmp_path / "long.json"  # a line is read within its bound, shown or not
    lines[gone] = '  {"name": "' + "x" * (2 << 20) + '"},\n'
    long_line.write_text("".join(lines))
    with pytest.raises(StoreInputError, match="longer than"):
        store_section([long_line], Output(tmp_path / "r4"))
