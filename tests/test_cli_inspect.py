"""``lmckv inspect``: header fields or error class per file, and the exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kv_blobs import paged_blob

from lmckv.cli import main
from lmckv.conformance.core.golden_vectors import golden_file
from lmckv.reference_impl.kv_codec import CodecHashes, ScaleScope

HEADER_KEYS = {
    "version", "scale_scope", "k_dtype", "v_dtype", "scale_dtype", "layer_id", "chunk_id",
    "chunk_size", "page_size", "kv_head_count", "head_dim", "scale_shape", "k_payload_len",
    "v_payload_len", "scale_payload_len", "header_len", "total_len", "crc32", "hashes", "blob_kind",
    "scale_scheme",
}  # fmt: skip


@pytest.fixture
def blobs(tmp_path: Path) -> dict[str, Path]:
    good = paged_blob(ScaleScope.PER_LAYER_HEAD, hashes=CodecHashes(model_id="m"))
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    paths = {"good": tmp_path / "good.bin", "bad": tmp_path / "bad.bin"}
    paths["good"].write_bytes(good)
    paths["bad"].write_bytes(bad)
    return paths


def _json_lines(capsys: pytest.CaptureFixture[str]) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_json_valid(blobs, capsys) -> None:
    assert main(["inspect", "--json", str(blobs["good"])]) == 0
    (record,) = _json_lines(capsys)
    assert record["valid"] is True and set(record["header"]) == HEADER_KEYS
    header = record["header"]
    assert (header["version"], header["scale_scheme"]) == (1, "COMPUTED_PER_TENSOR")
    assert header["scale_scope"] == "PER_LAYER_HEAD"
    assert (header["k_dtype"], header["v_dtype"]) == ("float16", "float8_e4m3fn")
    assert header["scale_shape"] == [2]
    assert header["hashes"]["model_id"] == "m" and len(header["hashes"]) == 6
    assert header["total_len"] == blobs["good"].stat().st_size


def test_json_invalid_and_exit_1(blobs, capsys) -> None:
    assert main(["inspect", "--json", str(blobs["good"]), str(blobs["bad"])]) == 1
    good, bad = _json_lines(capsys)
    assert good["valid"] and not bad["valid"]
    assert bad["error"] == "CorruptEncodedKVError" and "CRC" in bad["message"]
    assert bad["rule"] == "KV-CRC"


def _golden_v2(name: str) -> bytes:
    return golden_file(f"v2/codec/{name}.bin")


def test_v2_blob_shows_version_and_scheme(tmp_path, capsys) -> None:
    """A golden v2 blob (built byte by byte, not by the reference): version 2, RAW_UNIT,
    scope NONE, in both the JSON record and the table."""
    path = tmp_path / "v2.bin"
    path.write_bytes(_golden_v2("kv2-raw_unit-none-v_only"))
    assert main(["inspect", "--json", str(path)]) == 0
    (record,) = _json_lines(capsys)
    header = record["header"]
    assert (header["version"], header["scale_scheme"]) == (2, "RAW_UNIT")
    assert (header["scale_scope"], header["blob_kind"]) == ("NONE", "v_only")
    assert header["crc32"] == 0xC71B1532
    assert main(["inspect", str(path)]) == 0
    table = capsys.readouterr().out
    assert re.search(r"^  version +2$", table, re.M)
    assert re.search(r"^  scale_scheme +RAW_UNIT$", table, re.M)


def test_v2_header_bit_flip_is_refused_under_the_header_crc(tmp_path, capsys) -> None:
    """One header bit flipped in a v2 blob (layer_id 3 -> 2; every field still valid): only
    the header CRC can see it, and inspect refuses the file under KV2-CRC."""
    path = tmp_path / "flip.bin"
    path.write_bytes(_golden_v2("kv2-flip-layer-id"))
    assert main(["inspect", "--json", str(path)]) == 1
    (record,) = _json_lines(capsys)
    assert (record["valid"], record["rule"]) == (False, "KV2-CRC")


def test_unreadable_file_exit_2(blobs, tmp_path, capsys) -> None:
    assert main(["inspect", str(blobs["bad"]), str(tmp_path / "missing.bin")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_usage_error_exit_2(capsys) -> None:
    assert main(["inspect"]) == 2
    assert main(["inspect", "--bogus", "x"]) == 2


def test_decode_stats(blobs, capsys) -> None:
    assert main(["inspect", "--json", "--decode", str(blobs["good"])]) == 0
    (record,) = _json_lines(capsys)
    stats = record["stats"]
    assert stats["k_shape"] == [2, 4, 2, 8] and stats["v_shape"] == [2, 4, 2, 8]
    assert len(stats["v_absmax_per_group"]) == 2  # one per head in PER_LAYER_HEAD
    assert stats["v_nan"] == 0 and stats["k_inf"] == 0


def test_plain_table(blobs, capsys) -> None:
    assert main(["inspect", str(blobs["good"]), str(blobs["bad"])]) == 1
    out = capsys.readouterr().out
    assert "PER_LAYER_HEAD" in out and "INVALID [KV-CRC]  CorruptEncodedKVError" in out


def test_console_script_runs_as_module(blobs) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lmckv", "inspect", "--json", str(blobs["bad"])],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and json.loads(done.stdout)["valid"] is False
