"""Real LMCache L2 stores for lmckv's tests, written and read back by LMCache itself.

:func:`write_stores` runs :mod:`.lmcache_worker` in a fresh process under an interpreter that
has lmcache installed. For each operator ``--l2-adapter`` spec, LMCache's own StorageManager
writes the planned objects. It then looks into each store from outside LMCache
(:func:`missing_objects`). :func:`read_back_stores` prefetches the objects again in another
fresh process. Each worker leads its own process group, which is killed on timeout and on
every other exit path. :func:`expected_names` gives the names the objects must have in a
store, in lmckv's reference key forms: the form of the adapter's catalogue row (KEY-FS-FORM or
KEY-STRING-FORM), with ``<key_prefix>@`` in front where the adapter takes a prefix.

The worker hands LMCache one layout at a time (:func:`.lmcache_worker.write` says why): the
``resp`` adapter loses every object of a store batch that mixes layouts. lmcache 0.5.6 and
0.5.7rc2 then log "Store task N to adapter 0 failed"; the native connector reports "buffer
size mismatch"."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from math import prod
from pathlib import Path
from typing import Any

from lmckv.base import process_groups

from ...reference_impl.keys import ObjectKey
from ...reference_impl.keys.kv_rank import compute_kv_rank
from . import catalogue
from .sources import sizes
from .spec import from_l2_adapter, open_source

#: Bytes per element of the dtypes a plan may use (floating: the worker fills from randn).
DTYPE_SIZES = {"bfloat16": 2, "float16": 2, "float32": 4}
#: Seconds the worker waits for LMCache at each step (flush, each prefetch).
STEP_TIMEOUT_S = 20.0
#: :func:`probe_store`: seconds LMCache's wait gets per object (a damaged object of a few KiB
#: is answered in milliseconds on loopback), a worker's start-up (imports, L1 allocation), and
#: the slack per object beyond the wait before the worker counts as hung.
PROBE_WAIT_S = 5.0
PROBE_STARTUP_S = 60.0
PROBE_SLACK_S = 5.0
#: Seconds to reap a worker whose group was SIGKILLed.
WORKER_REAP_S = 5.0
#: The worker's file (:mod:`.lmcache_worker`), run by path (``python -P``, so its folder is
#: not put on ``sys.path``): the interpreter needs lmcache, not lmckv, and this module does
#: not import torch.
WORKER_PATH = Path(__file__).with_name("lmcache_worker.py")


class StoreWriteError(RuntimeError):
    """LMCache's worker failed, timed out, or left objects unwritten."""


@dataclass(frozen=True)
class PlannedObject:
    """One object to write: its ObjectKey fields, a one-tensor layout and a fill seed."""

    model_name: str
    kv_rank: int
    object_group_id: int
    chunk_hash: bytes
    cache_salt: str
    shape: tuple[int, ...]
    seed: int
    dtype: str = "bfloat16"

    def __post_init__(self) -> None:
        self.key()  # the reference ObjectKey's invariants
        if self.dtype not in DTYPE_SIZES:
            raise ValueError(f"dtype {self.dtype!r} is not one of {sorted(DTYPE_SIZES)}")

    def key(self) -> ObjectKey:
        """The object's key, as lmckv's reference implementation models it."""
        return ObjectKey(
            chunk_hash=self.chunk_hash,
            model_name=self.model_name,
            kv_rank=self.kv_rank,
            object_group_id=self.object_group_id,
            cache_salt=self.cache_salt,
        )

    @property
    def nbytes(self) -> int:
        """The layout's size: what a raw store holds for this object."""
        return prod(self.shape) * DTYPE_SIZES[self.dtype]

    def to_json(self) -> dict[str, Any]:
        """The object as the worker's PLAN.json lists it."""
        return {**asdict(self), "chunk_hash": self.chunk_hash.hex(), "shape": list(self.shape)}


@dataclass(frozen=True)
class WrittenObject:
    """What the worker wrote for ``obj``: the sha256 and length of the raw bytes."""

    obj: PlannedObject
    sha256: str
    nbytes: int


@dataclass(frozen=True)
class ReadObject:
    """A read-back of ``obj``: ``outcome`` is exact, wrong-bytes, miss or timeout (LMCache's
    wait gave up), and for :func:`probe_store` also error (LMCache raised; ``detail`` says
    what), hung (the worker outlived its bound on this object) or crashed (the worker died
    on it; ``detail`` has its exit status)."""

    obj: PlannedObject
    outcome: str
    hit: bool
    exact: bool
    detail: str = ""


#: The default plan's models: one with '/' (escaped as -SEP- in file names), one without.
MODEL_WITH_SLASH = "lmckv/tiny-llama-3.1"
MODEL_PLAIN = "plainmodel"
#: Full chunks of 16 tokens, a second object group's smaller layout (7680 bytes, not 4 KiB
#: aligned), and a partial last chunk of 7 tokens in group 0.
FULL_CHUNK = (2, 4, 16, 64)
OTHER_GROUP_CHUNK = (2, 3, 16, 40)
PARTIAL_CHUNK = (2, 4, 7, 64)
OTHER_GROUP = 0x1A
SALT = "tenant-a"


def sha256_chunk_hash(index: int) -> bytes:
    """A 32-byte chunk hash, as LMCache's sha256 hashing makes."""
    return hashlib.sha256(f"lmckv-chunk-{index}".encode()).digest()


def default_plan() -> list[PlannedObject]:
    """Nine objects: two models (one with '/'), two kv_ranks (world 1 rank 0; world 2 rank 1),
    two object groups of different layouts, an 8-byte chunk hash (the builtin-hash form) with
    and without a cache_salt, and a partial last chunk in group 0."""
    rank_a, rank_b = compute_kv_rank(1, 0, 1, 0), compute_kv_rank(2, 1, 2, 1)
    short_hash = (-42).to_bytes(8, "big", signed=True)
    rows = [
        (MODEL_WITH_SLASH, rank_a, 0, sha256_chunk_hash(0), "", FULL_CHUNK),
        (MODEL_WITH_SLASH, rank_a, 0, sha256_chunk_hash(1), "", FULL_CHUNK),
        (MODEL_WITH_SLASH, rank_b, 0, sha256_chunk_hash(0), "", FULL_CHUNK),
        (MODEL_WITH_SLASH, rank_a, OTHER_GROUP, sha256_chunk_hash(0), "", OTHER_GROUP_CHUNK),
        (MODEL_WITH_SLASH, rank_b, OTHER_GROUP, sha256_chunk_hash(1), "", OTHER_GROUP_CHUNK),
        (MODEL_PLAIN, rank_a, 0, short_hash, "", FULL_CHUNK),
        (MODEL_PLAIN, rank_b, 0, sha256_chunk_hash(2), "", FULL_CHUNK),
        (MODEL_PLAIN, rank_a, 0, short_hash, SALT, FULL_CHUNK),
        (MODEL_PLAIN, rank_a, 0, sha256_chunk_hash(3), "", PARTIAL_CHUNK),
    ]
    return [
        PlannedObject(model, rank, group, digest, salt, shape, seed=1000 + index)
        for index, (model, rank, group, digest, salt, shape) in enumerate(rows)
    ]


def expected_names(
    adapter_type: str, plan: Sequence[PlannedObject], key_prefix: str = ""
) -> list[str]:
    """The name each object of ``plan`` has in a store of ``adapter_type``, in plan order."""
    row = catalogue.adapter(adapter_type)
    prefix = key_prefix if row.key_prefix else ""
    return [row.form.name_of(o.key(), prefix) for o in plan]


def write_stores(
    specs: Sequence[str],
    plan: Sequence[PlannedObject],
    *,
    python: str = sys.executable,
    timeout: float = 180.0,
    required: Sequence[PlannedObject] | None = None,
) -> list[list[WrittenObject]]:
    """Write ``plan`` into each store of ``specs`` (``--l2-adapter`` JSON strings) through
    LMCache's StorageManager, in one fresh process under ``python`` within ``timeout``
    seconds; per store, what was written. A :class:`StoreWriteError` when the worker fails,
    or when a store it can look into (:func:`missing_objects`) lacks an object of
    ``required`` (default: all of ``plan``; a caller that checks the names itself requires
    fewer)."""
    _check_plan(plan)
    stores = _run_worker("write", specs, plan, python, timeout)
    for spec, store in zip(specs, stores, strict=True):
        unreserved = [o.key() for o, row in zip(plan, store, strict=True) if not row["reserved"]]
        missing = [o.key() for o in missing_objects(spec, plan if required is None else required)]
        if unreserved or missing:
            raise StoreWriteError(f"{spec}: L1 refused {unreserved}; the store lacks {missing}")
    return [
        [
            WrittenObject(o, str(row["sha256"]), int(row["nbytes"]))
            for o, row in zip(plan, store, strict=True)
        ]
        for store in stores
    ]


def write_store(
    spec: str,
    plan: Sequence[PlannedObject],
    *,
    python: str = sys.executable,
    timeout: float = 180.0,
) -> list[WrittenObject]:
    """:func:`write_stores` for one store."""
    return write_stores([spec], plan, python=python, timeout=timeout)[0]


def read_back_stores(
    specs: Sequence[str],
    plan: Sequence[PlannedObject],
    *,
    python: str = sys.executable,
    timeout: float = 180.0,
) -> list[list[ReadObject]]:
    """Prefetch every object of ``plan`` from each store of ``specs`` through a StorageManager
    of its own, in one fresh process under ``python``; per store, what each read gave."""
    _check_plan(plan)
    stores = _run_worker("read", specs, plan, python, timeout)
    return [
        [
            ReadObject(o, str(row["outcome"]), bool(row["hit"]), bool(row["exact"]))
            for o, row in zip(plan, store, strict=True)
        ]
        for store in stores
    ]


def read_back(
    spec: str,
    plan: Sequence[PlannedObject],
    *,
    python: str = sys.executable,
    timeout: float = 180.0,
) -> list[ReadObject]:
    """:func:`read_back_stores` for one store."""
    return read_back_stores([spec], plan, python=python, timeout=timeout)[0]


def probe_store(
    spec: str,
    plan: Sequence[PlannedObject],
    sessions: Sequence[Sequence[int]],
    *,
    per_object_s: float = PROBE_WAIT_S,
    python: str = sys.executable,
) -> list[list[ReadObject]]:
    """Read objects of ``plan`` back from the store of ``spec`` through LMCache, per session
    (a list of plan indexes) through a StorageManager of its own, each prefetch bounded by
    ``per_object_s``; per session, what each read gave. A worker that dies or hangs in a
    session costs that session only: its unread objects are crashed or hung, and a fresh
    worker goes on with the next session (at most one worker per session)."""
    _check_plan(plan)
    rows: dict[tuple[int, int], dict[str, Any]] = {}
    start = 0
    for _ in range(len(sessions)):
        lines, ending = _probe_from(spec, plan, sessions, start, per_object_s, python)
        for row in lines:
            if "index" in row:
                rows[int(row["session"]), int(row["index"])] = row
        closed = {int(row["session"]) for row in lines if row.get("done")}
        if not lines and ending["outcome"] == "crashed":
            raise StoreWriteError(f"lmcache_worker probe read nothing: {ending['detail']}")
        done = [s for s in range(start, len(sessions)) if s in closed]
        unfinished = next((s for s in range(start, len(sessions)) if s not in closed), None)
        if unfinished is None:
            break
        for index in sessions[unfinished]:
            rows.setdefault((unfinished, index), {**ending, "hit": False, "exact": False})
        start = max([unfinished, *done]) + 1
        if start >= len(sessions):
            break
    return [
        [_read_object(plan[i], rows.get((s, i))) for i in session]
        for s, session in enumerate(sessions)
    ]


def _probe_from(
    spec: str,
    plan: Sequence[PlannedObject],
    sessions: Sequence[Sequence[int]],
    start: int,
    per_object_s: float,
    python: str,
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """One probe worker from session ``start`` on: the lines it reported, and how it ended
    should it stop before its last session is done (crashed, or hung)."""
    reads = sum(len(s) for s in sessions[start:])
    budget = PROBE_STARTUP_S + reads * (per_object_s + PROBE_SLACK_S)
    with tempfile.TemporaryDirectory(prefix="lmckv-probe-") as tmp:
        work = Path(tmp)
        _write_plan(work, [spec], plan, per_object_s, start=start, sessions=sessions)
        argv = [python, "-P", str(WORKER_PATH), "probe", "plan.json", "out.jsonl"]
        try:
            status = _run_in_group(argv, work, budget)
            log = (work / "worker.log").read_text(encoding="utf-8", errors="replace")
            ending = {"outcome": "crashed", "detail": f"exit {status}: {log[-2000:]}"}
        except StoreWriteError:
            ending = {"outcome": "hung", "detail": f"no answer within {budget:.0f} s"}
        out = work / "out.jsonl"
        text = out.read_text(encoding="utf-8") if out.is_file() else ""
    return [json.loads(line) for line in text.splitlines()], ending


def _read_object(obj: PlannedObject, row: dict[str, Any] | None) -> ReadObject:
    if row is None:
        return ReadObject(obj, "hung", False, False, "never reached")
    detail = str(row.get("detail") or row.get("error") or "")
    return ReadObject(obj, str(row["outcome"]), bool(row["hit"]), bool(row["exact"]), detail)


def missing_objects(spec: str, plan: Sequence[PlannedObject]) -> list[PlannedObject]:
    """The objects of ``plan`` that the store of ``spec`` does not hold, listed from outside
    LMCache with the adapter's own client (:mod:`.sources`)."""
    store = from_l2_adapter(spec)
    source = open_source(store)
    try:
        held = sizes(source)
    finally:
        source.close()
    names = expected_names(store.adapter, plan, store.key_prefix)
    return [o for o, name in zip(plan, names, strict=True) if name not in held]


def serde_cast(spec: str) -> str:
    """The dtype the serde of ``spec`` casts each element to and back ("": none)."""
    serde = json.loads(spec).get("serde")
    name = str(serde.get("type")) if isinstance(serde, dict) else catalogue.NONE.name
    return catalogue.serde(name).cast or ""


def _check_plan(plan: Sequence[PlannedObject]) -> None:
    keys = [o.key() for o in plan]
    if not keys or len(set(keys)) != len(keys):
        raise ValueError("a plan lists one or more objects, each ObjectKey once")


def _run_worker(
    role: str, specs: Sequence[str], plan: Sequence[PlannedObject], python: str, timeout: float
) -> list[list[dict[str, Any]]]:
    """Run ``lmcache_worker ROLE`` on ``specs`` and ``plan``; per store, its rows of OUT.json.
    A :class:`StoreWriteError` with the worker's log tail when it fails or outlives
    ``timeout``."""
    with tempfile.TemporaryDirectory(prefix=f"lmckv-{role}-") as tmp:
        work = Path(tmp)
        _write_plan(work, specs, plan, STEP_TIMEOUT_S)
        argv = [python, "-P", str(WORKER_PATH), role, "plan.json", "out.json"]
        returncode = _run_in_group(argv, work, timeout)
        out = work / "out.json"
        if returncode != 0 or not out.is_file():
            log = (work / "worker.log").read_text(encoding="utf-8", errors="replace")
            raise StoreWriteError(f"lmcache_worker {role} exited {returncode}:\n{log[-4000:]}")
        result = json.loads(out.read_text(encoding="utf-8"))
        return [store["objects"] for store in result["stores"]]


def _write_plan(
    work: Path,
    specs: Sequence[str],
    plan: Sequence[PlannedObject],
    wait_s: float,
    *,
    start: int = 0,
    sessions: Sequence[Sequence[int]] = (),
) -> None:
    """The worker's PLAN.json in ``work``; per spec, the dtype its serde casts to (the
    serde's catalogue row), so that the worker knows what a read must give back."""
    doc = {
        "specs": list(specs), "objects": [o.to_json() for o in plan], "timeout_s": wait_s,
        "start": start, "sessions": [list(s) for s in sessions],
        "casts": [serde_cast(spec) for spec in specs],
    }  # fmt: skip
    (work / "plan.json").write_text(json.dumps(doc), encoding="utf-8")


def _run_in_group(argv: list[str], cwd: Path, timeout: float) -> int:
    """Run ``argv`` in ``cwd`` as the leader of a new process group, its output in
    ``cwd/worker.log``; its exit status. The group is killed on every way out."""
    env = {**os.environ, "LMCACHE_LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1"}
    with (cwd / "worker.log").open("wb") as log:
        proc = subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=env, start_new_session=True,
        )  # fmt: skip
    process_groups.register(proc.pid)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise StoreWriteError(f"lmcache_worker {argv[3]} outlived {timeout} s") from None
    finally:
        process_groups.release(proc.pid)  # SIGKILLs what is left of the group
        proc.wait(timeout=WORKER_REAP_S)
