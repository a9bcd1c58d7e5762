"""``lmckv inspect``: header fields or error class per file, and the exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kv_blobs import paged_blob

from lmckv.cli import main
from lmckv.reference_impl.kv_codec import CodecHashes, ScaleScope

HEADER_KEYS = {
    "version", "scale_scope", "k_dtype", "v_dtype", "scale_dtype", "layer_id", "chunk_id",
    "chunk_size", "page_size", "kv_head_count", "head_dim", "scale_shape", "k_payload_len",
    "v_payload_len", "scale_payload_len", "header_len", "total_len", "crc32", "hashes", "blob_kind",
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
