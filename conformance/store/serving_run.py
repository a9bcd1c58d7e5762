"""Run a serving script (:mod:`.serving`) against one damaged store: the worker
(:mod:`.lmcache_serving_worker`) in a process group of its own, under a bound on the whole
script, and at each of its pauses the change to the store that the pause waits for, done with
the store's own client (:mod:`.views`), never through LMCache."""

from __future__ import annotations

import collections
import functools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lmckv.base import process_groups
from lmckv.base.untrusted_text import shown

from . import catalogue
from .faults import damage_object
from .fsck import Settings, check_store, close_sources
from .lmcache_worker import PlanObject, fill, tensor_bytes
from .lmcache_writer import (
    PROBE_SLACK_S,
    PROBE_STARTUP_S,
    WORKER_REAP_S,
    PlannedObject,
    expected_names,
    serde_cast,
)
from .serving import (
    CAPACITY_POLL_S,
    CAPACITY_SETTLE_S,
    EVICTED,
    RACE_READS,
    TASK_FAULTS,
    CrashLeft,
    Served,
    ServingPlan,
    capacity_fits,
    capacity_labels,
    crash_case,
    readback_labels,
    script,
    task_read,
)
from .sources import StoreUnreachable
from .spec import from_l2_adapter
from .views import StoreView

#: Seconds the worker waits at a pause; the bound on the whole script is the worker's start,
#: a read's wait and slack per task (:mod:`.lmcache_writer`'s, as for a probe), and a pause's
#: wait per pause.
PAUSE_S = 30.0
#: Seconds LMCache gets to finish a task before it counts as one that never ends: a task of
#: six 16 KiB objects finished within 0.25 s in every one of 1349 reads with three adapters'
#: stores served and read at once on 2 cores (lmcache 0.5.6; p99 0.18 s).
SERVE_WAIT_S = 2.0
#: Seconds the worker may go without a line (a step, a task, a pause) before it counts as
#: hung: a manager's start, a task's wait, a pause.
QUIET_S = 30.0
#: Seconds between looks at the worker's lines.
POLL_S = 0.02
WORKER_PATH = Path(__file__).with_name("lmcache_serving_worker.py")
#: The most seconds a race read waits for the writer's next rewrite.
RACE_GAP_MAX_S = 5.0
#: The race's writer stops by itself after this many seconds or rewrites.
RACE_MAX_S = 60.0
RACE_MAX_REWRITES = 100_000
#: Seconds a hung worker gets to write its threads' stacks to its log (SIGUSR1: the worker
#: registers :mod:`faulthandler` for it) before its process group is stopped.
STACKS_WAIT_S = 3.0
#: The most characters of those stacks a hung ending's detail keeps.
STACKS_MAX = 4000


def damage_before(view: StoreView, adapter: str, serde: str, plan: ServingPlan) -> None:
    """The task cases' faults done before the worker starts (all but ``evicted``, which
    the worker pauses for)."""
    names = expected_names(adapter, plan.objects)
    for fault in TASK_FAULTS:
        if fault is EVICTED:
            continue
        for case, index in plan.damaged.items():
            if case.startswith(f"task-{fault.name}-"):
                damage_object(view.source, fault.name, names[index], "", serde)


def serve(
    spec: str, view: StoreView, plan: ServingPlan, serde: str, *, python: str = sys.executable
) -> Served:
    """Run the plan's script on the store of ``spec``: what each task gave, by label, and
    the race writer's rewrites."""
    capacity = view.row.capacity
    steps = script(plan, capacity=capacity)
    names = expected_names(view.adapter, plan.objects)
    actions: dict[str, Callable[[], None]] = {
        case: functools.partial(view.delete, names[index])
        for case, index in plan.damaged.items()
        if case.startswith(f"task-{EVICTED.name}-")
    }

    def later() -> None:
        for fault, (index, source) in plan.later.items():
            damage_object(view.source, fault, names[index], names[source], serde)

    raced, other = (names[i] for i in plan.race)
    writer = RacingWriter(view, raced, [view.get(raced), view.get(other)])
    actions.update(later=later, race=writer.start, **{"race-end": writer.stop})
    actions["race-gap"] = writer.next_rewrite
    before, left = set(view.sizes()), {}

    def crashed() -> None:
        left.update(crash_left(spec, view, plan, serde, before))

    actions["crashed"] = crashed
    held: list[dict[int, int]] = []  # one item once the capacity case reached its end

    def filled() -> None:
        # Eviction gets its time: listed until within the rule's bound, for a bounded time.
        for _ in range(int(CAPACITY_SETTLE_S / CAPACITY_POLL_S) + 1):
            listed = view.sizes()
            now = {i: listed[names[i]] for i in plan.capacity if names[i] in listed}
            if capacity_fits(now):
                break
            time.sleep(CAPACITY_POLL_S)
        held.append(now)

    actions["capacity"] = filled
    # Every task the worker may read: a together step's each, a damaged task's tries.
    tasks = sum(
        len(s.get("tasks", [0])) + s.get("again", {}).get("tries", 1) - 1
        for s in steps
        if s["op"] in ("task", "together")
    )
    pauses = len(actions) + len(plan.crash) / 2  # a crash step waits half a pause at most
    budget = (
        PROBE_STARTUP_S
        + tasks * (SERVE_WAIT_S + PROBE_SLACK_S)
        + pauses * PAUSE_S
        + RACE_READS * RACE_GAP_MAX_S
    )
    versions = {plan.race[0]: [plan.objects[plan.race[1]].seed]}
    try:
        rows, ending = _run(spec, plan, steps, actions, budget, python, versions)
    finally:
        writer.stop()
    labels = [str(s["label"]) for s in steps if s["op"] == "task"]
    for s in steps:
        if s["op"] == "together":
            labels += [f"{s['label']}/{k}" for k in range(len(s["tasks"]))]
        if "again" in s:  # the tries the worker read again, where it did
            labels += [label for label in rows if label.startswith(f"{s['label']}#")]
    labels += readback_labels(plan.readback)
    if capacity:
        labels += capacity_labels(plan.capacity)
    reads = {label: task_read(rows.get(label, ending)) for label in labels}
    if capacity and "capacity" in rows:  # the capacity manager's error: every read says it
        reads.update(
            {label: task_read(rows["capacity"]) for label in capacity_labels(plan.capacity)}
        )
    writers = {k: row for k in plan.crash if (row := rows.get(crash_case(k))) is not None}
    return Served(reads, writer.rewrites, writers, left, held[0] if held else None)


def raw_bytes(obj: PlannedObject) -> bytes:
    """What a store without a serde holds for ``obj``: its layout's bytes, filled from its
    seed as LMCache's writer fills them (:func:`.lmcache_worker.fill`)."""
    return tensor_bytes(fill(PlanObject.from_json(obj.to_json())))


def crash_left(
    spec: str, view: StoreView, plan: ServingPlan, serde: str, before: set[str]
) -> dict[int, CrashLeft]:
    """Per burst, what its crash left: each object's state under its name (whole: its bytes
    where the store has no serde, else the size of an intact object of its layout in the
    same store), the entries that appeared under no object's name that carry one of its
    objects' chunk hash (a temporary file of its write: the store is read at the same time
    by other processes, whose entries are not the burst's), and what fsck (the writers known
    dead: ``temp_age_s`` 0) said of both."""
    names = expected_names(view.adapter, plan.objects)
    listed = view.sizes()
    named = set(names)
    new = [n for n in listed if n not in before and n not in named]
    whole_size = listed.get(names[plan.tasks["intact"][0][0]])
    store = from_l2_adapter(spec)
    by_name: dict[str, str] = {}
    error = ""
    try:
        report = check_store(store, Settings(temp_age_s=0.0))
        try:
            by_name = {p["name"]: p["rule"] for p in report.problems()}
        finally:
            report.close()
    except (StoreUnreachable, OSError, ValueError) as exc:
        error = shown(f"{type(exc).__name__}: {exc}")
    finally:
        close_sources(store)
    left: dict[int, CrashLeft] = {}
    for kill, indexes in plan.crash.items():
        hashes = [plan.objects[i].chunk_hash.hex() for i in indexes]
        leftovers = {n: listed[n] for n in new if any(h in n for h in hashes)}
        objects = {i: _state(view, serde, names[i], plan.objects[i], listed, whole_size)
                   for i in indexes}  # fmt: skip
        left[kill] = CrashLeft(
            objects,
            leftovers,
            {n: by_name[n] for n in leftovers if n in by_name},
            {i: by_name[names[i]] for i in indexes if names[i] in by_name},
            error,
        )
    return left


def _state(
    view: StoreView,
    serde: str,
    name: str,
    obj: PlannedObject,
    listed: dict[str, int],
    whole_size: int | None,
) -> str:
    """What ``name`` holds of ``obj``: whole, partial or absent."""
    if name not in listed:
        return "absent"
    if serde == catalogue.NONE.name:
        return "whole" if view.get(name) == raw_bytes(obj) else "partial"
    return "whole" if listed[name] == whole_size else "partial"


class RacingWriter:
    """Rewrites one object of a store, in turn with each of ``versions``, each put whole,
    from :meth:`start` until :meth:`stop` (bounded: :data:`RACE_MAX_S`,
    :data:`RACE_MAX_REWRITES`)."""

    def __init__(self, view: StoreView, name: str, versions: list[bytes]) -> None:
        self.view, self.name, self.versions = view, name, versions
        self.rewrites = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._rewrite, daemon=True)
        self._thread.start()

    def next_rewrite(self) -> None:
        """Wait until the object has been rewritten once more than now (at most
        :data:`RACE_GAP_MAX_S`)."""
        seen, deadline = self.rewrites, time.monotonic() + RACE_GAP_MAX_S
        while self.rewrites <= seen and time.monotonic() < deadline:
            time.sleep(POLL_S / 4)

    def _rewrite(self) -> None:
        deadline = time.monotonic() + RACE_MAX_S
        for k in range(RACE_MAX_REWRITES):
            if self._stop.is_set() or time.monotonic() > deadline:
                break
            self.view.put(self.name, self.versions[k % len(self.versions)])
            self.rewrites = k + 1
        # Left as it was written: the object's own bytes.
        self.view.put(self.name, self.versions[0])

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(RACE_MAX_S)


def _run(
    spec: str,
    plan: ServingPlan,
    steps: list[dict[str, Any]],
    actions: dict[str, Callable[[], None]],
    budget: float,
    python: str,
    versions: dict[int, list[int]],
) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """The worker's task lines by label, and how it ended if it stopped before its script
    was done (None when it finished it)."""
    with tempfile.TemporaryDirectory(prefix="lmckv-serve-") as tmp:
        work = Path(tmp)
        doc = {
            "specs": [spec], "objects": [o.to_json() for o in plan.objects],
            "timeout_s": SERVE_WAIT_S, "casts": [serde_cast(spec)], "script": steps,
            "pause_s": PAUSE_S, "versions": {str(i): v for i, v in versions.items()},
        }  # fmt: skip
        (work / "plan.json").write_text(json.dumps(doc), encoding="utf-8")
        argv = [python, "-P", str(WORKER_PATH), "plan.json", "out.jsonl"]
        env = {**os.environ, "LMCACHE_LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1"}
        rows: dict[str, dict[str, Any]] = {}
        with (work / "worker.log").open("wb") as log:
            proc = subprocess.Popen(
                argv, cwd=work, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=env, start_new_session=True,
            )  # fmt: skip
        process_groups.register(proc.pid)
        done, seen, why = False, 0, f"no answer within {budget:.0f} s"
        try:
            deadline = time.monotonic() + budget
            quiet_until = time.monotonic() + PROBE_STARTUP_S
            for _ in range(int(budget / POLL_S) + 1):
                lines = _lines(work / "out.jsonl")
                if len(lines) > seen:
                    quiet_until = time.monotonic() + QUIET_S
                for row in lines[seen:]:
                    if "pause" in row:
                        label = str(row["pause"])
                        actions.get(label, lambda: None)()
                        (work / f"go-{label}").touch()
                    elif "label" in row:
                        rows[str(row["label"])] = row
                    elif row.get("script") == "done":
                        done = True
                seen = len(lines)
                if done or proc.poll() is not None or time.monotonic() > deadline:
                    break
                if time.monotonic() > quiet_until:
                    why = f"no line for {QUIET_S:.0f} s after {seen} lines"
                    break
                time.sleep(POLL_S)
            for row in _lines(work / "out.jsonl")[seen:]:
                if "label" in row:
                    rows[str(row["label"])] = row
                done = done or row.get("script") == "done"
            if not done and proc.poll() is None:
                last = _lines(work / "out.jsonl")[-1:]
                why += f"; last line {json.dumps(last[0]) if last else 'none'}; "
                why += stacks(proc, work / "worker.log")
        finally:
            process_groups.release(proc.pid)
            proc.wait(timeout=WORKER_REAP_S)
        if done:
            return rows, None
        log_text = (work / "worker.log").read_text(encoding="utf-8", errors="replace")
        # -9: stopped here; -SIGUSR1: asked for its stacks before it could answer (stacks).
        if proc.returncode not in (None, 0, -9, -signal.SIGUSR1):
            return rows, {
                "outcome": "crashed",
                "detail": f"exit {proc.returncode}: {log_text[-500:]}",
            }
        return rows, {"outcome": "hung", "detail": why}


def stacks(proc: subprocess.Popen[bytes], log: Path) -> str:
    """A hung worker's Python stacks, as its :mod:`faulthandler` writes them to its log on
    SIGUSR1 (waited for at most :data:`STACKS_WAIT_S`), each distinct stack once with its
    count of threads, the thread that took the signal (the main one) first, bounded."""
    start = log.stat().st_size if log.is_file() else 0
    try:
        os.kill(proc.pid, signal.SIGUSR1)
    except ProcessLookupError:
        return "no stacks: the worker had ended"
    size, text = -1, ""
    for _ in range(int(STACKS_WAIT_S / 0.2) + 1):
        time.sleep(0.2)
        if proc.poll() == -signal.SIGUSR1:
            return "no stacks: the worker had not yet registered for them"
        with log.open("rb") as f:
            f.seek(start)
            data = f.read()
        if "(most recent call first)" in (text := data.decode("utf-8", "replace")):
            if len(data) == size:
                break
            size = len(data)
    return distinct_stacks(text) or f"no stacks within {STACKS_WAIT_S:.0f} s"


def distinct_stacks(text: str) -> str:
    """:mod:`faulthandler`'s dump of every thread (``Thread 0x…`` or ``Current thread
    0x…`` blocks) as each distinct stack once, with how many threads have it, the current
    thread's first; at most :data:`STACKS_MAX` characters."""
    blocks: list[tuple[bool, str]] = []
    for part in re.split(r"(?m)^(?=(?:Current thread|Thread) 0x[0-9a-f]+ )", text):
        head, _, body = part.partition("\n")
        if "(most recent call first)" in head:
            blocks.append((head.startswith("Current"), body.strip()))
    counts = collections.Counter(body for _current, body in blocks)
    current = [body for is_current, body in blocks if is_current]
    order = current + [body for body in counts if body not in current]
    out = "\n".join(f"[{counts[body]} thread(s)]\n{body}" for body in order)
    return out[:STACKS_MAX]


def _lines(path: Path) -> list[dict[str, Any]]:
    """The worker's complete lines so far."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]
