"""Store and load through LMCache's storage manager (bench.throughput.store_path): rows per
serde the release registers beside their file-I/O limits, the bytes each serde wrote, skips
with the reason, and the report's cost table and first-screen clause built from them."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest
import torch
from conftest import import_upstream

from lmckv.bench.accuracy import lmcache_serdes
from lmckv.bench.common.rows import validate_record
from lmckv.bench.recommendation.store_cost import cost_text, store_cost
from lmckv.bench.throughput import store_path

PLAINTEXT_PER_OBJECT = math.prod(store_path.OBJECT_SHAPE) * 2  # bfloat16


@pytest.fixture(scope="module")
def measured() -> list[dict[str, Any]]:
    """One small measurement on ``fs`` (2 objects, 2 batches), in its own process."""
    import_upstream("lmcache.v1.distributed.storage_manager")
    options = ("--objects", "2", "--batches", "2", "--adapter", "fs")
    return list(store_path.phase(progress=False, timeout_s=240, options=options))


def test_every_registered_serde_is_timed_or_skipped_with_its_reason(
    measured: list[dict[str, Any]],
) -> None:
    names, _ = lmcache_serdes.registered()
    timed = {r["case"] for r in measured if r["kind"] == "throughput"}
    skipped = {r["what"]: r["reason"] for r in measured if r["kind"] == "skip"}
    for name in ["none", *names]:
        assert f"fs:{name}" in timed or f"store path fs:{name}" in skipped, (name, skipped)
    assert {"fs:none", "fs:fp8", "fs:aesgcm"} <= timed
    if "turboquant" in names and not torch.cuda.is_available():
        assert "requires CUDA" in skipped["store path fs:turboquant"]


def test_rows_pair_with_their_limits_and_follow_the_schema(
    measured: list[dict[str, Any]],
) -> None:
    rows = [r for r in measured if r["kind"] == "throughput"]
    for row in rows:
        validate_record({**row, "machine_id": "0" * 16})
        assert row["rounds"] == 2 and all(t > 0 for t in row["samples_s"])
    for row in (r for r in rows if r["impl"] == "lmcache"):
        (limit,) = [r for r in rows if r["case"] == row["case"] and r["impl"] == row["limit"]]
        assert limit["op"] == "copy" and limit["bytes"] == row["serialized_bytes"]
        assert row["bytes"] == 2 * PLAINTEXT_PER_OBJECT
        assert row["ratio_to_limit"] == pytest.approx(limit["median_s"] / row["median_s"])


def test_the_bytes_each_serde_wrote_follow_its_format(measured: list[dict[str, Any]]) -> None:
    written = {
        r["serde"]: r["serialized_bytes"] // 2
        for r in measured
        if r["kind"] == "throughput" and r["impl"] == "lmcache"
    }
    assert written["none"] == PLAINTEXT_PER_OBJECT
    assert written["fp8"] == PLAINTEXT_PER_OBJECT // 2  # one byte per bfloat16 element
    assert written["aesgcm"] == PLAINTEXT_PER_OBJECT + 1 + 12 + 16  # version, IV, tag


def test_a_measurement_process_that_dies_or_overruns_is_a_skip_row() -> None:
    """The phase's own process: one that exits with an error, and one killed (with its
    process group) past the phase's bound, each leave one skip row saying so."""
    died = list(store_path.phase(progress=False, options=("--adapter", "nonesuch")))
    assert [(r["kind"], r["what"]) for r in died] == [("skip", "store path (rest)")]
    assert died[0]["reason"].startswith("store_path exited 2: ")
    assert "invalid choice: 'nonesuch'" in died[0]["reason"]
    overran = list(store_path.phase(progress=False, timeout_s=1))
    assert overran == [{"kind": "skip", "what": "store path (all)", "reason": "over 1 s"}]


def test_one_warm_up_batch_with_its_limits_is_discarded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first store, load and direct put/get (a cold store's first writes) are never
    timed: ``batches`` timed batches need ``batches + 1`` of each."""
    calls = {"store": 0, "load": 0, "direct": 0}
    usage = iter(range(0, 10**9, 1000))

    def store(*_: Any) -> float:
        calls["store"] += 1
        return float(calls["store"])

    def load(*_: Any) -> float:
        calls["load"] += 1
        return float(calls["load"])

    def direct(*_: Any) -> tuple[float, float]:
        calls["direct"] += 1
        return float(calls["direct"]), float(calls["direct"])

    monkeypatch.setattr(store_path, "_store", store)
    monkeypatch.setattr(store_path, "_load", load)
    monkeypatch.setattr(store_path, "_direct", direct)
    monkeypatch.setattr(store_path.worker, "fill", lambda _o: torch.zeros(1))
    monkeypatch.setattr(store_path.worker, "expected_read_bytes", lambda *_: b"")
    monkeypatch.setattr(store_path.worker, "l2_usage", lambda _m: next(usage))
    timed, _ = store_path._batches(None, None, None, objects=2, batches=3)  # type: ignore[arg-type]
    assert calls == {"store": 4, "load": 4, "direct": 4}
    assert timed["store"].lmcache == [2.0, 3.0, 4.0] and timed["load"].limit == [2.0, 3.0, 4.0]


def _row(op: str, impl: str, case: str, median: float, **extra: Any) -> dict[str, Any]:
    return {
        "op": op, "impl": impl, "case": case, "bytes": 1e9, "median_s": median,
        "q25_s": median * 0.9, "q75_s": median * 1.2, "gbps": 1e9 / median / 1e9,
        "rounds": 5, "machine": "m", **extra,
    }  # fmt: skip


def test_the_cost_table_sets_each_operation_beside_its_limit() -> None:
    throughput = pd.DataFrame(
        [
            _row("store", "lmcache", "fs:aesgcm", 2.0, limit="direct_put"),
            _row("copy", "direct_put", "fs:aesgcm", 0.5),
            _row("load", "lmcache", "fs:aesgcm", 1.0, limit="direct_get"),
            _row("copy", "direct_get", "fs:aesgcm", 0.25),
            _row("encode", "reference", "page16", 1.0),
        ]
    )
    cost = store_cost(throughput).set_index("op")
    assert list(cost.index) == ["store", "load"]
    assert cost.loc["store", "gbps"] == pytest.approx(0.5)
    assert cost.loc["store", "time_vs_limit"] == pytest.approx(4.0)
    assert cost.loc["store", "gbps_q25"] < 0.5 < cost.loc["store", "gbps_q75"]
    text = cost_text(store_cost(throughput), "aesgcm", "fs")
    assert text == ("on fs store 0.50 GB/s, load 1.00 GB/s (4.0x and 4.0x direct I/O's time)")
    assert cost_text(store_cost(throughput), "fp8", "fs") == ""
    assert store_cost(pd.DataFrame()).empty
