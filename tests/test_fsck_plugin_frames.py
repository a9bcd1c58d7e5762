"""``lmckv fsck`` on stores of serdes no release registers (SPEC.md "A store", STORE-CHECKSUM-*,
STORE-TQ01-FRAME): upstream's ``checksum`` serde (LMCache pull request #4558) and the ``tqai``
plugin's TQ01 frames (``lmcache-turbo-quant-serde`` 0.1.0). Stores are built here byte by byte
from the frames' layouts, with ``xxhash`` and ``struct`` directly, never with lmckv's frame
modules: the check reads what it checks with independent means. Nothing of the plugin is
needed (tests/test_serde_plugins.py runs the plugin itself where it is installed).
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

import pytest
import xxhash
from test_fsck_serdes import FULL, TOKENS, _keys, problems, run, write_store

from lmckv.conformance.store import checksum_frame


def checksum_frame_of(payload: bytes, chunk_hash: bytes) -> bytes:
    """[0x01][chunk_hash[:8], zero-padded][xxh3_64(payload), big-endian][payload]."""
    fingerprint = chunk_hash[:8] + bytes(max(0, 8 - len(chunk_hash)))
    return b"\x01" + fingerprint + xxhash.xxh3_64_digest(payload) + payload


def test_the_checksum_frame_matches_upstreams_vector() -> None:
    """Vectors: the header upstream's ChecksumSerializer (PR #4558 at 7afa51b) writes for this
    payload and chunk hash, and xxHash's published XXH3_64 of no input."""
    payload, chunk_hash = bytes(range(256)) * 8, b"\x11" * 32
    framed = checksum_frame.frame(payload, chunk_hash)
    assert framed[:17].hex() == "01" + "11" * 8 + "dd420471ff96bd00"
    assert len(framed) == 2065 and framed == checksum_frame_of(payload, chunk_hash)
    assert checksum_frame.frame(b"", b"\xab\xcd")[1:] == b"\xab\xcd" + bytes(6) + bytes.fromhex(
        "2d06800538d394c2"
    )


def test_a_checksum_store_is_verified_and_each_damage_named(tmp_path: Path) -> None:
    """Every object's hash and fingerprint verified (a partial last chunk too); then a changed
    byte, a frame stored under another chunk's name, a cut, a grown, an emptied object and a
    changed version are each named with their rule; a flip in the header's hash too."""
    keys = _keys(8)
    payloads = [os.urandom(FULL) for _ in range(7)] + [os.urandom(5 * FULL // TOKENS)]
    root = tmp_path / "store"
    paths = write_store(
        root, [checksum_frame_of(p, k.chunk_hash) for p, k in zip(payloads, keys, strict=True)]
    )
    status, doc = run(str(root), "--chunk-tokens", str(TOKENS))
    assert status == 0, doc["problems"]
    assert doc["store"]["serde"] == "checksum" and doc["store"]["serde_detected"]
    assert doc["content_verifiable"] is True
    assert (doc["counts"]["verified"], doc["counts"]["partial"]) == (7, 1)
    changed, moved, cut, grown, emptied, versioned = paths[:6]
    data = bytearray(changed.read_bytes())
    data[17 + FULL // 2] ^= 0x04
    changed.write_bytes(bytes(data))
    moved.write_bytes(checksum_frame_of(payloads[6], keys[6].chunk_hash))
    cut.write_bytes(cut.read_bytes()[:-100])
    grown.write_bytes(grown.read_bytes() + b"\x00")
    emptied.write_bytes(b"")
    versioned.write_bytes(b"\x02" + versioned.read_bytes()[1:])
    status, doc = run(str(root), "--chunk-tokens", str(TOKENS), "--serde", "checksum")
    assert status == 1
    # Detected, the same: most objects are still checksum frames (the first ones damaged).
    detected = run(str(root), "--chunk-tokens", str(TOKENS))[1]
    assert detected["store"]["serde"] == "checksum" and problems(detected) == problems(doc)
    assert problems(doc) == {
        (changed.name, "STORE-CHECKSUM-HASH"),
        (moved.name, "STORE-CHECKSUM-FINGERPRINT"),
        (cut.name, "STORE-CHECKSUM-HASH"),
        (grown.name, "STORE-CHECKSUM-HASH"),
        (emptied.name, "STORE-EMPTY"),
        (versioned.name, "STORE-CHECKSUM-FRAME"),
    }
    messages = {p["name"]: p["message"] for p in doc["problems"]}
    wanted = keys[1].chunk_hash[:8].hex()
    assert f"the name's chunk hash gives {wanted}" in messages[moved.name]
    assert doc["counts"]["verified"] == 1


def test_a_checksum_spec_is_taken_and_a_large_object_is_only_size_checked(tmp_path: Path) -> None:
    keys = _keys(2)
    root = tmp_path / "store"
    write_store(root, [checksum_frame_of(os.urandom(FULL), k.chunk_hash) for k in keys])
    spec = f'{{"type": "fs", "base_path": "{root}", "serde": {{"type": "checksum"}}}}'
    status, doc = run("--l2-adapter", spec, "--max-object-bytes", str(FULL))
    assert status == 0 and doc["store"]["serde"] == "checksum"
    assert (doc["counts"]["verified"], doc["counts"]["size_checked"]) == (0, 2)


def tq01(shape: tuple[int, ...], bits: int = 4, qjl: int = 0, sketch: int = 16) -> bytes:
    """A TQ01 frame of random indices and norms for a per-head ``shape``, by its layout."""
    n = 1
    for d in shape:
        n *= d
    vectors = n // shape[-1]
    dtype = b"bfloat16"
    out = struct.pack("<4sBBBHiB", b"TQ01", 1, bits, qjl, sketch, 42, len(shape))
    out += struct.pack(f"<{len(shape)}q", *shape) + bytes([len(dtype)]) + dtype
    blocks = [-(-n * bits // 8), 2 * vectors] + ([sketch * vectors, 2 * vectors] if qjl else [])
    for length in blocks:
        out += struct.pack("<q", length) + os.urandom(length)
    return out


@pytest.mark.parametrize("qjl", [0, 1])
def test_a_tq01_store_is_never_called_none_and_its_frames_are_checked(
    tmp_path: Path, qjl: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Detected as tqai (not "none"), structure checked, content not verifiable; a cut, a grown
    object, a block length changed, a shape declaring 2**40 elements and a frame of other bits
    are each STORE-TQ01-FRAME, without the allocation a shape would ask for; a flipped index
    byte goes unseen (no checksum)."""
    shape = (2, 4, TOKENS, 2, 64)
    root = tmp_path / "store"
    paths = write_store(root, [tq01(shape, qjl=qjl) for _ in range(6)])
    status, doc = run(str(root))
    assert status == 0, doc["problems"]
    assert doc["store"]["serde"] == "tqai" and doc["content_verifiable"] is False
    assert doc["counts"]["size_checked"] == 6
    cut, grown, lengths, huge, rebit, flipped = paths
    cut.write_bytes(cut.read_bytes()[:-3])
    grown.write_bytes(grown.read_bytes() + b"\x00" * 5)
    data = bytearray(lengths.read_bytes())
    at = 14 + 8 * len(shape) + 1 + 8
    struct.pack_into("<q", data, at, struct.unpack_from("<q", data, at)[0] + 1)
    lengths.write_bytes(bytes(data))
    data = bytearray(huge.read_bytes())
    struct.pack_into("<q", data, 14, 1 << 40)
    huge.write_bytes(bytes(data))
    data = bytearray(rebit.read_bytes())
    data[5] = 5
    rebit.write_bytes(bytes(data))
    data = bytearray(flipped.read_bytes())
    data[-1] ^= 0xFF
    flipped.write_bytes(bytes(data))
    status, doc = run(str(root), "--serde", "tqai")
    assert status == 1
    assert problems(doc) == {(p.name, "STORE-TQ01-FRAME") for p in paths[:5]}
    messages = {p["name"]: p["message"] for p in doc["problems"]}
    assert "5 bytes after the frame's end" in messages[grown.name]
    assert "more elements than the object holds" in messages[huge.name]
    assert doc["counts"]["size_checked"] == 1
    assert cli_summary(root, capsys).count("only their frames' structure") == 1


def cli_summary(root: Path, capsys: pytest.CaptureFixture[str]) -> str:
    from lmckv import cli

    capsys.readouterr()  # what earlier runs printed
    cli.main(["fsck", str(root), "--no-progress", "--jobs", "1"])
    return capsys.readouterr().out


def test_a_store_of_frames_nothing_recognises_is_unknown_not_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Frames of a serde without a row (a fixed 4-byte magic lmckv does not know): "unknown
    serde, content not checked", sizes checked; the same store stated as none is none."""
    root = tmp_path / "store"
    write_store(root, [b"ZQ99" + hashlib.sha256(bytes([i])).digest() * 64 for i in range(4)])
    out = cli_summary(root, capsys)
    assert "serde unknown (not recognised in the objects' first bytes)" in out
    assert "unknown serde, content not checked" in out and "serde none" not in out
    status, doc = run(str(root), "--serde", "none")
    assert status == 0 and doc["store"]["serde"] == "none"
