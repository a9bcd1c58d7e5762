"""Store and load through LMCache's own storage manager, beside putting and getting the same
bytes directly: what a serde costs on the path LMCache runs (bench/RESULTS.md, "Store-path
rows").

Per adapter (``fs`` and ``fs_native`` on a folder, ``resp`` on a loopback redis-server and
``s3`` on a loopback moto server where they run here: ``conformance.store.views``, one store
per adapter) and serde (no serde, then every name the installed release registers; one that
cannot run here is a skip row with what it did), one StorageManager is built from the MP
server's flags (``L1_FLAGS``) with that ``--l2-adapter`` spec. Objects are LMCache's chunks
of the bundled model's layout (``OBJECT_SHAPE``, bfloat16), filled once; a batch is
``objects`` of them under chunk hashes no batch used before (the fs adapters skip a key
already on disk). For each batch:

- store: L1 reservation and the copy into it happen before the clock starts; timed from
  ``finish_write`` until the store controller is idle and the L2 usage has grown by the
  batch's serialized bytes (measured on the warm-up batch: what this serde writes), polled
  every ``POLL_S``.
- load: the batch's L1 copies are dropped first; timed from ``submit_prefetch_task`` of all
  its keys until ``finish_read_prefetched``; every object's bytes are then compared with what
  was written (through the cast under ``fp8``): a load that gives other bytes is an error,
  not a time.
- limits, in the same process, on the same bytes, after each batch's load (when the
  adapter's own writes are done): putting ``objects`` new entries of the serialized size
  into the same store with its own client, and getting them back (files: Python's file I/O,
  the page cache, as the adapters write, which never fsync; resp: redis-py's SET and GET;
  s3: boto3's put_object and get_object over loopback).

One warm-up batch (store, load and both limits) is discarded, then ``batches`` are timed.
Wall clock (``perf_counter``): LMCache's store and load run in its own threads. Rows are
throughput rows (``op`` store or load, ``impl`` lmcache, ``case`` ``<adapter>:<serde>``,
``bytes`` the plaintext of a batch), each with its limit row (``op`` copy, ``impl``
direct_put or direct_get, same case) measured in the same process, so the gate can compare
them like every other throughput row.

A limit row's ``bytes`` are the serialized bytes it wrote or read. The rows are measured in
one process: the gate's verdict on them is inconclusive by design (it needs several), the
report shows them beside their limits.

Run in a process of its own (``phase``): ``python -m lmckv.bench.throughput.store_path
OUT.jsonl``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...conformance.store import catalogue
from ...conformance.store import lmcache_worker as worker
from ...conformance.store.lmcache_close import close_bounded
from ...conformance.store.servers import ServerError, StoreUnavailable
from ...conformance.store.views import StoreView, open_view
from ..accuracy import l2_serdes, lmcache_serdes
from ..common.quantiles import quantiles

#: The adapters whose stores run here (the catalogue's rows with a test store).
ADAPTERS = tuple(a.name for a in catalogue.adapters_here())
#: One LMCache chunk of the bundled model (SmolLM2-135M): K and V, 30 layers, 256 tokens,
#: 3 KV heads x ``HEAD_DIM``.
OBJECT_SHAPE, HEAD_DIM = (2, 30, 256, 192), 64
DTYPE = "bfloat16"
#: L1 in front of the adapter: a batch, its serialized copies and the load's copies.
L1_FLAGS = ["--l1-size-gb", "0.25", "--no-l1-use-lazy", "--eviction-policy", "LRU"]
POLL_S = 0.001
#: Seconds a batch's store or load may take before the measurement gives up.
TIMEOUT_S = 60.0
LIMITS = {"store": "direct_put", "load": "direct_get"}
#: Seconds the whole measurement may take in the quick run.
PHASE_TIMEOUT_S = 300.0
#: Objects per batch, and timed batches of the quick run and of ``--full``.
DEFAULT_OBJECTS, DEFAULT_BATCHES, FULL_BATCHES = 4, 3, 10


class StorePathError(RuntimeError):
    """A measurement that could not be made; the message says why."""


@dataclass(frozen=True)
class Timed:
    """Seconds per batch of one operation: LMCache's and its limit's, in batch order."""

    lmcache: list[float]
    limit: list[float]


_FRESH = itertools.count()


def _objects(count: int) -> list[worker.PlanObject]:
    """``count`` objects under chunk hashes no earlier batch of this process used."""
    return [
        worker.PlanObject(
            model_name="lmckv-store-path",
            kv_rank=0,
            object_group_id=0,
            chunk_hash=f"{os.getpid():08x}{next(_FRESH):024x}",
            cache_salt="",
            shape=OBJECT_SHAPE,
            dtype=DTYPE,
            seed=0,
        )
        for _ in range(count)
    ]


def _build(spec: dict[str, Any]) -> Any:
    config = importlib.import_module("lmcache.v1.distributed.config")
    module = importlib.import_module("lmcache.v1.distributed.storage_manager")
    return module.StorageManager(config.parse_args([*L1_FLAGS, "--l2-adapter", json.dumps(spec)]))


def _poll(done: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        if time.monotonic() > deadline:
            raise StorePathError(f"{what} did not finish in {TIMEOUT_S:.0f} s")
        time.sleep(POLL_S)


def _store(manager: Any, objects: list[worker.PlanObject], data: torch.Tensor, grow: int) -> float:
    """Seconds from ``finish_write`` until the batch is in L2 (``grow`` bytes more usage;
    0: until the controller is idle and the usage is stable, the warm-up's way)."""
    keys = [worker.object_key(o) for o in objects]
    reserved = worker.reserve_write(manager, keys, worker.layout(objects[0]))
    if len(reserved) != len(keys):
        raise StorePathError(f"L1 reserved {len(reserved)} of {len(keys)} objects")
    for key in keys:
        reserved[key].tensor.copy_(data)
    before = worker.l2_usage(manager)
    t0 = time.perf_counter()
    manager.finish_write(keys)
    if grow:
        _poll(
            lambda: (
                worker.store_backlog(manager) == (0, 0)
                and worker.l2_usage(manager) - before >= grow
            ),
            "a store",
        )
    else:
        worker.wait_flushed(manager, TIMEOUT_S)
    return time.perf_counter() - t0


def _load(manager: Any, objects: list[worker.PlanObject], expected: bytes) -> float:
    """Seconds from ``submit_prefetch_task`` of the batch until ``finish_read_prefetched``,
    each object copied out of L1 on the way (as a reader does); ``StorePathError`` when an
    object misses or comes back with other bytes."""
    api = importlib.import_module("lmcache.v1.distributed.api")
    keys = [worker.object_key(o) for o in objects]
    manager.delete_l1_keys(keys)
    group = api.GroupedObjectKeys(
        keys=keys, object_group_id=0, layout_desc=worker.layout(objects[0])
    )
    t0 = time.perf_counter()
    handle = manager.submit_prefetch_task(
        api.PrefetchTaskSpec(key_groups=[group], fetching_policy="full"),
        external_request_id=f"lmckv-store-path-{objects[0].chunk_hash}",
    )
    if not manager.wait_prefetch_status(handle, timeout=TIMEOUT_S):
        raise StorePathError("a load did not finish")
    result = manager.query_prefetch_status(handle)
    owners = result.l1_owners
    if not all(result.hit_cells[0].test(i) for i in range(len(keys))):
        raise StorePathError("a load missed objects the store had just written")
    with manager.read_prefetched_results(keys, l1_owners=owners) as memory_objs:
        got = [m.tensor.clone() for m in memory_objs]
    manager.finish_read_prefetched(keys, l1_owners=owners)
    seconds = time.perf_counter() - t0
    manager.delete_l1_keys(keys)
    if any(worker.tensor_bytes(g) != expected for g in got):
        raise StorePathError("a load gave back other bytes than were stored")
    return seconds


def _direct(view: StoreView, count: int, size: int, payload: bytes) -> tuple[float, float]:
    """(seconds to put ``count`` new entries of ``size`` bytes into the store with its own
    client, seconds to get them back); removed afterwards."""
    names = [f"lmckv-limit-{next(_FRESH)}" for _ in range(count)]
    data = (payload * (size // len(payload) + 1))[:size]
    t0 = time.perf_counter()
    for name in names:
        view.put(name, data)
    put = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = [len(view.get(name)) for name in names]
    get = time.perf_counter() - t0
    for name in names:
        view.delete(name)
    if got != [size] * count:
        raise StorePathError(f"the store gave back {got} bytes for {size} put")
    return put, get


def _close(manager: Any) -> None:
    """Close in a daemon thread (a StorageManager takes seconds to close), bounded."""
    close_bounded(manager, TIMEOUT_S)


def measure(
    view: StoreView, serde: dict[str, Any] | None, objects: int, batches: int
) -> tuple[dict[str, Timed], int]:
    """(store and load seconds per batch, each beside its limit; serialized bytes per
    object) of one store and serde (this module's docstring)."""
    spec = {"type": view.adapter, **view.fields, **({"serde": serde} if serde else {})}
    with lmcache_serdes.concrete_spec(spec) as concrete:
        manager = _build(concrete)
        try:
            return _batches(manager, view, serde, objects, batches)
        finally:
            _close(manager)


def _batches(
    manager: Any, view: StoreView, serde: dict[str, Any] | None, objects: int, batches: int
) -> tuple[dict[str, Timed], int]:
    warm = _objects(objects)
    data = worker.fill(warm[0])
    row = catalogue.SERDES.get((serde or {}).get("type", catalogue.NONE.name))
    expected = worker.expected_read_bytes(warm[0], (row.cast if row else None) or "")
    before = worker.l2_usage(manager)
    _store(manager, warm, data, 0)
    grow = worker.l2_usage(manager) - before
    if grow <= 0:
        raise StorePathError("the warm-up batch did not grow the L2 usage")
    _load(manager, warm, expected)
    payload = os.urandom(1 << 20)
    _direct(view, objects, grow // objects, payload)  # the limits' warm-up, discarded too
    timed = {op: Timed([], []) for op in LIMITS}
    for _ in range(batches):
        keys = _objects(objects)
        timed["store"].lmcache.append(_store(manager, keys, data, grow))
        timed["load"].lmcache.append(_load(manager, keys, expected))
        put, get = _direct(view, objects, grow // objects, payload)
        timed["store"].limit.append(put)
        timed["load"].limit.append(get)
    return timed, grow // objects


def _row(
    op: str, impl: str, case: str, nbytes: int, seconds: list[float], limit: str | None
) -> dict[str, Any]:
    q = quantiles(seconds, (0.25, 0.5, 0.75))
    median = q[1]
    return {
        "kind": "throughput", "op": op, "impl": impl, "device": "cpu", "scope": None,
        "dtype": DTYPE, "case": case, "bytes": nbytes, "rounds": len(seconds),
        "median_s": median, "iqr_s": q[2] - q[0], "q25_s": q[0], "q75_s": q[2],
        "gbps": nbytes / median / 1e9, "limit": limit, "ratio_to_limit": None,
        "ratio_to_upstream": None, "samples_s": seconds, "processes": 1,
        "samples_by_process": [seconds],
    }  # fmt: skip


def rows(
    root: Path,
    *,
    objects: int = DEFAULT_OBJECTS,
    batches: int = DEFAULT_BATCHES,
    adapters: tuple[str, ...] = ADAPTERS,
) -> Iterator[dict[str, Any]]:
    """Every adapter x serde's store and load rows with their limits, or skip rows."""
    names, source = lmcache_serdes.registered()
    if not names:
        yield {"kind": "skip", "what": "store path (all)", "reason": source}
        return
    plaintext = objects * torch.Size(OBJECT_SHAPE).numel() * torch.finfo(torch.bfloat16).bits // 8
    for adapter in adapters:
        with contextlib.ExitStack() as servers:
            try:
                view = open_view(adapter, root / adapter, servers)
            except (StoreUnavailable, ServerError) as exc:
                yield {"kind": "skip", "what": f"store path {adapter}", "reason": str(exc)[:300]}
                continue
            for name in [l2_serdes.NONE, *names]:
                yield from _serde_rows(view, name, objects, batches, plaintext)


def _serde_rows(
    view: StoreView, name: str, objects: int, batches: int, plaintext: int
) -> Iterator[dict[str, Any]]:
    """One store and serde's rows (``rows``), or its skip row."""
    serde = l2_serdes.l2_config(name, head_dim=HEAD_DIM)
    case = f"{view.adapter}:{name}"
    started = time.time()
    try:
        if serde is not None:  # a serde that cannot run here fails in LMCache's threads
            lmcache_serdes.roundtrip(serde, [torch.ones(2, 6, 16, 2 * HEAD_DIM)])
        timed, serialized = measure(view, serde, objects, batches)
    except Exception as exc:  # the serde's or LMCache's own error: the row says it
        text = str(exc).strip().splitlines()
        reason = f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
        yield {"kind": "skip", "what": f"store path {case}", "reason": reason}
        return
    extra = {"serde": name, "adapter": view.adapter, "serialized_bytes": serialized * objects}
    stamp = {"started_utc": _utc(started), "ended_utc": _utc(time.time())}
    for op, t in timed.items():
        limit = _row("copy", LIMITS[op], case, serialized * objects, t.limit, None)
        row = _row(op, "lmcache", case, plaintext, t.lmcache, LIMITS[op])
        row["ratio_to_limit"] = limit["median_s"] / row["median_s"]
        yield {**limit, **extra, **stamp}
        yield {**row, **extra, **stamp}


def describe(batches: int = DEFAULT_BATCHES) -> dict[str, Any]:
    """This phase's configuration, for the results header."""
    return {
        "adapters": list(ADAPTERS),
        "object_shape": list(OBJECT_SHAPE),
        "dtype": DTYPE,
        "objects": DEFAULT_OBJECTS,
        "batches": batches,
        "l1_flags": L1_FLAGS,
        "timer": "perf_counter",
    }


def phase(
    *, progress: bool = True, timeout_s: float = PHASE_TIMEOUT_S, options: tuple[str, ...] = ()
) -> Iterator[dict[str, Any]]:
    """The rows of one ``store_path`` process with ``options`` (bounded by ``timeout_s``;
    killed with its process group past it), or one skip row saying why there are none."""
    with tempfile.TemporaryDirectory(prefix="lmckv-store-path-") as tmp:
        out = Path(tmp) / "rows.jsonl"
        if progress:
            print("store path: each adapter through LMCache's storage manager", file=sys.stderr)
        proc = subprocess.Popen(
            [sys.executable, "-m", "lmckv.bench.throughput.store_path", str(out), *options],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            _, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            yield {"kind": "skip", "what": "store path (all)", "reason": f"over {timeout_s:.0f} s"}
            return
        lines = out.read_text(encoding="utf-8").splitlines() if out.exists() else []
        if proc.returncode != 0:
            tail = (stderr or "").strip().splitlines()[-1:] or [""]
            reason = f"store_path exited {proc.returncode}: {tail[0][:300]}"
            yield {"kind": "skip", "what": "store path (rest)", "reason": reason}
        for line in lines:
            yield json.loads(line)


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def main(argv: list[str] | None = None) -> int:
    """``python -m lmckv.bench.throughput.store_path OUT.jsonl [--objects N] [--batches R]``:
    the rows, one JSON object per line."""
    parser = argparse.ArgumentParser(prog="store_path")
    parser.add_argument("out", type=Path)
    parser.add_argument("--objects", type=int, default=DEFAULT_OBJECTS)
    parser.add_argument("--batches", type=int, default=DEFAULT_BATCHES)
    parser.add_argument("--adapter", action="append", choices=ADAPTERS)
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lmckv-store-path-")))
        with args.out.open("w", encoding="utf-8") as out:
            for row in rows(root, objects=args.objects, batches=args.batches,
                            adapters=tuple(args.adapter or ADAPTERS)):  # fmt: skip
                out.write(json.dumps(row) + "\n")
                out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
