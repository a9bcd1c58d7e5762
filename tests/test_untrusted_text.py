"""Text from a file, a store or a peer is data wherever lmckv shows it
(lmckv/base/untrusted_text.py): a file name that is not UTF-8 neither crashes ``inspect``
nor ``fsck`` on a strict UTF-8 stdout (before, both ended in UnicodeEncodeError, and inspect
called a valid blob invalid), and a name with a line break or an escape sequence stays on its
line, escaped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmckv.base.untrusted_text import bare, shown

GOLDEN = Path(__file__).resolve().parents[1] / "golden_blobs" / "v1" / "codec"
STRICT = {**os.environ, "PYTHONIOENCODING": "utf-8"}


def lmckv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lmckv", *args], capture_output=True, text=True,
        encoding="utf-8", errors="replace", env=STRICT, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def a_valid_blob() -> bytes:
    return next(p for p in sorted(GOLDEN.iterdir()) if p.suffix == ".bin").read_bytes()


@pytest.fixture
def odd_names(tmp_path: Path) -> Path:
    """A folder with a valid blob under a name that is not UTF-8, and one under a name with a
    line break and a terminal escape sequence."""
    blob = a_valid_blob()
    (tmp_path / os.fsdecode(b"ok\xff.bin")).write_bytes(blob)
    (tmp_path / "evil\nFORGED: valid\x1b[31m.bin").write_bytes(blob)
    return tmp_path


def test_inspect_shows_a_name_that_is_not_utf8(odd_names: Path) -> None:
    path = odd_names / os.fsdecode(b"ok\xff.bin")
    done = lmckv("inspect", str(path))
    assert done.returncode == 0, done.stderr  # a valid blob, whatever its name
    assert "Traceback" not in done.stderr
    assert done.stdout.splitlines()[0] == shown(str(path)) and "\\xff" in done.stdout


def test_inspect_keeps_a_forged_line_on_its_own(odd_names: Path) -> None:
    path = odd_names / "evil\nFORGED: valid\x1b[31m.bin"
    done = lmckv("inspect", str(path))
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()[:2]
    assert first == shown(str(path)) and "\\n" in first and "\x1b" not in done.stdout
    assert second == "  valid"


def test_fsck_lists_names_that_are_not_utf8(odd_names: Path) -> None:
    done = lmckv("fsck", str(odd_names), "--no-progress")
    assert done.returncode == 1, done.stderr  # two foreign files: problems, not a crash
    assert "Traceback" not in done.stderr and "\x1b" not in done.stdout
    assert shown(os.fsdecode(b"ok\xff.bin")) in done.stdout


def test_bare_escapes_what_could_forge_or_break_a_line() -> None:
    assert bare("a\nb\rc\u202ed\x1b") == "a\\nb\\rc\\u202ed\\x1b"
    assert bare(os.fsdecode(b"\xfe")) == "\\xfe"
    assert bare('say "hi" \\') == 'say \\"hi\\" \\\\'
    assert bare("modèle/ü") == "modèle/ü"  # printable text stays as it is


def test_bench_compare_keeps_a_forged_case_on_its_line(tmp_path: Path) -> None:
    """A results file's free-text field (a row's ``case``) with a line break and an escape
    sequence is printed escaped: no line of the comparison starts with the forged text."""
    base = Path(__file__).parent / "fixtures" / "report" / "bench-cpu.jsonl"
    rows = [json.loads(line) for line in base.read_text().splitlines() if line.strip()]
    for row in rows:
        if row.get("kind") == "throughput":
            row["case"] += "\nFORGED: all good \x1b[32m"
    head = tmp_path / "head.jsonl"
    head.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = lmckv("bench", "compare", str(base), str(head))
    assert done.returncode in (0, 1, 3), done.stderr  # a verdict, not a crash or usage error
    assert "Traceback" not in done.stderr and "\x1b" not in done.stdout
    assert not any(line.startswith("FORGED") for line in done.stdout.splitlines())
    assert "\\nFORGED: all good \\x1b[32m" in done.stdout
