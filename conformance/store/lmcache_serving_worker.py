"""Serve a script of whole prefetch tasks from one real LMCache L2 store through LMCache's own
StorageManager, in one process that lives through the whole script, as a serving process
does::

    python -P lmcache_serving_worker.py PLAN.json OUT.jsonl

Like :mod:`lmcache_worker` (whose object, layout and manager helpers it loads by path), it
imports only the standard library, torch and lmcache. PLAN.json is that worker's, with one
spec, plus ``script`` (a list of steps) and ``pause_s``:

- ``{"op": "manager"}``: a fresh StorageManager; the one before closes in a thread. With
  ``"extra": {...}``: fields added to the spec's (an adapter's capacity and eviction); with
  ``"label": L``, a manager the release cannot build is line ``{"label": L, "error": TEXT}``
  and the steps that need it do nothing.
- ``{"op": "task", "label": L, "groups": [[i, ...], ...]}``: one prefetch task under the
  default ``prefix`` policy, one key group per list (object indexes in chunk order; every list
  of one length); 0.5.6 and later as a ``PrefetchTaskSpec`` of ``GroupedObjectKeys`` rows,
  0.5.3 to 0.5.5 as a ``PrefetchRequestSpec`` of the flat chunk-major key list its attention
  windows define (chunk, then object group, then kv_rank; object groups 0..G-1). The hits are
  read from L1, compared, released, and every key of the task is dropped from L1 again, so
  that the next task reads the store. Line: ``{"label": L, "cells": [[OUTCOME, ...], ...],
  "wait_s": S}`` (S: how long LMCache took to finish it)
  with OUTCOME exact (the bytes of one version written whole), wrong-bytes or miss per key,
  and ``"handed": [[k, j], ...]``: the misses whose keys LMCache's L1 announced as written
  while the task ran (its store path stores what L1 announces: a load that failed and is
  announced puts the buffer it never filled under the key, SPEC.md differences item 57);
  or ``{"label": L, "error": TEXT}`` when LMCache raised, ``{"label": L, "timeout": true}``
  when its wait gave up.
  With ``"again": {"cell": [k, j], "tries": N}``: when the key at chunk j of group k was a
  hit, the task is read N - 1 times more, each in a fresh StorageManager, lines ``L#1`` to
  ``L#N-1`` (where a damaged object's bytes land can depend on the order of LMCache's loads).
- ``{"op": "together", "label": L, "tasks": [GROUPS, ...]}``: the tasks submitted one after
  the other without waiting, then each waited for and read in turn, their keys dropped from
  L1 only after the last; a line per task, labelled ``L/k``.
- ``{"op": "pause", "label": L}``: line ``{"pause": L}``, then wait for the file ``go-L`` in
  the working directory (at most ``pause_s``): the caller changes the store meanwhile.
- ``{"op": "arm", "label": L, "index": i}``: the next time LMCache hands its adapter a load
  that includes object i's key, pause as above first (once): the caller removes the object
  after LMCache's lookup found it and before its load.
- ``{"op": "crash", "label": L, "objects": [i, ...], "kill_after": K}``: a writer forked from
  this process (before it built any StorageManager: a fork copies no LMCache thread) stores
  the objects through a StorageManager of its own, one at a time: it hands LMCache one,
  waits until its adapter reports it stored, then hands the next. It is SIGKILLed once K
  objects are stored and LMCache has submitted the next one's store to the adapter (K =
  the burst's length: once all are stored), or at half ``pause_s``; its L1 segment is
  removed. Line: ``{"label": L, "stored": N, "handed": M, "submitted": S, "killed": true}``
  (``killed`` false: it had ended by itself).

- ``{"op": "fill", "label": L, "objects": [i, ...], "read": "before" | "just", "rounds": R,
  "gap_s": G}``: the objects stored through the manager one at a time, each waited for until
  its adapter reports it stored and then dropped from L1 (once LMCache's store controller
  lets go of it; the worker stops with an error if it never does); after each, as a task of
  its own each, ``before``: every object stored before it, ``just``: the object itself (lines
  ``L/n/m``: after the n-th store, the m-th object); then R rounds of reads of every object,
  G seconds apart (lines ``L/rK/m``), while LMCache's eviction (a pass a second) runs.

Objects may have other versions (``versions``: object index -> fill seeds): a hit equal to
any of them is exact. Each line is flushed as soon as it is known.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib.util
import json
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

if __name__ == "__main__":
    # The caller asks a hung worker for its threads' stacks (serving_run.stacks): registered
    # before anything of LMCache or torch loads, so that a hang while they load answers too.
    faulthandler.register(signal.SIGUSR1, all_threads=True)


def _load_worker() -> ModuleType:
    """:mod:`lmcache_worker`, loaded from its file beside this one (no package import)."""
    path = Path(__file__).with_name("lmcache_worker.py")
    spec = importlib.util.spec_from_file_location("lmckv_lmcache_worker", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


W = _load_worker()
#: Threads of the process above which a new StorageManager waits for older ones to close
#: (:meth:`Script.new_manager`).
THREADS = 1000
#: Seconds between looks for a ``go-L`` file.
PAUSE_POLL_S = 0.02


class Announced:
    """An L1 listener of the suite's own, registered as LMCache's store controller registers
    its own: the keys L1 announces as written (``on_l1_keys_write_finished``), in order, as
    the store controller hears them; every other event does nothing."""

    def __init__(self) -> None:
        self.keys: list[Any] = []
        self._lock = threading.Lock()

    def on_l1_keys_write_finished(self, keys: list[Any]) -> None:
        with self._lock:
            self.keys.extend(keys)

    def since(self, mark: int) -> set[Any]:
        """The keys announced after the first ``mark``."""
        with self._lock:
            return set(self.keys[mark:])

    def mark(self) -> int:
        with self._lock:
            return len(self.keys)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("on_"):
            return _ignore
        raise AttributeError(name)


def _ignore(*_args: Any, **_kwargs: Any) -> None:
    """An L1 event :class:`Announced` does not record."""


class Script:
    """The running script: its plan, the manager, the output, the armed pauses."""

    def __init__(self, raw: dict[str, Any], out: Any, cwd: Path) -> None:
        self.plan = W.Plan.load_raw(raw)
        (self.spec,) = self.plan.specs
        self.cast = self.plan.cast(0)
        self.pause_s = float(raw["pause_s"])
        self.versions = {
            int(i): [int(s) for s in seeds] for i, seeds in raw.get("versions", {}).items()
        }
        self.out, self.cwd = out, cwd
        self.manager: Any = None
        self.managers = 0
        self.closing: list[threading.Thread] = []
        self.armed: dict[Any, str] = {}
        self.expected: dict[int, list[bytes]] = {}
        self.announced = Announced()

    def line(self, row: dict[str, Any]) -> None:
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()

    def pause(self, label: str) -> None:
        """Say ``label`` and wait for ``go-label`` (bounded)."""
        self.line({"pause": label})
        go = self.cwd / f"go-{label}"
        for _ in range(int(self.pause_s / PAUSE_POLL_S) + 1):
            if go.exists():
                go.unlink()  # taken: a later pause of the same label waits for its own
                return
            time.sleep(PAUSE_POLL_S)

    def new_manager(self, extra: dict[str, Any] | None = None) -> None:
        """Close the manager (in a thread: a close takes a second or two, and one whose
        connection a damaged read left stuck may not end) and build the next. While the
        process has more than :data:`THREADS` threads, the oldest close is waited for first
        (:data:`W.CLOSE_WAIT_S` at most): a manager holds its adapter's threads until its
        close ends (lmcache 0.5.7rc2's ``fs_native`` client, 264 of them), and a process
        that piles them up cannot start another ("Resource temporarily unavailable")."""
        if self.manager is not None:
            self.closing.append(threading.Thread(target=self.manager.close, daemon=True))
            self.closing[-1].start()
        self.closing = [t for t in self.closing if t.is_alive()]
        while self.closing and _threads() > THREADS:
            self.closing.pop(0).join(W.CLOSE_WAIT_S)
        # A segment name of its own: a manager closing (in a thread) while the next one runs
        # would otherwise unlink the next one's pool (lmcache 0.5.7rc2 then exits on
        # FileNotFoundError in free_shm_pinned_ptr).
        self.managers += 1
        shm_name = f"lmcache_l1_pool_{os.getpid()}_{self.managers}"
        spec = json.dumps({**json.loads(self.spec), **extra}) if extra else self.spec
        self.manager = W.build_manager(spec, shm_name)
        self._hook(self.manager)

    def _hook(self, manager: Any) -> None:
        """Register :attr:`announced` with the manager's L1, and wrap the adapter's
        ``submit_load_task`` so that an armed key pauses the load before LMCache submits it
        (after its lookup found the key)."""
        manager._l1_manager.register_listener(self.announced)
        _descriptor, adapter = manager.l2_adapters()[0]
        submit = adapter.submit_load_task

        def submit_load_task(keys: list[Any], objects: list[Any]) -> Any:
            for key in list(keys):
                label = self.armed.pop(key, None)
                if label is not None:
                    self.pause(label)
            return submit(keys, objects)

        adapter.submit_load_task = submit_load_task

    def key(self, index: int) -> Any:
        return W.object_key(self.plan.objects[index])

    def expected_bytes(self, index: int) -> list[bytes]:
        if index not in self.expected:
            obj = self.plan.objects[index]
            seeds = [obj.seed, *self.versions.get(index, [])]
            self.expected[index] = [
                W.expected_read_bytes(_with_seed(obj, seed), self.cast) for seed in seeds
            ]
        return self.expected[index]

    def submit(self, groups: list[list[int]], label: str) -> tuple[Any, Any]:
        """Submit one task of ``groups``; (its handle, the keys in the order its result
        reports them)."""
        api = W._api()
        if hasattr(api, "PrefetchTaskSpec"):
            rows = [
                api.GroupedObjectKeys(
                    keys=[self.key(i) for i in group],
                    object_group_id=self.plan.objects[group[0]].object_group_id,
                    layout_desc=W.layout(self.plan.objects[group[0]]),
                )
                for group in groups
            ]
            task = api.PrefetchTaskSpec(key_groups=rows)
            return self.manager.submit_prefetch_task(task, external_request_id=label), None
        flat, layouts, desc = self._flat(api, groups)
        task = api.PrefetchRequestSpec(keys=[self.key(i) for i in flat], group_layout_descs=layouts,
                                       attn_desc=desc)  # fmt: skip
        return self.manager.submit_prefetch_task(task, external_request_id=label), flat

    def _flat(self, api: Any, groups: list[list[int]]) -> tuple[list[int], dict[int, Any], Any]:
        """The flat chunk-major order of releases before 0.5.6 (chunk, object group,
        kv_rank), its layouts and attention windows."""
        objects = self.plan.objects
        ogs = sorted({objects[g[0]].object_group_id for g in groups})
        ranks = sorted({objects[g[0]].kv_rank for g in groups})
        row = {(objects[g[0]].object_group_id, objects[g[0]].kv_rank): g for g in groups}
        flat = [row[og, rank][j] for j in range(len(groups[0])) for og in ogs for rank in ranks]
        layouts = {og: W.layout(objects[row[og, ranks[0]][0]]) for og in ogs}
        desc = api.AttnWindowDesc(num_chunks_in_sw=[-1] * len(ogs), world_size=len(ranks))
        return flat, layouts, desc

    def finish(
        self,
        handle: Any,
        flat: list[int] | None,
        groups: list[list[int]],
        label: str,
        mark: int,
        *,
        drop: bool = True,
    ) -> list[list[str]] | None:
        """Wait for a submitted task (submitted once :attr:`announced` had ``mark`` keys),
        read its hits, compare, release, and (``drop``) drop its keys from L1; its line, and
        its cells (None when it gave none)."""
        keys = [self.key(i) for group in groups for i in group]
        try:
            start = time.monotonic()
            if not self.manager.wait_prefetch_status(handle, timeout=self.plan.timeout_s):
                self.line({"label": label, "timeout": True})
                return None
            result = self.manager.query_prefetch_status(handle)
            hit = self._hits(result, flat, groups)
            cells = self._read(result, groups, hit)
            wait_s = time.monotonic() - start
            row: dict[str, Any] = {"label": label, "cells": cells, "wait_s": wait_s}
            if handed := self._handed(groups, cells, mark):
                row["handed"] = handed
            self.line(row)
            return cells
        except Exception as exc:
            self.line({"label": label, "error": f"{type(exc).__name__}: {exc}"[:300]})
            return None
        finally:
            if drop:
                self.manager.delete_l1_keys(keys)

    def _handed(
        self, groups: list[list[int]], cells: list[list[str]], mark: int
    ) -> list[list[int]]:
        """The misses of a task whose keys L1 announced as written since ``mark``. LMCache
        announces a failed load's key before it reports the task done (0.5.3 and 0.5.4:
        ``finish_write`` on the failed keys, then ``delete``), so the line that follows the
        wait sees every such announcement."""
        announced = self.announced.since(mark)
        return [
            [k, j]
            for k, group in enumerate(groups)
            for j, index in enumerate(group)
            if cells[k][j] == "miss" and self.key(index) in announced
        ]

    def _hits(
        self, result: Any, flat: list[int] | None, groups: list[list[int]]
    ) -> list[list[bool]]:
        if result is None:
            return [[False] * len(g) for g in groups]
        if flat is None:
            return [
                [result.hit_cells[k].test(j) for j in range(len(g))] for k, g in enumerate(groups)
            ]
        at = {index: result.test(position) for position, index in enumerate(flat)}
        return [[at[i] for i in g] for g in groups]

    def _read(self, result: Any, groups: list[list[int]], hit: list[list[bool]]) -> list[list[str]]:
        cells = [["miss"] * len(g) for g in groups]
        indexes = [
            i for g, h in zip(groups, hit, strict=True) for i, yes in zip(g, h, strict=True) if yes
        ]
        if not indexes:
            return cells
        keys = [self.key(i) for i in indexes]
        owners = getattr(result, "l1_owners", None)
        kwargs = {} if owners is None else {"l1_owners": owners}
        got: dict[int, str] = {}
        with self.manager.read_prefetched_results(keys, **kwargs) as memory_objs:
            if memory_objs is not None:
                # Fewer objects than hits: the rest are hits L1 could not give back.
                for index, memory_obj in zip(indexes, memory_objs, strict=False):
                    data = W.tensor_bytes(memory_obj.tensor)
                    got[index] = "exact" if data in self.expected_bytes(index) else "wrong-bytes"
        self.manager.finish_read_prefetched(keys, **kwargs)
        for k, group in enumerate(groups):
            for j, index in enumerate(group):
                if hit[k][j]:
                    cells[k][j] = got.get(index, "unreadable")
        return cells

    def run(self, steps: list[dict[str, Any]]) -> None:
        for step in steps:
            op = step["op"]
            if op == "manager":
                try:
                    self.new_manager(step.get("extra"))
                except Exception as exc:  # a spec this release refuses: the case's line says so
                    if "label" not in step:
                        raise
                    self.manager = None
                    self.line(
                        {"label": step["label"], "error": f"{type(exc).__name__}: {exc}"[:300]}
                    )
            elif op == "pause":
                self.pause(str(step["label"]))
            elif op == "arm":
                self.armed[self.key(int(step["index"]))] = str(step["label"])
            elif op == "task":
                cells = self._task(step["groups"], str(step["label"]))
                again = step.get("again")
                if (
                    again
                    and cells is not None
                    and cells[again["cell"][0]][again["cell"][1]] != "miss"
                ):
                    for t in range(1, int(again["tries"])):
                        self.new_manager()
                        if again.get("warm"):
                            self._task(again["warm"], f"{step['label']}#{t}-warm")
                        self._task(step["groups"], f"{step['label']}#{t}")
            elif op == "together":
                self._together(step["tasks"], str(step["label"]))
            elif op == "fill":
                self._fill(str(step["label"]), [int(i) for i in step["objects"]],
                           str(step["read"]), int(step["rounds"]),
                           float(step["gap_s"]))  # fmt: skip
            elif op == "crash":
                self._crash(str(step["label"]), [int(i) for i in step["objects"]],
                            int(step["kill_after"]))  # fmt: skip
            else:
                raise ValueError(f"unknown step {op!r}")
            self.line({"step": op, "done": True})

    def _task(self, groups: list[list[int]], label: str) -> list[list[str]] | None:
        mark = self.announced.mark()
        try:
            handle, flat = self.submit(groups, label)
        except Exception as exc:
            self.line({"label": label, "error": f"{type(exc).__name__}: {exc}"[:300]})
            return None
        return self.finish(handle, flat, groups, label, mark)

    def _together(self, tasks: list[list[list[int]]], label: str) -> None:
        submitted = []
        mark = self.announced.mark()
        for k, groups in enumerate(tasks):
            try:
                submitted.append((k, groups, *self.submit(groups, f"{label}/{k}")))
            except Exception as exc:
                self.line({"label": f"{label}/{k}", "error": f"{type(exc).__name__}: {exc}"[:300]})
        # The keys stay in L1 until every task is read: a task over keys another one loads
        # may count on finding them there (as a second request with one prefix does).
        for k, groups, handle, flat in submitted:
            self.finish(handle, flat, groups, f"{label}/{k}", mark, drop=False)
        self.manager.delete_l1_keys([self.key(i) for t in tasks for g in t for i in g])

    def _fill(self, label: str, indexes: list[int], read: str, rounds: int, gap_s: float) -> None:
        if self.manager is None:  # its manager could not be built (its line says why)
            return
        stored = count_stores(self.manager)
        for n, index in enumerate(indexes):
            obj = self.plan.objects[index]
            key = W.object_key(obj)
            reserved = W.reserve_write(self.manager, [key], W.layout(obj))
            W.fill_reserved(obj, reserved.get(key))
            self.manager.finish_write([k for k in (key,) if k in reserved])
            wait_stores(stored, n + 1, self.pause_s / 2)
            if not self._drop_stored(key):
                raise RuntimeError(
                    f"{label}: object {n}'s L1 copy was still locked {self.pause_s / 2:.0f} s "
                    "after its store was reported done"
                )
            for m in range(n) if read == "before" else (n,):
                self._read_between_passes(indexes[m], f"{label}/{n}/{m}")
        for r in range(rounds):
            time.sleep(min(gap_s, self.pause_s))
            for m, other in enumerate(indexes):
                self._read_between_passes(other, f"{label}/r{r}/{m}")

    def _drop_stored(self, key: Any) -> bool:
        """Drop a stored object's L1 copy, so that its next read is a read of the store;
        whether it was dropped. The adapter reports the store done before LMCache's store
        controller releases its read lock on the copy (it pops the adapter's results, then
        finishes the read), and a delete skips a locked key: a copy dropped right after the
        report stays in L1 now and then, and the read serves it. So the delete is repeated
        while it skips the key, :attr:`pause_s` / 2 at most."""
        deadline = time.monotonic() + self.pause_s / 2
        while True:
            _deleted, skipped = self.manager.delete_l1_keys([key])
            if not skipped:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(PAUSE_POLL_S / 4)

    def _read_between_passes(self, index: int, label: str) -> None:
        """Object ``index`` read as a task of its own while LMCache's L2 eviction makes no
        pass (its controller's lock held): a pass between a read's lookup and its load is
        timing, and the ``evicted`` cases make it at a known point."""
        controller = getattr(self.manager, "_l2_eviction_controller", None)
        lock = getattr(controller, "_states_lock", None)
        with lock if lock is not None else contextlib.nullcontext():
            self._task([[index]], label)

    def _crash(self, label: str, indexes: list[int], kill_after: int) -> None:
        if self.managers:
            raise ValueError("a crash step comes before any StorageManager (it forks)")
        shm_name = f"lmcache_l1_pool_{os.getpid()}_{label}"
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the writer: never returns
            os.close(read_end)
            try:
                _write_burst(self.spec, shm_name, [self.plan.objects[i] for i in indexes],
                             write_end, self.pause_s / 3)  # fmt: skip
            finally:
                os._exit(0)
        os.close(write_end)
        stored = handed = submitted = 0
        # Half a pause at most: the caller counts a worker quiet for a pause as hung.
        deadline = time.monotonic() + self.pause_s / 2
        try:
            while (left := deadline - time.monotonic()) > 0:
                if stored >= kill_after and (submitted > stored or stored == len(indexes)):
                    break
                if not select.select([read_end], [], [], left)[0]:
                    break
                data = os.read(read_end, 64)
                if not data:  # it ended
                    break
                handed += data.count(b"h")
                submitted += data.count(b"s")
                stored += data.count(b"+")
        finally:
            killed = True
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                killed = False
            _pid, status = os.waitpid(pid, 0)
            killed = killed and os.WIFSIGNALED(status)
            os.close(read_end)
            with contextlib.suppress(OSError):
                os.unlink(f"/dev/shm/{shm_name}")
        self.line({"label": label, "stored": stored, "handed": handed, "submitted": submitted,
                   "killed": killed})  # fmt: skip

    def close(self) -> None:
        if self.manager is not None:
            self.closing.append(threading.Thread(target=self.manager.close, daemon=True))
            self.closing[-1].start()
        deadline = time.monotonic() + W.CLOSE_WAIT_S
        for thread in self.closing:
            thread.join(max(0.0, deadline - time.monotonic()))


def _write_burst(spec: str, shm_name: str, objects: list[Any], out: int, timeout_s: float) -> None:
    """The forked writer of a crash step: one object at a time handed to LMCache (``h`` on
    ``out``; ``s`` as LMCache submits its store to the adapter), then waited for until the
    adapter has reported one more store task done and successful (``+``), then the next."""
    manager = W.build_manager(spec, shm_name)
    done = count_stores(manager)
    _descriptor, adapter = manager.l2_adapters()[0]
    submit = adapter.submit_store_task

    def submit_store_task(keys: list[Any], objs: list[Any]) -> Any:
        os.write(out, b"s")
        return submit(keys, objs)

    adapter.submit_store_task = submit_store_task
    for n, obj in enumerate(objects):
        key = W.object_key(obj)
        reserved = W.reserve_write(manager, [key], W.layout(obj))
        W.fill_reserved(obj, reserved.get(key))
        manager.finish_write([k for k in (key,) if k in reserved])
        os.write(out, b"h")
        if not wait_stores(done, n + 1, timeout_s):
            return
        os.write(out, b"+")


def count_stores(manager: Any) -> list[int]:
    """A counter (one item) of the store tasks the manager's adapter reports done and
    successful from now on (its ``pop_completed_store_tasks`` wrapped)."""
    _descriptor, adapter = manager.l2_adapters()[0]
    pop = adapter.pop_completed_store_tasks
    done = [0]

    def pop_completed_store_tasks() -> Any:
        results = pop()
        done[0] += sum(_stored(r) for r in results.values())
        return results

    adapter.pop_completed_store_tasks = pop_completed_store_tasks
    return done


def wait_stores(done: list[int], count: int, timeout_s: float) -> bool:
    """Wait until ``done`` counts ``count`` stores (bounded); whether it does."""
    deadline = time.monotonic() + timeout_s
    while done[0] < count and time.monotonic() < deadline:
        time.sleep(PAUSE_POLL_S / 4)
    return done[0] >= count


def _stored(result: Any) -> bool:
    """An adapter's store result as a success: a bool, or an int that is the bytes moved
    (``L2StoreResult``; -1 when it failed)."""
    return bool(result) if isinstance(result, bool) else int(result) >= 0


def _threads() -> int:
    """The process's threads, native ones included (Linux; 0 where it cannot tell)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _with_seed(obj: Any, seed: int) -> Any:
    raw = {**obj.__dict__, "seed": seed}
    return W.PlanObject(**raw)


def main(argv: list[str]) -> int:
    """``PLAN.json OUT.jsonl``; 2 on a usage error."""
    if len(argv) != 2:
        print("usage: lmcache_serving_worker PLAN.json OUT.jsonl", file=sys.stderr)
        return 2
    plan_path, out_path = Path(argv[0]), Path(argv[1])
    raw = json.loads(plan_path.read_text(encoding="utf-8"))
    with out_path.open("a", encoding="utf-8") as out:
        script = Script(raw, out, plan_path.parent.absolute())
        try:
            script.run(raw["script"])
            script.line({"script": "done"})
        finally:
            script.close()
    os._exit(0)  # every line is written; a manager that would not close is left


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
