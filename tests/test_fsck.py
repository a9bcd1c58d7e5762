"""``lmckv fsck`` on stores of LMCKV blobs: a store written as the asym serdes write it is
clean; each damaged file is one problem under its rule (SPEC.md "A store"); blobs are checked
in bounded memory. (Raw, fp8 and aesgcm stores: test_fsck_serdes.py; stores written by
LMCache's own storage manager, on disk, in Redis and in S3: test_fsck_stores.py.)

The store is written with upstream's serializer and FS adapter when lmcache is installed
(CI installs it; ``LMCKV_REQUIRE_UPSTREAM`` makes its absence a failure), else with the
reference (conformance/store/writers.py says which).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from upstream_required import upstream_missing, upstream_required

from lmckv import cli
from lmckv.base.schemas import validate
from lmckv.conformance.store import fsck, pace, writers
from lmckv.conformance.store.spec import from_target
from lmckv.reference_impl.keys import ObjectKey, object_key_to_filename
from lmckv.reference_impl.kv_codec import (
    AsymK16V8Codec,
    CodecHashes,
    EncodedKV,
    ScaleScope,
    blob_file,
)
from lmckv.reference_impl.kv_codec.checksum import payload_crc32
from lmckv.reference_impl.kv_codec.header import pack_header_fields

FULL = writers.plan(2, k_less=(False,))


def _writer() -> writers.StoreWriter:
    chosen = writers.writer()
    if chosen.name == writers.ReferenceWriter.name and upstream_required():
        upstream_missing("lmcache is not installed: the store is written by the reference")
    return chosen


@pytest.fixture(scope="module")
def store_writer() -> writers.StoreWriter:
    return _writer()


@pytest.fixture
def store(tmp_path: Path, store_writer: writers.StoreWriter) -> Path:
    directory = tmp_path / "store"
    writers.write_store(directory, FULL, writers.SMALL_CHUNK, store_writer)
    return directory


def _fsck(*args: str) -> tuple[int, dict]:
    out = Path(args[0]).parent / "fsck.json"
    status = cli.main(["fsck", *args, "--json", str(out), "--no-progress"])
    document = json.loads(out.read_text()) if out.is_file() else {}
    if document:
        validate(document, "fsck")
    return status, document


def _problems(document: dict) -> set[tuple[str, str]]:
    return {(p["name"], p["rule"]) for p in document["problems"]}


def test_a_written_store_is_clean(store: Path, store_writer: writers.StoreWriter) -> None:
    status, doc = _fsck(str(store))
    assert status == 0, doc["problems"]
    assert doc["problems"] == [] and doc["counts"]["verified"] == doc["objects"] == len(FULL)
    assert doc["store"] == {
        "adapter": "fs",
        "location": str(store),
        "serde": "lmckv",
        "serde_detected": True,
    }
    assert [(t["global_rank"], t["objects"], t["verified"]) for t in doc["totals"]] == [
        (0, 4, 4),
        (1, 4, 4),
    ]
    assert {t["model_name"] for t in doc["totals"]} == {writers.MODEL}
    assert sum(t["bytes"] for t in doc["totals"]) == doc["bytes"]


def test_four_damaged_files_are_exactly_four_problems(store: Path) -> None:
    """DONE-WHEN of issue 20 item 3: one file truncated, one emptied, one renamed to a name
    that is no ObjectKey's, one foreign file added: exactly those four, each with its rule."""
    truncated, emptied, renamed = sorted(store.iterdir())[:3]
    with truncated.open("r+b") as f:
        f.truncate(truncated.stat().st_size - 7)
    emptied.write_bytes(b"")
    renamed.rename(store / "not-an-object-key.data")
    (store / "notes.txt").write_text("a file of another tool\n")
    status, doc = _fsck(str(store))
    assert status == 1
    assert _problems(doc) == {
        (truncated.name, "STORE-BLOB-TRUNCATED"),
        (emptied.name, "STORE-EMPTY"),
        ("not-an-object-key.data", "STORE-NAME"),
        ("notes.txt", "STORE-FOREIGN"),
    }
    assert doc["counts"]["verified"] == len(FULL) - 3
    assert doc["objects"] == len(FULL) - 1  # the renamed file is no object: a name problem


def test_corrupt_blobs_name_the_reader_rule(store: Path) -> None:
    flipped, trailing = sorted(store.iterdir())[:2]
    data = bytearray(flipped.read_bytes())
    data[-1] ^= 0x01
    flipped.write_bytes(bytes(data))
    with trailing.open("ab") as f:
        f.write(b"\0")
    status, doc = _fsck(str(store))
    assert status == 1
    messages = {p["name"]: (p["rule"], p["message"]) for p in doc["problems"]}
    assert messages[flipped.name][0] == "STORE-BLOB-VALID"
    assert messages[flipped.name][1].startswith("KV-CRC")
    assert messages[trailing.name][0] == "STORE-BLOB-VALID"
    assert messages[trailing.name][1].startswith("KV-TRAILING")


def _reference_blob(hashes: CodecHashes | None = None) -> bytes:
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_TENSOR)
    k = torch.randn(4, 2, 8, dtype=torch.bfloat16)
    return codec.to_bytes(codec.encode(k, k.clone(), hashes=hashes or CodecHashes()))


def test_a_blob_recording_another_model_than_its_name(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    agrees = ObjectKey(b"\x01", "org/model-a", 0)
    disagrees = ObjectKey(b"\x02", "org/model-a", 0)
    (store / object_key_to_filename(agrees)).write_bytes(
        _reference_blob(CodecHashes(model_id="org/model-a"))
    )
    (store / object_key_to_filename(disagrees)).write_bytes(
        _reference_blob(CodecHashes(model_id="org/model-b"))
    )
    status, doc = _fsck(str(store))
    assert status == 1
    assert _problems(doc) == {(object_key_to_filename(disagrees), "STORE-NAME-BLOB")}


def test_non_canonical_names_and_the_adapters_own_entries(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    name = object_key_to_filename(ObjectKey(b"\xab", "m", 1))
    (store / name).write_bytes(_reference_blob())
    upper = name.replace("@ab.data", "@AB.data")  # reads back only where hex is not canonical
    (store / upper).write_bytes(_reference_blob())
    temp = name[: -len(".data")] + ".tmp"
    (store / temp).write_bytes(b"half")
    (store / ".lmcache_disk_uuid").write_text("uuid\n")
    (store / "tmp").mkdir()
    (store / "link.data").symlink_to(store / name)
    status, doc = _fsck(str(store))
    assert status == 1
    assert _problems(doc) == {(upper, "STORE-NAME"), ("link.data", "STORE-FOREIGN")}
    counts = doc["counts"]
    assert (counts["adapter"], counts["directory"], counts["in_flight"]) == (1, 1, 1)
    assert counts["verified"] == 1
    # An unfinished write older than --temp-age was left by a writer that died.
    status, doc = _fsck(str(store), "--temp-age", "0")
    assert (temp, "STORE-TEMP") in _problems(doc) and doc["counts"]["in_flight"] == 0


def test_k_less_blobs_are_counted_valid(tmp_path: Path) -> None:
    """A store of V-only blobs (upstream's split-tier serializer, ``k_payload_len = 0``) is
    clean and its blobs are counted as K-less. fsck has no blob logic of its own: the
    reference reader accepts K-less blobs (SPEC KV-K-ABSENT)."""
    chosen = _writer()
    if chosen.name == writers.ReferenceWriter.name:
        upstream_missing("lmcache is not installed: no writer of K-less blobs")
    store = tmp_path / "store"
    chunks = writers.plan(1, k_less=(False, True))
    writers.write_store(store, chunks, writers.SMALL_CHUNK, chosen)
    status, doc = _fsck(str(store))
    assert doc["problems"] == [] and status == 0
    assert any(c.k_less for c in chunks)
    assert doc["counts"]["verified"] == len(chunks)


def test_usage_errors(tmp_path: Path) -> None:
    assert cli.main(["fsck", str(tmp_path / "missing"), "--no-progress"]) == 2
    assert cli.main(["fsck", str(tmp_path), "--jobs", "0"]) == 2
    assert cli.main(["fsck"]) == 2
    assert cli.main(["fsck", str(tmp_path), "--no-progress"]) == 0  # empty: nothing wrong


# -- bounded memory -----------------------------------------------------------------------


class _CountingFile:
    """A binary file that counts the bytes read through it."""

    def __init__(self, path: Path) -> None:
        self.f = path.open("rb")
        self.read_bytes = 0
        self.largest = 0

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.read_bytes += len(data)
        self.largest = max(self.largest, len(data))
        return data

    def readinto(self, buffer: memoryview) -> int:
        got = self.f.readinto(buffer)
        self.read_bytes += got
        self.largest = max(self.largest, got)
        return got

    def seek(self, offset: int) -> int:
        return self.f.seek(offset)


def test_declared_lengths_are_checked_before_any_payload_byte(tmp_path: Path) -> None:
    path = tmp_path / "x.data"
    sparse_blob(path, 1 << 20)
    size = path.stat().st_size - 5
    with path.open("r+b") as f:
        f.truncate(size)
    counting = _CountingFile(path)
    with pytest.raises(blob_file.TruncatedBlobError, match="payload truncated"):
        blob_file.verify_blob_file(counting, size)  # type: ignore[arg-type]
    assert counting.read_bytes <= blob_file.FIRST_READ < size


def test_the_crc_is_computed_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blob_file, "FIRST_READ", 64)  # the header too, in growing reads
    monkeypatch.setattr(blob_file, "CRC_PIECE", 100)
    blob = _reference_blob()
    path = tmp_path / "x.data"
    path.write_bytes(blob)
    counting = _CountingFile(path)
    enc = blob_file.verify_blob_file(counting, len(blob))  # type: ignore[arg-type]
    assert enc.header_bytes == AsymK16V8Codec().from_bytes(blob).header_bytes
    assert counting.largest < len(blob) - 100
    path.write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))
    with pytest.raises(blob_file.CorruptEncodedKVError, match="CRC-32 mismatch"):
        blob_file.verify_blob_file(_CountingFile(path), len(blob))  # type: ignore[arg-type]


def sparse_blob(path: Path, payload_bytes: int) -> None:
    """A valid blob of about ``payload_bytes`` payload written as a sparse file: a PER_TENSOR
    header over an all-zero payload (K bf16 zeros, V fp8 zeros, scale 0.0), whose CRC is
    computed over zeros in pieces; the payload itself is a hole."""
    elems = (payload_bytes - 4) // 3
    enc = EncodedKV(
        k_dtype=torch.bfloat16,
        v_dtype=torch.float8_e4m3fn,
        scale_dtype=torch.float32,
        scale_scope=ScaleScope.PER_TENSOR,
        k_payload_len=2 * elems,
        v_payload_len=elems,
        scale_payload_len=4,
    )
    total, crc, zeros = enc.expected_payload_len(), 0, bytes(1 << 24)
    for start in range(0, total, len(zeros)):
        crc = payload_crc32(zeros[: min(len(zeros), total - start)], crc)
    header = pack_header_fields(enc) + crc.to_bytes(4, "little")
    with path.open("wb") as f:
        f.write(header)
        f.truncate(len(header) + total)


PEAK_RSS = textwrap.dedent(
    """
    import resource, subprocess, sys
    done = subprocess.run([sys.executable, "-m", "lmckv", "fsck", sys.argv[1], "--no-progress"],
                          capture_output=True, text=True)
    print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    """
)


def peak_rss_kib(directory: Path) -> tuple[int, int]:
    """(exit status, peak resident set in KiB) of ``lmckv fsck DIR`` in a child process."""
    out = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, str(directory)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout.split()
    return int(out[0]), int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sparse files, ru_maxrss in KiB")
def test_peak_memory_does_not_grow_with_the_blob(tmp_path: Path) -> None:
    """A 1 GiB blob (sparse) is checked within 64 MiB of the peak of a store of one small
    blob: the payload is never held."""
    small, big = tmp_path / "small", tmp_path / "big"
    for directory in (small, big):
        directory.mkdir()
    name = object_key_to_filename(ObjectKey(b"\x01", "m", 0))
    sparse_blob(small / name, 1 << 16)
    sparse_blob(big / name, 1 << 30)
    assert (big / name).stat().st_size > 1 << 29
    status_small, rss_small = peak_rss_kib(small)
    status_big, rss_big = peak_rss_kib(big)
    assert status_small == status_big == 0
    assert rss_big - rss_small < 64 * 1024, (rss_small, rss_big)


def test_the_reports_schema_rejects_an_unknown_rule(tmp_path: Path) -> None:
    spec = from_target(str(tmp_path))
    report = fsck.Report(spec, "none", True)
    report.add(fsck.Verdict("x", 1, "object").problem("STORE-X", "?"))
    with pytest.raises(ValueError, match="STORE-X"):
        report.write_json(io.StringIO())
    report.close()


def test_json_to_stdout_and_the_progress_bar(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["fsck", str(store), "--json", "-", "--no-progress"]) == 0
    document = json.loads(capsys.readouterr().out)
    validate(document, "fsck")
    assert document["counts"]["verified"] == len(FULL)
    from lmckv.conformance.operator import fsck_command

    paced = pace.Rates(200e6)
    for show in (True, False):  # tqdm's bar (the bench extra), or nothing
        update, done = fsck_command._progress(show, paced)
        assert (update is not None) == show
        if update is not None:
            update(2)
        done()
    assert "paced to 200 MB/s" in capsys.readouterr().err  # the bar names the pace


def test_without_lmcache_the_reference_writes_full_blobs_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_lmcache(self: object) -> None:
        raise ImportError("No module named 'lmcache'")

    monkeypatch.setattr(writers.UpstreamFilenameWriter, "__init__", no_lmcache)
    chosen = writers.writer()
    assert chosen.name == "reference"
    written = writers.write_store(tmp_path / "s", writers.plan(1), writers.SMALL_CHUNK, chosen)
    assert written and not any(c.k_less for c in written)
    status, doc = _fsck(str(tmp_path / "s"))
    assert status == 0 and doc["counts"]["verified"] == len(written)


def test_the_header_and_key_readers_load_no_torch() -> None:
    """fsck and inspect's header check import neither torch nor anything that does: their
    memory is that of a small process (torch alone is ~225 MB)."""
    code = (
        "import sys, lmckv.conformance.operator.fsck_command, "
        "lmckv.conformance.operator.inspect_command, lmckv.conformance.store.fsck; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
