"""Blob files read as a stream (``reference_impl.kv_codec.blob_file``, ``lmckv inspect``):
the header first, the declared lengths against the file size before any payload byte, the
CRC in pieces; memory bounded whatever the file claims; only regular files read."""

from __future__ import annotations

import dataclasses
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lmckv.reference_impl.kv_codec import (
    AsymK16V8Codec,
    CodecHashes,
    CorruptEncodedKVError,
    ScaleScope,
    blob_file,
)
from lmckv.reference_impl.kv_codec.blob_file import (
    BlobFileError,
    BlobFileLimitError,
    check_blob_file,
)
from lmckv.reference_impl.kv_codec.checksum import payload_crc32
from lmckv.reference_impl.kv_codec.header import pack_header_fields

PIECE = bytes(range(256)) * 4096  # 1 MiB: valid float16 and float8 bytes alike


def _tiny(hashes: CodecHashes | None = None) -> bytearray:
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_TENSOR)
    k, v = torch.randn(64, dtype=torch.float16), torch.randn(64, dtype=torch.float16)
    return bytearray(codec.to_bytes(codec.encode(k, v, hashes=hashes)))


def _write_blob(path: Path, elements: int, *, claim: int | None = None, size: int = 0) -> None:
    """A PER_TENSOR blob of ``elements`` K/V elements written piece by piece; with
    ``claim``, a header declaring ``claim`` K elements and no payload, then the file
    extended (sparse) to ``size`` bytes."""
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_TENSOR)
    enc = codec.encode(torch.randn(64, dtype=torch.float16), torch.randn(64, dtype=torch.float16))
    n = claim if claim is not None else elements
    big = dataclasses.replace(
        enc, k_payload_len=2 * n, v_payload_len=n, payload=b"", header_bytes=None, blob=None
    )
    scale = bytes(enc.payload[-enc.scale_payload_len :])
    lengths = [len(PIECE)] * (3 * elements // len(PIECE)) + [3 * elements % len(PIECE)]
    crc = 0
    for m in lengths:
        crc = payload_crc32(PIECE[:m], crc)
    crc = payload_crc32(scale, crc)
    with path.open("wb") as f:
        f.write(pack_header_fields(big) + struct.pack("<I", crc))
        if claim is None:
            for m in lengths:
                f.write(PIECE[:m])
            f.write(scale)
        else:
            f.truncate(size)


#: Appended to a ``python -c`` program: print the process's peak resident set (VmHWM, bytes;
#: unlike ru_maxrss it does not carry the forked parent's size across exec) and whether torch
#: was imported, as the last line of stderr.
REPORT = (
    "; import sys as _s; _h = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]"
    "; print(int(_h[0].split()[1]) * 1024, 'torch' in _s.modules, file=_s.stderr)"
)


def _peak_rss(code: str, *args: str) -> tuple[int, int, bool, str]:
    """Run ``python -c CODE ARGS`` (CODE leaves its exit status in ``status``); its exit
    status, peak resident set (bytes), whether it imported torch, and stderr."""
    program = f"{code}{REPORT}; _s.exit(status)"
    proc = subprocess.run(
        [sys.executable, "-c", program, *args], capture_output=True, text=True, timeout=120
    )
    *err, last = proc.stderr.strip().splitlines() or [""]
    peak, torch_loaded = last.split()
    return proc.returncode, int(peak), torch_loaded == "True", "\n".join(err)


def test_a_huge_claim_in_a_sparse_file_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """4 GiB sparse file, header claiming 2**62 bytes: ``lmckv inspect`` exits 1 with
    KV-LEN-SUM, under 100 MB of peak memory (issue 21): the header check loads no torch."""
    path = tmp_path / "huge.bin"
    _write_blob(path, 0, claim=2**61, size=4 << 30)
    assert path.stat().st_size == 4 << 30
    code = "from lmckv.cli import main; status = main(['inspect', '--json', _s.argv[1]])"
    status, peak, torch_loaded, err = _peak_rss(f"import sys as _s; {code}", str(path))
    assert status == 1, err
    assert not torch_loaded
    assert peak < 100 << 20, f"peak {peak >> 20} MiB"
    with pytest.raises(CorruptEncodedKVError) as caught:
        check_blob_file(path)
    assert caught.value.rule == "KV-LEN-SUM"


def test_a_valid_blob_is_checked_in_pieces(tmp_path: Path) -> None:
    """A 96 MiB valid blob: accepted, its CRC computed in pieces (one flipped payload byte
    is KV-CRC), the peak memory within 32 MiB of the baseline."""
    path = tmp_path / "valid.bin"
    _write_blob(path, 32 << 20)
    enc = check_blob_file(path)
    assert enc.header_bytes is not None and not hasattr(enc, "payload")  # header only
    header_len = len(enc.header_bytes)
    assert path.stat().st_size == header_len + 96 * (1 << 20) + 4
    code = "import sys as _s; from lmckv.reference_impl.kv_codec.blob_file import check_blob_file"
    status, peak, _, err = _peak_rss(f"{code}; check_blob_file(_s.argv[1]); status = 0", str(path))
    assert status == 0, err
    _, baseline, _, _ = _peak_rss("import lmckv.reference_impl.kv_codec.blob_file; status = 0")
    assert peak - baseline < 32 << 20, f"peak {peak >> 20} MiB"
    with path.open("r+b") as f:
        f.seek(header_len + (50 << 20))
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(CorruptEncodedKVError) as caught:
        check_blob_file(path)
    assert caught.value.rule == "KV-CRC"


def test_same_verdicts_as_the_in_memory_reader(tmp_path: Path) -> None:
    """Cut, extended, and a header longer than the first read: the rule is the one
    ``from_bytes`` gives for the same bytes."""
    good = _tiny(CodecHashes(model_id="m" * 20000, tokenizer_hash="t" * 20000))
    cases = {"good": good, "cut": good[:-3], "extra": good + b"\0", "header-cut": good[:5000]}
    for name, data in cases.items():
        path = tmp_path / f"{name}.bin"
        path.write_bytes(data)
        try:
            AsymK16V8Codec().from_bytes(data)
            want = None
        except CorruptEncodedKVError as e:
            want = e.rule
        try:
            check_blob_file(path)
            got = None
        except CorruptEncodedKVError as e:
            got = e.rule
        assert got == want, name


def test_a_header_past_the_read_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blob_file, "MAX_HEADER_BYTES", 16384)
    path = tmp_path / "long-header.bin"
    path.write_bytes(_tiny(CodecHashes(model_id="m" * 30000)))
    with pytest.raises(BlobFileLimitError, match="16384"):
        check_blob_file(path)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)  # opening it blocks unless the reader refuses first
    elif kind == "dev-zero":
        path = Path("/dev/zero")
    else:
        path = tmp_path
    with pytest.raises(BlobFileError, match="not a regular file"):
        check_blob_file(path)
    done = subprocess.run(
        [sys.executable, "-m", "lmckv", "inspect", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "not a regular file" in done.stderr
