"""A store written by the implementation (SPEC.md "A store"): its blobs of the
canonical matrix inputs it encodes (``codec.encode``; a case it refuses is the matrix tests'
business, not this store's) under the FS filenames of their keys
(``key.fs.write``), two ranks of one model, checked by the reference's store checker once
per implementation; each STORE-* rule is one test, failing when any file breaks it.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import pytest

from lmckv.base.schemas import schema

from ..core.rules import RULES
from ..drivers.base import Driver
from ..store import catalogue
from ..store.fsck import Settings, check_store, close_sources
from ..store.locations import FileLocation
from ..store.spec import SerdeSpec, StoreSpec
from .codec_cases import encode_cached
from .matrix import matrix_cases
from .verdicts import expect_ok, require

#: The rules of a store's content: those a check of a store can name (the fsck report's
#: problem rules). Reading and serving a store have rules of their own (STORE-LOAD-*,
#: STORE-SERVE-*: test_store_load.py), none a property of its files.
STORE_RULES = sorted(
    schema("fsck")["properties"]["problems"]["items"]["properties"]["rule"]["enum"]
)
assert set(STORE_RULES) <= set(RULES), set(STORE_RULES) - set(RULES)
MODEL = "org/store-model"
#: kv_rank of rank 0 and rank 1 of a 2-way tensor-parallel group on one node.
KV_RANKS = (0x02000200, 0x02010201)
_PROBLEMS: dict[str, list[dict[str, object]]] = {}


def _store_problems(impl: Driver) -> list[dict[str, object]]:
    """The problems the checker finds in the store ``impl`` writes (written and checked
    once per implementation and process)."""
    if impl.name in _PROBLEMS:
        return _PROBLEMS[impl.name]
    with tempfile.TemporaryDirectory(prefix="lmckv-store-") as folder:
        directory = Path(folder)
        for i, case in enumerate(matrix_cases()):
            key = {
                "chunk_hash": hashlib.sha256(case["id"].encode()).digest()[:16],
                "model_name": MODEL,
                "kv_rank": KV_RANKS[i % len(KV_RANKS)],
            }
            encoded = encode_cached(impl, case)
            if not encoded["ok"]:
                continue
            name = expect_ok(impl.call("key.fs.write", **key), f"key.fs.write {key}")["filename"]
            (directory / name).write_bytes(encoded["blob"])
        lmckv = SerdeSpec(catalogue.LMCKV.name)
        spec = StoreSpec(catalogue.FS.name, FileLocation(directory), lmckv)
        report = check_store(spec, Settings())
        try:
            _PROBLEMS[impl.name] = list(report.problems())
        finally:
            report.close()
            close_sources()
    return _PROBLEMS[impl.name]


@pytest.mark.parametrize(
    "rule", [pytest.param(r, marks=pytest.mark.rule(r), id=r.lower()) for r in STORE_RULES]
)
def test_store_written_by_impl(impl: Driver, rule: str) -> None:
    """No file of the implementation's store breaks ``rule``."""
    require(impl, "key.fs.write", "codec.encode")
    broken = [p for p in _store_problems(impl) if p["rule"] == rule]
    if broken:
        pytest.fail(
            f"{len(broken)} files of the store {impl.name} writes break {rule}: "
            + "; ".join(f"{p['name']}: {p['message']}" for p in broken[:3]),
            pytrace=False,
        )
