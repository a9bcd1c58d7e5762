"""The golden vectors: regenerated deterministically, checked byte for byte, well-formed."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lmckv.conformance.core.rules import RULES

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "golden_blobs"
FORMATS = ("codec", "protocol", "keys")


def _check(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lmckv.conformance.golden", "--check", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_golden_check_passes_on_the_committed_tree() -> None:
    proc = _check(GOLDEN)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_golden_check_names_a_changed_byte(tmp_path: Path) -> None:
    copy = tmp_path / "golden_blobs"
    shutil.copytree(GOLDEN, copy)
    victim = copy / "v1" / "codec" / "enc-per_tensor-f16-nhd-2x4x2x8.bin"
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0x01
    victim.write_bytes(bytes(data))
    (copy / "v1" / "codec" / "stray.bin").write_bytes(b"x")
    proc = _check(copy)
    assert proc.returncode == 1
    assert "differs: v1/codec/enc-per_tensor-f16-nhd-2x4x2x8.bin" in proc.stdout
    assert "extra: v1/codec/stray.bin" in proc.stdout


@pytest.mark.parametrize("fmt", FORMATS)
def test_manifest_is_well_formed(fmt: str) -> None:
    manifest = json.loads((GOLDEN / "v1" / f"{fmt}.json").read_text())
    assert manifest["format_version"] == 1
    vectors = manifest["vectors"]
    assert manifest["number_of_vectors"] == len(vectors) > 0
    ids = [v["id"] for v in vectors]
    assert len(set(ids)) == len(ids)
    for v in vectors:
        assert v["rule"] in RULES, v["id"]
        assert v["result"] in ("valid", "invalid", "acceptable"), v["id"]
        assert v["comment"], v["id"]
        assert set(v["flags"]) <= set(manifest["notes"]), v["id"]
        assert ("error" in v["expected"]) == (v["result"] == "invalid"), v["id"]
        if "blob" in v:
            data = (GOLDEN / v["blob"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == v["blob_sha256"], v["id"]


def test_every_format_has_valid_and_invalid_vectors() -> None:
    for fmt in FORMATS:
        results = {
            v["result"] for v in json.loads((GOLDEN / "v1" / f"{fmt}.json").read_text())["vectors"]
        }
        assert {"valid", "invalid"} <= results, fmt


def test_binary_files_stay_small() -> None:
    total = sum(p.stat().st_size for p in GOLDEN.rglob("*") if p.is_file())
    assert total < 3 * 1024 * 1024, f"golden_blobs holds {total} bytes"
