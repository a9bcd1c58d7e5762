"""``lmckv fsck`` on stores of raw, fp8 and aesgcm objects (SPEC.md "A store"), built here
byte by byte as the measured releases write them: names by the adapters' forms, content with no
header (raw, fp8) or in an aesgcm frame. Stores written by LMCache itself are
test_fsck_stores.py's; this file holds the rules to inputs LMCache would not write.

The aesgcm frames are sealed with the ``cryptography`` package under keys derived here with the
standard library's HMAC (RFC 5869 written out), not with lmckv's derivation: the check reads
what it checks with independent means.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from lmckv import cli
from lmckv.base.schemas import validate
from lmckv.conformance.store import catalogue, fsck
from lmckv.conformance.store.framing import AesGcmKeys
from lmckv.conformance.store.locations import (
    FileLocation,
    RedisLocation,
    S3Location,
    StoreSpecError,
)
from lmckv.conformance.store.names import shown
from lmckv.conformance.store.sources import Entry, FileSource
from lmckv.conformance.store.spec import SerdeSpec, StoreSpec, from_l2_adapter, from_target
from lmckv.reference_impl.keys import ObjectKey, object_key_to_filename

FULL = 16384  # bytes of a full chunk: 16 tokens of 1024 bytes (a [2, 4, 16, 64] bf16 object)
TOKENS = 16
INFO = b"lmcache-l2-aesgcm-v1"


def hkdf_sha256(master: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 with no salt (HashLen zero bytes), from the standard library alone."""
    prk = hmac.new(bytes(32), master, hashlib.sha256).digest()
    out, block = b"", b""
    for i in range(1, -(-length // 32) + 1):
        block = hmac.new(prk, block + info + bytes([i]), hashlib.sha256).digest()
        out += block
    return out[:length]


def seal(master: bytes, salt: str, plaintext: bytes, bits: int = 256) -> bytes:
    key = hkdf_sha256(master, INFO + salt.encode(), bits // 8)
    iv = os.urandom(12)
    return b"\x01" + iv + AESGCM(key).encrypt(iv, plaintext, None)


def _keys(n: int) -> list[ObjectKey]:
    out = []
    for i in range(n):
        rank = (0x01000100, 0x02010201)[i % 2]
        salt = "tenant-a" if i == n - 1 else ""
        out.append(ObjectKey(hashlib.sha256(bytes([i])).digest(), "org/model", rank, 0, salt))
    return out


def write_store(root: Path, content: list[bytes]) -> list[Path]:
    root.mkdir()
    paths = []
    for key, data in zip(_keys(len(content)), content, strict=True):
        path = root / object_key_to_filename(key)
        path.write_bytes(data)
        paths.append(path)
    return paths


def run(*args: str) -> tuple[int, dict]:
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"fsck-{os.getpid()}-{len(args)}.json"
    status = cli.main(["fsck", *args, "--json", str(out), "--no-progress", "--jobs", "1"])
    doc = json.loads(out.read_text()) if out.is_file() else {}
    out.unlink(missing_ok=True)
    if doc:
        validate(doc, "fsck")
    return status, doc


def problems(doc: dict) -> set[tuple[str, str]]:
    return {(p["name"], p["rule"]) for p in doc["problems"]}


def damage(paths: list[Path], root: Path, stored_full: int) -> dict[str, str]:
    """One object cut short (not at a token boundary), one emptied, one byte flipped, a foreign
    file, one renamed to a name that is no ObjectKey's: the problems each must give."""
    cut, emptied, flipped, renamed = paths[:4]
    with cut.open("r+b") as f:
        f.truncate(stored_full - 1000)
    emptied.write_bytes(b"")
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x10
    flipped.write_bytes(bytes(data))
    renamed.rename(root / "renamed-by-hand.data")
    (root / "notes.txt").write_text("another tool's file\n")
    return {
        cut.name: "STORE-SIZE",
        emptied.name: "STORE-EMPTY",
        "renamed-by-hand.data": "STORE-NAME",
        "notes.txt": "STORE-FOREIGN",
    }


@pytest.mark.parametrize(("serde", "unit"), [("none", 1), ("fp8", 2)])
def test_raw_and_fp8_stores_are_size_checked(tmp_path: Path, serde: str, unit: int) -> None:
    """A healthy store, with a partial last chunk, is clean and counted as size-checked, never
    as verified; damaged, exactly the damaged objects are named, the flipped byte unseen."""
    full = FULL // unit
    partial = 7 * (FULL // TOKENS) // unit
    content = [os.urandom(full) for _ in range(7)] + [os.urandom(partial)]
    root = tmp_path / "store"
    paths = write_store(root, content)
    given = ["--serde", serde] if serde != "none" else []
    status, doc = run(str(root), "--chunk-tokens", str(TOKENS), *given)
    assert status == 0, doc["problems"]
    # Given no serde, a raw store is told from no other headerless one: "unknown", not "none".
    assert doc["store"]["serde"] == ("unknown" if serde == "none" else serde)
    assert doc["store"]["serde_detected"] == (serde == "none")
    assert doc["content_verifiable"] is False
    assert (doc["counts"]["size_checked"], doc["counts"]["partial"]) == (7, 1)
    assert doc["counts"]["verified"] == 0
    salted = [t for t in doc["totals"] if t["cache_salt"]]
    assert [(t["cache_salt"], t["objects"], t["partial"]) for t in salted] == [("tenant-a", 1, 1)]
    assert sum(t["objects"] for t in doc["totals"]) == 8
    want = damage(paths, root, full)
    status, doc = run(str(root), "--chunk-tokens", str(TOKENS), *given)
    assert status == 1
    assert problems(doc) == set(want.items())
    assert doc["counts"]["size_checked"] == 7 - 4 + 1  # the flipped one among them


def test_given_object_bytes_override_what_is_learned(tmp_path: Path) -> None:
    root = tmp_path / "store"
    write_store(root, [os.urandom(FULL) for _ in range(3)])
    status, doc = run(str(root), "--object-bytes", str(FULL * 2), "--chunk-tokens", "16")
    assert status == 0 and doc["counts"]["partial"] == 3  # half of 32 tokens: partial chunks
    status, doc = run(str(root), "--object-bytes", str(FULL + 1))
    assert status == 1 and doc["problems_by_rule"] == {"STORE-SIZE": 3}
    status, doc = run(str(root), "--object-bytes", f"0={FULL}", "--object-bytes", "1=5")
    assert status == 0


@pytest.mark.parametrize("bits", [128, 256])
def test_aesgcm_tags_are_verified_with_the_key_file(tmp_path: Path, bits: int) -> None:
    master = b"operator's master key\n"  # all of the file's bytes, the newline too
    key_file = tmp_path / "master.key"
    key_file.write_bytes(master)
    keys = _keys(6)
    frames = [seal(master, k.cache_salt, os.urandom(FULL), bits) for k in keys]
    root = tmp_path / "store"
    paths = write_store(root, frames)
    status, doc = run(str(root), "--key-file", str(key_file), "--aes-bits", str(bits))
    assert status == 0, doc["problems"]
    assert doc["counts"]["verified"] == 6 and doc["content_verifiable"] is True
    # Without the key: detected, framed, sized; nothing verified. A file named like an object
    # that is no ObjectKey's says nothing of the serde (it is a name problem).
    (root / "junk.data").write_bytes(b"\x00not a frame")
    status, doc = run(str(root))
    assert problems(doc) == {("junk.data", "STORE-NAME")}
    (root / "junk.data").unlink()
    status, doc = run(str(root))
    assert status == 0 and doc["store"] == {
        "adapter": "fs",
        "location": str(root),
        "serde": "aesgcm",
        "serde_detected": True,
    }
    assert (doc["counts"]["verified"], doc["counts"]["size_checked"]) == (0, 6)
    # One bit flipped, one frame version changed, one sealed under another salt's key.
    flipped, versioned, other_salt = paths[:3]
    data = bytearray(flipped.read_bytes())
    data[100] ^= 0x01
    flipped.write_bytes(bytes(data))
    versioned.write_bytes(b"\x02" + versioned.read_bytes()[1:])
    other_salt.write_bytes(seal(master, "tenant-b", os.urandom(FULL), bits))
    status, doc = run(str(root), "--key-file", str(key_file), "--aes-bits", str(bits))
    assert status == 1
    assert problems(doc) == {
        (flipped.name, "STORE-AESGCM-TAG"),
        (versioned.name, "STORE-AESGCM-FRAME"),
        (other_salt.name, "STORE-AESGCM-TAG"),
    }


def test_the_key_derivation_is_rfc_5869_with_lmcaches_info() -> None:
    master = os.urandom(32)
    for bits in (128, 256):
        derived = AesGcmKeys(master, bits)
        for salt in ("", "tenant-a", "ünïcode"):
            want = hkdf_sha256(master, INFO + salt.encode("utf-8"), bits // 8)
            assert derived.key(salt) == want


def test_a_vanished_object_is_gone_and_a_pipe_is_unreadable(tmp_path: Path) -> None:
    """The store is live: an object evicted after the listing is counted as gone; a pipe put
    in an object's place is opened without blocking and refused (STORE-READ)."""
    root = tmp_path / "store"
    paths = write_store(root, [os.urandom(FULL) for _ in range(3)])
    spec = StoreSpec("fs", FileLocation(root), SerdeSpec("lmckv"))
    plan = fsck.Plan(spec, catalogue.LMCKV)
    source = FileSource(spec.location)  # type: ignore[arg-type]
    gone = Entry(paths[0].name, FULL)
    paths[0].unlink()
    assert fsck.judge(plan, source, gone).status == "gone"
    piped = Entry(paths[1].name, FULL)
    paths[1].unlink()
    os.mkfifo(paths[1])
    verdict = fsck.judge(plan, source, piped)
    assert (verdict.status, verdict.rule) == ("problem", "STORE-READ")


def test_a_time_limit_stops_the_check_and_says_so(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    for i in range(2500):  # three pages
        (root / object_key_to_filename(ObjectKey(i.to_bytes(4, "big"), "m", 0))).write_bytes(b"x")
    _, doc = run(str(root), "--time-limit", "1e-9")
    assert doc["incomplete"] and "time limit" in doc["incomplete"]
    assert doc["entries"] < 2500


def test_the_adapter_spec_is_read_as_lmcache_takes_it(tmp_path: Path) -> None:
    key = tmp_path / "k"
    serde = {"type": "aesgcm", "master_key_path": str(key), "aes_bits": 256}
    spec = from_l2_adapter(json.dumps({"type": "fs", "base_path": str(tmp_path), "serde": serde}))
    assert spec == StoreSpec("fs", FileLocation(tmp_path), SerdeSpec("aesgcm", key, 256))
    resp = from_l2_adapter('{"type": "resp", "host": "127.0.0.1", "port": 6380}')
    assert resp.location == RedisLocation("127.0.0.1", 6380) and resp.serde == SerdeSpec("none")
    valkey = from_l2_adapter(
        '{"type": "valkey", "startup_nodes": "127.0.0.1:6381", "key_prefix": "ns"}'
    )
    assert valkey.location == RedisLocation("127.0.0.1", 6381, key_prefix="ns")
    s3 = from_l2_adapter(
        '{"type": "s3", "s3_endpoint": "kv.127.0.0.1:9000", "s3_region": "us-east-1", '
        '"disable_tls": true, "serde": {"type": "fp8"}}'
    )
    assert s3.location == S3Location(
        "kv", "http://127.0.0.1:9000", "us-east-1", addressing="virtual"
    )
    assert s3.serde == SerdeSpec("fp8")
    assert from_target("redis://127.0.0.1:6379/2").location == RedisLocation("127.0.0.1", 6379, 2)
    assert from_target("s3://kv/pre", "http://127.0.0.1:9").location == S3Location(
        "kv", "http://127.0.0.1:9", prefix="pre"
    )
    for bad in (
        "[]", "{", '{"type": "mooncake"}', '{"type": "fs"}', '{"type": "resp", "host": "h"}',
        '{"type": "fs", "base_path": "/x", "serde": {"type": "turboquant"}}',
        '{"type": "fs", "base_path": "/x", "serde": {"type": "aesgcm", "aes_bits": 192}}',
        '{"type": "s3", "s3_endpoint": "nodot"}', "x" * 70000,
    ):  # fmt: skip
        with pytest.raises(StoreSpecError):
            from_l2_adapter(bad)


def test_usage_and_unreachable_stores_exit_2(tmp_path: Path) -> None:
    assert cli.main(["fsck", "--no-progress"]) == 2
    assert cli.main(["fsck", str(tmp_path), "--l2-adapter", "{}"]) == 2
    assert cli.main(["fsck", "--l2-adapter", '{"type": "fs"}']) == 2
    assert cli.main(["fsck", str(tmp_path), "--key-file", "k", "--serde", "fp8"]) == 2
    assert cli.main(["fsck", str(tmp_path), "--object-bytes", "x=1"]) == 2
    assert cli.main(["fsck", str(tmp_path), "--key-file", str(tmp_path / "none")]) == 2
    assert cli.main(["fsck", "redis://127.0.0.1:1/0", "--no-progress"]) == 2
    assert cli.main(["fsck", str(tmp_path / "missing"), "--no-progress"]) == 2


def test_names_from_a_store_are_shown_as_data() -> None:
    assert shown("plain@0x1.data") == '"plain@0x1.data"'
    assert shown("two\nlines") == '"two\\nlines"'
    assert shown("\u202eevil") == '"\\u202eevil"'
    assert shown("bad\udcffbyte") == '"bad\\xffbyte"'
    assert shown('quote"back\\') == '"quote\\"back\\\\"'


PEAK_RSS = textwrap.dedent(
    """
    import resource, subprocess, sys
    done = subprocess.run([sys.executable, "-m", "lmckv", "fsck", sys.argv[1], "--no-progress",
                           "--jobs", "1"], capture_output=True, text=True)
    print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    """
)


def _peak_rss_kib(directory: Path) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, str(directory)],
        capture_output=True, text=True, timeout=600, check=True,
    ).stdout.split()  # fmt: skip
    return int(out[0]), int(out[1])


def _empty_objects(root: Path, n: int) -> None:
    root.mkdir()
    for i in range(n):
        name = object_key_to_filename(ObjectKey(i.to_bytes(4, "big"), "m", 0))
        os.close(os.open(root / name, os.O_CREAT | os.O_WRONLY, 0o644))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB")
def test_memory_does_not_grow_with_the_number_of_objects(tmp_path: Path) -> None:
    """Every one of 50,000 empty objects is a problem; listing, verdicts and problems stream
    (the problems to a spool file): the peak stays within 24 MiB of that of 2,500 objects,
    and under 100 MB. (1,000,000 objects measured 26.8 MB: the closing note of issue 33.)"""
    small, big = tmp_path / "small", tmp_path / "big"
    _empty_objects(small, 2_500)
    _empty_objects(big, 50_000)
    status_small, rss_small = _peak_rss_kib(small)
    status_big, rss_big = _peak_rss_kib(big)
    assert status_small == status_big == 1
    assert rss_big - rss_small < 24 * 1024, (rss_small, rss_big)
    assert rss_big < 100 * 1024, rss_big


def test_pages_checked_by_a_pool_or_a_dask_cluster_give_the_same_report(tmp_path: Path) -> None:
    """Past one machine: the pages of a listing are the unit of work of a process pool here
    and of a Dask cluster (a ``distributed.LocalCluster`` of two worker processes); both find
    what this process finds, and the cluster's workers repair what they find."""
    from distributed import LocalCluster

    root = tmp_path / "store"
    root.mkdir()
    for i in range(2300):  # three pages
        key = ObjectKey(i.to_bytes(4, "big"), "org/model", i % 2, 0, "")
        (root / object_key_to_filename(key)).write_bytes(bytes(FULL if i % 500 else FULL - 3))
    (root / "stray.txt").write_text("x")

    def summary(doc: dict) -> tuple:
        return (doc["counts"], doc["problems_by_rule"], sorted(problems(doc)), doc["totals"])

    status, alone = run(str(root))
    assert status == 1 and alone["problems_by_rule"] == {"STORE-FOREIGN": 1, "STORE-SIZE": 5}
    out = tmp_path / "pool.json"
    args = ["fsck", str(root), "--no-progress", "--json", str(out)]
    assert cli.main([*args, "--jobs", "2"]) == 1
    assert summary(json.loads(out.read_text())) == summary(alone)
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        assert cli.main([*args, "--scheduler", cluster.scheduler_address]) == 1
        assert summary(json.loads(out.read_text())) == summary(alone)
        # Repaired by the cluster's workers (paced, each a share of the rate): the five short
        # objects are removed, the stray file left.
        repair = ["--serde", "none", "--repair", "--max-rate", "1G"]
        assert cli.main([*args, *repair, "--scheduler", cluster.scheduler_address]) == 4
    repaired = json.loads(out.read_text())
    assert repaired["repair"]["repaired_by_rule"] == {"STORE-SIZE": 5}
    assert repaired["max_rate"] == {"bytes_per_s": 1e9, "objects_per_s": None}
    status, after = run(str(root))
    assert status == 1 and after["problems_by_rule"] == {"STORE-FOREIGN": 1}
