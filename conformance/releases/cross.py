"""``python -m lmckv.conformance.releases STEP ROOT``: the cross-release steps.

ROOT holds one folder per release (``ROOT/<version>/``):

- ``dump`` (run in a release's environment) encodes the canonical matrix inputs with the
  installed lmcache into ``ROOT/<version>/encoded/<case>.bin`` (a failed encode writes
  ``<case>.err`` with the error);
- ``read`` (run in every release's environment after every ``dump``) decodes every
  release's blobs with the installed lmcache, compares K, V and scales with the golden
  payload, and writes ``ROOT/<version>/read.json``: producer -> case -> ``pass`` or the
  failure;
- ``store`` (run in a release's environment) writes a small store on disk with the
  installed lmcache (conformance/store/writers.py: its serializers, both modes, and its FS
  adapter where it runs) into ``ROOT/<version>/store/``;
- ``read-store`` (run in every release's environment after every ``store``) reads every
  release's store with the installed lmcache (its filename reader and deserializers,
  conformance/store/readers.py) into ``ROOT/<version>/store-read.json``: producer -> file ->
  ``pass`` or the failure;
- ``summary`` (any environment) compares each case's bytes across releases and gathers the
  per-release results files (``ROOT/<version>/results.json``), reads and store reads into
  ``ROOT/releases.json`` (schema below), with the reference's ``lmckv fsck`` verdict on each
  release's store; exit 1 when a release cannot read another's blob or store, or releases
  encode a case differently.

``releases.json``: ``{"kind": "lmckv-releases", "schema_version": 1, "versions": [...],
"results": {version: results file name}, "encode": {case: {version: sha256 or "error: ..."}},
"read": {consumer: {producer: {case: "pass" or failure}}}, "store_read": {consumer:
{producer: {file: "pass" or failure}}}, "store_fsck": {producer: {"files": n, "problems":
{rule: count}}}}``; the last two are absent from files written before stores were added.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lmckv.base.lmcache_release import installed_version

from ..core.digests import sha256
from ..drivers.base import Driver
from ..store import writers
from ..suite.codec_cases import encode_request
from ..suite.matrix import matrix_cases

SCHEMA_VERSION = 1
KIND = "lmckv-releases"


def _upstream() -> Driver:
    from ..drivers.upstream_driver import load_upstream

    return load_upstream()


def _release() -> str:
    """The installed LMCache release; this module runs inside a release's venv."""
    version = installed_version()
    if version is None:
        raise SystemExit("lmckv.conformance.releases: lmcache is not installed here")
    return version


def dump(root: Path, driver: Driver | None = None) -> Path:
    """Encode every canonical case with the installed release into ROOT/<version>/encoded."""
    driver = driver or _upstream()
    out = root / str(driver.info.version) / "encoded"
    out.mkdir(parents=True, exist_ok=True)
    for case in matrix_cases():
        res = driver.call("codec.encode", **encode_request(case))
        target = out / f"{case['id']}.bin"
        if res["ok"]:
            target.write_bytes(res["blob"])
        else:
            target.with_suffix(".err").write_text(f"{res['error']}: {res.get('message', '')}")
    return out


def _read_one(driver: Driver, blob: bytes, case: dict[str, Any]) -> str:
    res = driver.call("codec.decode", blob=blob, out_v_dtype=None)
    if not res["ok"]:
        return f"fail: {res['error']}: {res.get('message', '')}"[:300]
    want = case["decode"]["payload"]
    bad = [n for n in ("k", "v", "scales") if sha256(res[n]) != want[n]["sha256"]]
    return f"fail: {', '.join(bad)} differ from the golden payload" if bad else "pass"


def read(root: Path, driver: Driver | None = None) -> Path:
    """Decode every release's blobs with the installed release; ROOT/<version>/read.json."""
    driver = driver or _upstream()
    cases = {c["id"]: c for c in matrix_cases()}
    found: dict[str, dict[str, str]] = {}
    for producer in sorted(p for p in root.iterdir() if (p / "encoded").is_dir()):
        found[producer.name] = {
            blob.stem: _read_one(driver, blob.read_bytes(), cases[blob.stem])
            for blob in sorted((producer / "encoded").glob("*.bin"))
            if blob.stem in cases
        }
    out = root / str(driver.info.version) / "read.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return out


#: The store each release writes: two ranks, both dtypes, both serde modes, small chunks.
STORE_CHUNKS = writers.plan(1)
STORE_SHAPE = writers.SMALL_CHUNK


def write_release_store(root: Path) -> tuple[Path, str]:
    """The installed release's store in ROOT/<version>/store, and the writer's name (its
    best: writers.py)."""
    out = root / _release() / "store"
    chosen = writers.writer()
    writers.write_store(out, STORE_CHUNKS, STORE_SHAPE, chosen)
    return out, chosen.name


def read_release_stores(root: Path) -> Path:
    """Every release's store read by the installed one; ROOT/<version>/store-read.json."""
    from ..store.readers import UpstreamStoreReader

    reader = UpstreamStoreReader()
    found = {
        producer.name: reader.read_store(producer / "store", STORE_CHUNKS, STORE_SHAPE)
        for producer in sorted(p for p in root.iterdir() if (p / "store").is_dir())
    }
    out = root / _release() / "store-read.json"
    out.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return out


def _store_fsck(store: Path) -> dict[str, Any]:
    from ..store import catalogue
    from ..store.fsck import check_store, close_sources
    from ..store.locations import FileLocation
    from ..store.spec import SerdeSpec, StoreSpec

    spec = StoreSpec(catalogue.FS.name, FileLocation(store), SerdeSpec(catalogue.LMCKV.name))
    report = check_store(spec)
    try:
        return {"files": report.header()["entries"], "problems": dict(report.rules)}
    finally:
        report.close()
        close_sources()


def summarize(root: Path, versions: list[str]) -> dict[str, Any]:
    """releases.json's content for the releases ``versions`` (in order)."""
    encode: dict[str, dict[str, str]] = {}
    reads: dict[str, Any] = {}
    results: dict[str, str] = {}
    store_reads: dict[str, Any] = {}
    store_fsck: dict[str, Any] = {}
    for version in versions:
        folder = root / version
        for path in sorted((folder / "encoded").glob("*")):
            value = (
                sha256(path.read_bytes())
                if path.suffix == ".bin"
                else f"error: {path.read_text(encoding='utf-8')}"
            )
            encode.setdefault(path.stem, {})[version] = value
        if (folder / "read.json").is_file():
            reads[version] = json.loads((folder / "read.json").read_text(encoding="utf-8"))
        if (folder / "results.json").is_file():
            results[version] = f"{version}/results.json"
        if (folder / "store-read.json").is_file():
            store_reads[version] = json.loads((folder / "store-read.json").read_text("utf-8"))
        if (folder / "store").is_dir():
            store_fsck[version] = _store_fsck(folder / "store")
    return {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "versions": versions,
        "results": results,
        "encode": encode,
        "read": reads,
        "store_read": store_reads,
        "store_fsck": store_fsck,
    }


def problems(summary: dict[str, Any]) -> list[str]:
    """What breaks cross-release compatibility: differing encodes, failed reads, gaps."""
    out = []
    versions = summary["versions"]
    for case, by_version in sorted(summary["encode"].items()):
        if len(set(by_version.values())) > 1 or len(by_version) != len(versions):
            out.append(
                f"encode {case}: " + ", ".join(f"{v}={h[:12]}" for v, h in by_version.items())
            )
    for consumer in versions:
        if consumer not in summary["read"]:
            out.append(f"read: {consumer} read nothing (no {consumer}/read.json)")
            continue
        for producer, cases in sorted(summary["read"][consumer].items()):
            for case, verdict in sorted(cases.items()):
                if verdict != "pass":
                    out.append(f"read: {consumer} reading {producer}'s {case}: {verdict}")
    for consumer, producers in sorted(summary.get("store_read", {}).items()):
        for producer, files in sorted(producers.items()):
            failed = {f: v for f, v in files.items() if v != "pass"}
            if failed:
                first = next(iter(sorted(failed.items())))
                out.append(
                    f"store: {consumer} reading {producer}'s store: {len(failed)} of "
                    f"{len(files)} files fail, first {first[0]}: {first[1]}"
                )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lmckv.conformance.releases", description=__doc__
    )
    parser.add_argument("step", choices=["dump", "read", "store", "read-store", "summary"])
    parser.add_argument("root", type=Path, help="one folder per release")
    parser.add_argument(
        "--versions", help="comma-separated release order for summary (default: the list)"
    )
    args = parser.parse_args(argv)
    root: Path = args.root
    if args.step == "dump":
        print(f"releases: encoded into {dump(root)}")
        return 0
    if args.step == "read":
        print(f"releases: read results in {read(root)}")
        return 0
    if args.step == "store":
        out, how = write_release_store(root)
        print(f"releases: store written into {out} ({how})")
        return 0
    if args.step == "read-store":
        print(f"releases: store reads in {read_release_stores(root)}")
        return 0
    from . import listed_versions

    versions = args.versions.split(",") if args.versions else listed_versions()
    summary = summarize(root, versions)
    (root / "releases.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    found = problems(summary)
    for line in found:
        print(f"releases: {line}", file=sys.stderr)
    cases = len(summary["encode"])
    print(
        f"releases: {len(versions)} releases, {cases} canonical cases, "
        f"{len(found)} cross-release problems -> {root / 'releases.json'}"
    )
    return 1 if found else 0
