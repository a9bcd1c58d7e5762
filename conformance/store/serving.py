"""LMCache as it serves (SPEC.md "Serving from a store", rules STORE-SERVE-*): whole prefetch
tasks, one process that lives through many of them, tasks in flight together, a store that
changes under a process that has read it.

A serving plan is one store's objects and one script for :mod:`.lmcache_serving_worker`,
which runs it in one process. Its cases:

- **task** (STORE-SERVE-PREFIX): one task of two key groups (two kv_ranks of object group 0)
  x :data:`CHUNKS` chunks, each read by a StorageManager of its own, with one object damaged
  at the first, a middle or the last chunk of the second group: each fault of
  :data:`TASK_FAULTS`, done before the process starts, or (``evicted``) while it runs, after
  LMCache's lookup found the object and before its load.
- **after** (STORE-SERVE-AFTER): per fault, a StorageManager of its own reads an intact task,
  the task damaged at its middle chunk, then the intact task again.
- **later** (STORE-SERVE-LATER): in one StorageManager, objects read once, then changed in the
  store (cut, emptied, a bit turned, another key's object put in their place, removed), then
  read again; a load of theirs that fails must not be announced to LMCache's store path as
  written (the worker listens to L1 as the store controller does; LMCache announces before
  it reports the task done, so this is not timing).
- **mixed** (STORE-SERVE-MIXED): a task of two object groups of different layouts, intact.
- **together** (STORE-SERVE-TOGETHER): three tasks submitted before any is waited for, two of
  them over the same keys, intact.
- **race** (STORE-SERVE-RACE): :data:`RACE_READS` tasks read one object while the caller
  rewrites it without pause, in turn with its own bytes and another object's of the same
  layout, each put whole as LMCache's writers put it; every hit must be one of the two.

- **crash** (STORE-SERVE-CRASH): before anything else, a writer forked from the worker
  stores a burst of :data:`CRASH_BURST` new objects one at a time, and is SIGKILLed once
  LMCache has stored k of them and holds the next, for each k of :data:`CRASH_KILLS` (a
  burst each); the caller then lists what is left in the store and runs fsck on it (the
  writer known dead: every unfinished write is old enough); per burst, a fresh
  StorageManager reads each of its objects on its own.

- **readback** (STORE-SERVE-READBACK): a StorageManager stores :data:`READBACK_OBJECTS` new
  objects one at a time and reads each back as soon as its adapter reports it stored (its L1
  copy dropped first).
- **capacity** (STORE-SERVE-CAPACITY), last, where the adapter takes a capacity (its
  catalogue row): a StorageManager whose spec adds :data:`CAPACITY_SPEC` (room for
  :data:`CAPACITY_ROOM` objects, LRU eviction) stores :data:`CAPACITY_OBJECTS` new objects one
  at a time, reading every object stored before it after each (the object itself is the
  readback case's); then reads them all in
  :data:`CAPACITY_ROUNDS` rounds :data:`CAPACITY_GAP_S` apart while eviction runs; the caller
  then sizes what the store holds of them, again until it is within the rule's bound, at most
  :data:`CAPACITY_SETTLE_S`.

Every case but a whole task's key groups starts in a StorageManager that has read nothing
damaged, so that what one case leaves behind is never judged as another's outcome.

Each outcome but two is fixed by the script, not by timing: one worker, a fixed order, each
fault done at a known point (the worker pauses while the caller does it); eviction's passes,
once a second in a thread of LMCache's, are timing, so the capacity case judges the store
where eviction leaves it, not at a fixed time. Where a damaged
object was served as a hit, its task is read :data:`TASK_TRIES` times by its StorageManager
and judged by its worst read: the bytes it brought may land in another
object's buffer, or not, by the order in which LMCache's loads complete. The race is
timing by nature: it is judged by its worst read of :data:`RACE_READS`, each begun after the
writer's next rewrite, and fails when the writer did not rewrite the object at least once per
read (no race was run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...reference_impl.keys.kv_rank import compute_kv_rank
from .faults import BY_NAME, ENDED, EVERY, Fault, can_know
from .lmcache_writer import FULL_CHUNK, OTHER_GROUP_CHUNK, PlannedObject, sha256_chunk_hash

MODEL = "lmckv/serving"
#: Chunks per key group of a task, and where its damaged object sits.
CHUNKS = 3
POSITIONS = {"first": 0, "middle": 1, "last": CHUNKS - 1}
#: The kv_ranks of a task's two key groups (world 2: ranks 0 and 1).
RANKS = (compute_kv_rank(2, 0, 2, 0), compute_kv_rank(2, 1, 2, 1))
#: The object group of the mixed task's second key group, numbered as every release's
#: attention windows number them (0..G-1).
MIXED_GROUP = 1
#: Faults done to one object of a whole task. ``evicted``: removed after LMCache's lookup
#: found it, before its load (an eviction by another process, a TTL, a lifecycle rule).
EVICTED = Fault("evicted", "STORE-LOAD-MISSING", EVERY, "removed between lookup and load")
TASK_FAULTS: tuple[Fault, ...] = (
    *(BY_NAME[n] for n in ("truncated", "emptied", "grown", "flip-v", "deleted")),
    EVICTED,
)
TASK_FAULT = {f.name: f for f in TASK_FAULTS}
#: Faults done, while the process runs, to objects it has read once.
LATER_FAULTS: tuple[Fault, ...] = tuple(
    BY_NAME[n] for n in ("truncated", "emptied", "flip-v", "replaced", "deleted")
)
#: The damaged task of each fault that an ``after`` case reads before an intact task.
AFTER_FAULTS: tuple[Fault, ...] = tuple(
    BY_NAME[n] for n in ("truncated", "emptied", "grown", "flip-v", "deleted")
)
#: Reads of a whole task whose damaged object was a hit (its bytes went into L1): where bytes
#: past its buffer land depends on the order in which LMCache's loads of the task complete.
TASK_TRIES = 12
#: Reads of the raced object. Between two of them the worker pauses until the writer has
#: rewritten the object once more (a PUT to moto's S3 server takes tens of milliseconds on a
#: quiet machine, hundreds on a loaded one), so that every read races a rewrite however
#: slow the store is.
RACE_READS = 20
#: Objects of one crash burst, and the kill points: the writer is SIGKILLed once LMCache has
#: stored this many of them, one at a time, and the next is handed to it (while LMCache
#: stores the first, the third, the last; and once all are stored).
CRASH_BURST = 6
CRASH_KILLS = (0, 2, CRASH_BURST - 1, CRASH_BURST)
#: The capacity case: objects of :data:`FULL_CHUNK` (16 KiB without a serde) stored into an
#: adapter given room for :data:`CAPACITY_ROOM` of them, evicting half its keys (LRU) once a
#: pass (a second) finds it 80% full; the rounds of reads after the last store, and the
#: seconds before each (eviction gets their sum to bring the store under its capacity).
CAPACITY_OBJECTS = 20
CAPACITY_ROOM = 4
CAPACITY_BYTES = CAPACITY_ROOM * 2 * 4 * 16 * 64 * 2
CAPACITY_SPEC = {
    "max_capacity_gb": CAPACITY_BYTES / 2**30,
    "eviction": {"eviction_policy": "LRU", "trigger_watermark": 0.8, "eviction_ratio": 0.5},
}
CAPACITY_ROUNDS = 7
#: After the last round, the store is listed until it holds no more than the rule allows
#: (:func:`capacity_fits`), at most this many seconds (ten passes) and every
#: :data:`CAPACITY_POLL_S`: where the last pass falls is timing (a fill that runs faster
#: than a pass a second ends further over), how far eviction brings the store is not.
CAPACITY_SETTLE_S = 10.0
CAPACITY_POLL_S = 0.25
#: The readback case's objects: each is one read right after its store. 0.5.3 and 0.5.4 miss
#: some of these reads with fp8 and aesgcm (aesgcm on fs: one in thirty, the fewest seen): of
#: this many, always some.
READBACK_OBJECTS = 100
CAPACITY_GAP_S = 0.5


@dataclass
class ServingPlan:
    """One store's serving objects (plan order) and what each case reads."""

    objects: list[PlannedObject] = field(default_factory=list)
    #: case id -> key groups (lists of object indexes in chunk order).
    tasks: dict[str, list[list[int]]] = field(default_factory=dict)
    #: case id of a damaged task -> the damaged object's index.
    damaged: dict[str, int] = field(default_factory=dict)
    #: later fault -> (its object's index, the index whose bytes ``replaced`` puts there).
    later: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: The raced object's index and the index of the object whose bytes alternate with its own.
    race: tuple[int, int] = (0, 0)
    #: kill point -> the indexes of its burst's objects (written by the crash step alone).
    crash: dict[int, list[int]] = field(default_factory=dict)
    #: The capacity and readback cases' objects, in the order they are stored (by their fill
    #: steps alone).
    capacity: list[int] = field(default_factory=list)
    readback: list[int] = field(default_factory=list)

    def written(self) -> list[PlannedObject]:
        """The objects the store holds before the script starts: all but the bursts' and the
        capacity and readback cases'."""
        later = {i for indexes in self.crash.values() for i in indexes}
        later |= set(self.capacity) | set(self.readback)
        return [o for i, o in enumerate(self.objects) if i not in later]

    def add(self, rank: int, group: int, shape: tuple[int, ...]) -> int:
        index, seed = len(self.objects), 50_000 + len(self.objects)
        self.objects.append(
            PlannedObject(MODEL, rank, group, sha256_chunk_hash(seed), "", shape, seed=seed)
        )
        return index

    def add_task(
        self, case: str, rows: Sequence[tuple[int, int, tuple[int, ...]]]
    ) -> list[list[int]]:
        """A task of new objects: a key group of :data:`CHUNKS` per row (kv_rank, object
        group, shape)."""
        groups = [
            [self.add(rank, group, shape) for _ in range(CHUNKS)] for rank, group, shape in rows
        ]
        self.tasks[case] = groups
        return groups


def task_case(fault: str, position: str) -> str:
    return f"task-{fault}-{position}"


TWO_RANKS = [(RANKS[0], 0, FULL_CHUNK), (RANKS[1], 0, FULL_CHUNK)]


def serving_plan() -> ServingPlan:
    """Every case's objects: a task of its own per fault and position (no task shares an
    object with another: on 0.5.3 a failed load's buffer can be stored back to L2 under a key
    of its task, LMCache#5032, which must not reach another case), the intact tasks, the
    later objects, the mixed task."""
    plan = ServingPlan()
    for fault in TASK_FAULTS:
        for position, chunk in POSITIONS.items():
            groups = plan.add_task(task_case(fault.name, position), TWO_RANKS)
            plan.damaged[task_case(fault.name, position)] = groups[1][chunk]
    plan.add_task("intact", TWO_RANKS)
    plan.add_task("other", TWO_RANKS)
    plan.add_task("mixed", [(RANKS[0], 0, FULL_CHUNK), (RANKS[0], MIXED_GROUP, OTHER_GROUP_CHUNK)])
    source = plan.add(RANKS[0], 0, FULL_CHUNK)
    for fault in LATER_FAULTS:
        plan.later[fault.name] = (plan.add(RANKS[0], 0, FULL_CHUNK), source)
    plan.race = (plan.add(RANKS[0], 0, FULL_CHUNK), source)
    for kill in CRASH_KILLS:
        plan.crash[kill] = [plan.add(RANKS[0], 0, FULL_CHUNK) for _ in range(CRASH_BURST)]
    plan.capacity = [plan.add(RANKS[0], 0, FULL_CHUNK) for _ in range(CAPACITY_OBJECTS)]
    plan.readback = [plan.add(RANKS[0], 0, FULL_CHUNK) for _ in range(READBACK_OBJECTS)]
    return plan


def crash_case(kill: int) -> str:
    return f"crash-{kill}"


def script(plan: ServingPlan, *, capacity: bool = True) -> list[dict[str, Any]]:
    """The worker's steps, in their fixed order (module docstring); ``capacity``: whether
    the adapter takes a capacity (the capacity case runs)."""
    steps: list[dict[str, Any]] = [
        {"op": "crash", "label": crash_case(kill), "objects": indexes, "kill_after": kill}
        for kill, indexes in plan.crash.items()
    ]
    steps.append({"op": "pause", "label": "crashed"})
    for kill, indexes in plan.crash.items():
        steps.append({"op": "manager"})
        steps += [
            {"op": "task", "label": f"{crash_case(kill)}/{n}", "groups": [[i]]}
            for n, i in enumerate(indexes)
        ]
    for fault in TASK_FAULTS:
        for position in POSITIONS:
            case = task_case(fault.name, position)
            steps.append({"op": "manager"})
            if fault is EVICTED:
                steps.append({"op": "arm", "label": case, "index": plan.damaged[case]})
            step: dict[str, Any] = {"op": "task", "label": case, "groups": plan.tasks[case]}
            if fault is not EVICTED:
                step["again"] = {"cell": [1, POSITIONS[position]], "tries": TASK_TRIES}
            steps.append(step)
    for fault in AFTER_FAULTS:
        damaged = plan.tasks[task_case(fault.name, "middle")]
        case, intact = f"after-{fault.name}", plan.tasks["intact"]
        again = {"cell": [1, POSITIONS["middle"]], "tries": TASK_TRIES, "warm": intact}
        steps += [
            {"op": "manager"},
            {"op": "task", "label": f"{case}-start", "groups": intact},
            {"op": "task", "label": f"{case}-damaged", "groups": damaged, "again": again},
            {"op": "task", "label": case, "groups": intact},
        ]
    steps.append({"op": "manager"})
    for name, (index, _source) in plan.later.items():
        steps.append({"op": "task", "label": f"later-{name}-before", "groups": [[index]]})
    steps.append({"op": "pause", "label": "later"})
    for name, (index, _source) in plan.later.items():
        steps.append({"op": "task", "label": f"later-{name}", "groups": [[index]]})
    steps += [{"op": "manager"}, {"op": "task", "label": "mixed", "groups": plan.tasks["mixed"]}]
    together = [plan.tasks["intact"], plan.tasks["intact"], plan.tasks["other"]]
    steps += [{"op": "manager"}, {"op": "together", "label": "together", "tasks": together}]
    raced = [[plan.race[0]]]
    steps += [{"op": "manager"}, {"op": "pause", "label": "race"}]
    for k in range(RACE_READS):
        steps += [
            {"op": "task", "label": f"race/{k}", "groups": raced},
            {"op": "pause", "label": "race-gap"},
        ]
    steps.append({"op": "pause", "label": "race-end"})
    steps += [
        {"op": "manager"},
        {"op": "fill", "label": "readback", "objects": plan.readback, "read": "just",
         "rounds": 0, "gap_s": 0},
    ]  # fmt: skip
    if capacity:
        steps += [
            {"op": "manager", "extra": CAPACITY_SPEC, "label": "capacity"},
            {"op": "fill", "label": "capacity", "objects": plan.capacity, "read": "before",
             "rounds": CAPACITY_ROUNDS, "gap_s": CAPACITY_GAP_S},
            {"op": "pause", "label": "capacity"},
        ]  # fmt: skip
    return steps


@dataclass(frozen=True)
class TaskRead:
    """What one task gave: per key group, per chunk, exact, wrong-bytes or miss; or the
    whole task's ``error`` (LMCache raised), ``timeout`` (its wait gave up), ``hung`` or
    ``crashed`` (the worker outlived its bound, or died, before the task's line)."""

    cells: list[list[str]]
    ending: str = ""
    detail: str = ""
    #: The misses (key group, chunk) whose keys LMCache's L1 announced as written while the
    #: task ran: loads that failed, handed to its store path (differences item 57).
    handed: list[tuple[int, int]] = field(default_factory=list)

    def summary(self) -> str:
        """The observation as a matrix shows it: ``exact exact miss / exact miss miss``, or
        the task's ending."""
        if self.ending:
            return self.ending
        return " / ".join(" ".join(_SHORT[c] for c in row) for row in self.cells)


_SHORT = {"exact": "E", "wrong-bytes": "W", "miss": "-", "unreadable": "U"}


def task_read(row: dict[str, Any] | None) -> TaskRead:
    """A worker line as a :class:`TaskRead` (None: the task was never reached)."""
    if row is None:
        return TaskRead([], "hung", "never reached")
    if "cells" in row:
        handed = [(int(k), int(j)) for k, j in row.get("handed", [])]
        return TaskRead([[str(c) for c in r] for r in row["cells"]], handed=handed)
    if row.get("timeout"):
        return TaskRead([], "timeout")
    if "error" in row:
        return TaskRead([], "error", str(row["error"]))
    return TaskRead([], str(row.get("outcome", "crashed")), str(row.get("detail", "")))


def prefix_verdict(fault: Fault, serde: str, chunk: int, read: TaskRead) -> str | None:
    """Why a task with ``fault`` done to chunk ``chunk`` of its second key group breaks
    STORE-SERVE-PREFIX, or None: the task ends; every hit is the bytes written, except the
    damaged object's where the adapter cannot know the damage; no key group has a hit at or
    past ``chunk`` where it can know it, and each has every chunk before it, exact."""
    if read.ending:
        if read.ending in ("timeout", "hung", "crashed"):
            return (
                f"the task never ended ({read.ending}{': ' + read.detail if read.detail else ''})"
            )
        if chunk > 0:
            gone = f"the {chunk} intact chunks before the damaged one are lost"
            return f"the task failed ({read.ending}: {read.detail}): {gone}"
        return None
    for k, row in enumerate(read.cells):
        for j, cell in enumerate(row):
            damaged = k == 1 and j == chunk
            if cell == "wrong-bytes" and not (damaged and not can_know(fault, serde)):
                what = "the damaged object" if damaged else f"intact chunk {j} of key group {k}"
                return f"{what} served with other bytes"
            if cell == "unreadable":
                return f"chunk {j} of key group {k} was a hit that could not be read from L1"
    hits = [[c != "miss" for c in row] for row in read.cells]
    lost = [(k, j) for k, row in enumerate(hits) for j in range(chunk) if not row[j]]
    if lost:
        return f"intact chunks before the damaged one lost: {_cells(lost)}"
    beyond = [(k, j) for k, row in enumerate(hits) for j in range(chunk, len(row)) if row[j]]
    if beyond and can_know(fault, serde):
        return f"hits at or past the damaged chunk {chunk}: {_cells(beyond)}"
    if beyond and len(beyond) != sum(len(r) - chunk for r in hits):
        return f"hits past the damaged chunk that are not a prefix: {_cells(beyond)}"
    return None


def intact_verdict(read: TaskRead) -> str | None:
    """Why an intact task breaks its rule (STORE-SERVE-AFTER, -MIXED, -TOGETHER), or None:
    every chunk of every key group an exact hit."""
    if read.ending:
        return f"the task gave no hits ({read.ending}{': ' + read.detail if read.detail else ''})"
    bad = [(k, j, c) for k, row in enumerate(read.cells) for j, c in enumerate(row) if c != "exact"]
    if bad:
        return "intact chunks not served exact: " + ", ".join(
            f"group {k} chunk {j} {c}" for k, j, c in bad
        )
    return None


def together_verdict(parts: list[TaskRead]) -> str | None:
    """Why the tasks in flight together break STORE-SERVE-TOGETHER, or None: each ends; the
    task over keys of its own is served exact; of the two over the same keys, every hit is
    exact and every chunk a hit in at least one (the one that found the other loading it may
    miss it: SPEC.md says why)."""
    first, second, alone = parts
    for k, read in enumerate(parts):
        if read.ending:
            return (
                f"task {k} gave no hits ({read.ending}{': ' + read.detail if read.detail else ''})"
            )
    if (why := intact_verdict(alone)) is not None:
        return f"task 2: {why}"
    cells = zip(_flat(first.cells), _flat(second.cells), strict=True)
    for j, (a, b) in enumerate(cells):
        if {a, b} - {"exact", "miss"}:
            return f"a chunk of the shared keys served as {a} and {b}"
        if a == b == "miss":
            return f"chunk {j % CHUNKS} of key group {j // CHUNKS} missed by both tasks over it"
    return None


def _flat(cells: list[list[str]]) -> list[str]:
    return [c for row in cells for c in row]


def later_verdict(fault: Fault, serde: str, before: TaskRead, after: TaskRead) -> str | None:
    """Why an object changed in the store after the process read it breaks STORE-SERVE-LATER,
    or None: its first read is exact; its read after the change ends, and is the bytes written
    (a copy the process kept) or a miss, never other bytes where the adapter can know; and a
    load of it that failed is not handed to LMCache's store path (every later read could
    serve the buffer that load never filled, stored under the key: differences item 57)."""
    if before.summary() != "E":
        return f"its read before the change: {before.summary()}"
    if after.ending and after.ending not in ENDED:
        return f"its read after the change never ended ({after.ending})"
    if after.summary() == "W" and can_know(fault, serde):
        return "served with other bytes after the change"
    if after.handed:
        return (
            "its load after the change failed and LMCache's L1 announced the key as written: "
            "its store path may store the buffer that load never filled under the key"
        )
    return None


def later_seen(before: TaskRead, after: TaskRead) -> str:
    """A later case's observation: its two reads, and whether the second's failed load was
    handed to the store path."""
    handed = ", handed to the store path" if after.handed else ""
    return f"{before.summary()}, then {after.summary()}{handed}"


def race_verdict(reads: list[TaskRead], rewrites: int) -> tuple[str, str | None]:
    """What the race's reads gave (counts by outcome, and the writer's rewrites) and why
    they break STORE-SERVE-RACE, or None: every read ends, and every hit is one of the
    object's two versions (a miss costs a hit, not correctness). No race, no verdict: a
    writer that rewrote the object less than once per read is the suite's failure."""
    seen = [r.summary() for r in reads]
    counts = ", ".join(f"{seen.count(s)} {s}" for s in sorted(set(seen)))
    text = f"{counts} of {len(reads)} reads; {rewrites} rewrites"
    if rewrites < len(reads):
        return (
            text,
            f"the writer rewrote the object {rewrites} times in {len(reads)} reads: no race",
        )
    if unended := [r.summary() for r in reads if r.ending and r.ending not in ENDED]:
        return text, f"{len(unended)} reads never ended ({unended[0]})"
    if "W" in seen:
        return text, f"{seen.count('W')} torn reads: a hit with bytes of neither version"
    return text, None


def crash_verdict(
    kill: int,
    indexes: list[int],
    reads: list[TaskRead],
    writer: dict[str, Any] | None,
    left: CrashLeft | None,
) -> tuple[str, str | None]:
    """What a burst whose writer was killed once LMCache had stored ``kill`` of its objects
    left and served (the kinds seen: served, stored, named by fsck) and why it breaks
    STORE-SERVE-CRASH, or None: every object LMCache had stored is served exact; no read
    served other bytes or failed to end; every object's name holds its whole bytes or
    nothing; fsck, told the writer is dead, names every entry the burst left under no
    object's name and no whole object."""
    if writer is None or left is None:
        return "no crash", "the burst's writer never ran (the worker stopped before it)"
    stored = int(writer.get("stored", 0))
    if stored < kill or not (writer.get("killed") or stored == len(indexes)):
        why = f"{stored} stored of {kill}, killed: {writer.get('killed')}"
        return "no crash", f"the writer was not killed at its point ({why})"
    states = [left.objects.get(i, "absent") for i in indexes]
    named = sorted({left.fsck[n] for n in left.leftovers if n in left.fsck})
    seen = (
        f"served {' '.join(sorted({r.summary() for r in reads}))}; "
        f"stored {' '.join(sorted(set(states)))}"
        + (f" + unfinished writes ({', '.join(named) or 'not named by fsck'})"
           if left.leftovers else "")
    )  # fmt: skip
    for n, read in enumerate(reads):
        if read.ending and read.ending not in ENDED:
            return seen, f"the read of object {n} never ended ({read.ending})"
        if read.summary() == "W":
            return seen, f"object {n} served with other bytes after its writer was killed"
    if lost := [n for n in range(kill) if reads[n].summary() != "E"]:
        return seen, f"objects LMCache had stored before the kill not served: {lost}"
    if "partial" in states:
        n = states.index("partial")
        named_it = "fsck names it" if indexes[n] in left.fsck_objects else "fsck does not name it"
        return seen, f"object {n} holds a partial write under its name ({named_it})"
    if left.fsck_error:
        return seen, f"fsck could not check the store: {left.fsck_error}"
    if silent := sorted(set(left.leftovers) - set(left.fsck)):
        return seen, f"fsck did not name {len(silent)} unfinished writes"
    for n, (i, state) in enumerate(zip(indexes, states, strict=True)):
        rule = left.fsck_objects.get(i)
        if state == "whole" and rule is not None:
            return seen, f"fsck named whole object {n} a problem ({rule})"
    return seen, None


def worst_read(
    fault: Fault, serde: str, chunk: int, reads: dict[str, TaskRead], label: str
) -> tuple[TaskRead, str | None]:
    """The worst of a damaged task's tries (``label``, ``label#1``, ...) by
    STORE-SERVE-PREFIX, and why it breaks the rule: a read that breaks it, then the one with
    the most hits of other bytes; ties by their text, so that the same tries give the same."""
    tries = [reads[label], *(r for t in range(1, TASK_TRIES) if (r := reads.get(f"{label}#{t}")))]
    judged = [(r, prefix_verdict(fault, serde, chunk, r)) for r in tries]
    return max(judged, key=lambda j: (j[1] is not None, j[0].summary().count("W"), j[0].summary()))


def _cells(cells: list[tuple[int, int]]) -> str:
    return ", ".join(f"group {k} chunk {j}" for k, j in cells)


@dataclass(frozen=True)
class Case:
    """One judged case of a serving run: its id (the test's), its rule, and the task labels
    it reads."""

    id: str
    rule: str


def cases() -> list[Case]:
    """Every judged case, in script order."""
    out = [Case(task_case(f.name, p), "STORE-SERVE-PREFIX") for f in TASK_FAULTS for p in POSITIONS]
    out += [Case(f"after-{f.name}", "STORE-SERVE-AFTER") for f in AFTER_FAULTS]
    out += [Case(f"later-{f.name}", "STORE-SERVE-LATER") for f in LATER_FAULTS]
    out += [Case("mixed", "STORE-SERVE-MIXED"), Case("together", "STORE-SERVE-TOGETHER")]
    out.append(Case("race", "STORE-SERVE-RACE"))
    out += [Case(crash_case(kill), "STORE-SERVE-CRASH") for kill in CRASH_KILLS]
    out.append(Case("readback", "STORE-SERVE-READBACK"))
    out.append(Case("capacity", "STORE-SERVE-CAPACITY"))
    return out


@dataclass(frozen=True)
class CrashLeft:
    """What a crash burst left in the store, seen from outside LMCache, and what fsck said
    of it."""

    #: object index -> ``whole``, ``partial`` (its name holds other bytes) or ``absent``.
    objects: dict[int, str]
    #: Entries that appeared during the burst under no object's name (name -> size).
    leftovers: dict[str, int]
    #: leftover name -> the rule of the problem fsck named it with.
    fsck: dict[str, str]
    #: object index -> the rule of the problem fsck named the object with.
    fsck_objects: dict[int, str] = field(default_factory=dict)
    #: Why fsck could not check the store ("" when it did).
    fsck_error: str = ""


def readback_labels(indexes: list[int]) -> list[str]:
    """The readback case's task labels: after the n-th store, the object itself."""
    return [f"readback/{n}/{n}" for n in range(len(indexes))]


def readback_verdict(reads: dict[str, TaskRead], indexes: list[int]) -> tuple[str, str | None]:
    """What the readback case's reads gave (their kinds) and why they break
    STORE-SERVE-READBACK, or None: every object is an exact hit when read right after its
    store."""
    got = [reads[label] for label in readback_labels(indexes)]
    seen = " ".join(sorted({r.summary() for r in got}))
    if bad := [n for n, r in enumerate(got) if r.summary() != "E"]:
        kinds = sorted({got[n].summary() for n in bad})
        return seen, (
            f"{len(bad)} of {len(got)} objects not served exact right after their store "
            f"({', '.join(kinds)}; the first: object {bad[0]})"
        )
    return seen, None


def capacity_labels(indexes: list[int]) -> list[str]:
    """The capacity case's task labels: after the n-th store, each object stored before it;
    then each object in each round while eviction runs (the last: its end)."""
    steps = [f"capacity/{n}/{m}" for n in range(len(indexes)) for m in range(n)]
    rounds = range(CAPACITY_ROUNDS)
    return steps + [f"capacity/r{r}/{m}" for r in rounds for m in range(len(indexes))]


def capacity_fits(held: dict[int, int]) -> bool:
    """Whether the case's objects ``held`` (index -> bytes) are within STORE-SERVE-CAPACITY's
    bound: the capacity and one object more, as a pass (once a second) finds the store over
    its watermark only after the store that put it there."""
    return sum(held.values()) <= CAPACITY_BYTES + max(held.values(), default=0)


def capacity_verdict(
    reads: dict[str, TaskRead], held: dict[int, int] | None, indexes: list[int]
) -> tuple[str, str | None]:
    """What the capacity case served and left (the kinds of reads while filling and
    evicting, and at the end; whether the store holds at most its capacity of the case's
    objects) and why it breaks STORE-SERVE-CAPACITY, or None: every read ends, no hit is
    other bytes, the store holds at most :data:`CAPACITY_BYTES` of the objects and one object
    more once eviction has run, and every object it still holds was served exact by the
    last round (listed after it: eviction only removes, so it was there when it was read)."""
    labels = capacity_labels(indexes)
    if held is None:
        return "not run", "the case never reached its end (the worker stopped before)"
    last = f"capacity/r{CAPACITY_ROUNDS - 1}/"
    filling = [reads[label] for label in labels if not label.startswith(last)]
    end = [reads[label] for label in labels if label.startswith(last)]
    fits = capacity_fits(held)
    seen = (
        f"filling, evicting {' '.join(sorted({r.summary() for r in filling}))}; "
        f"end {' '.join(sorted({r.summary() for r in end}))}; "
        f"store {'within' if fits else 'over'} its capacity"
    )
    for label in labels:
        read = reads[label]
        if read.ending and read.ending not in ENDED:
            return seen, f"read {label} never ended ({read.ending})"
        if read.summary() == "W":
            return seen, f"read {label} served other bytes"
    if not fits:
        return seen, (
            f"the store holds {sum(held.values())} bytes of {len(held)} of the case's "
            f"objects {CAPACITY_SETTLE_S:.0f} s after the last round of reads, over its "
            f"capacity of {CAPACITY_BYTES} and one object"
        )
    lost = [m for m, i in enumerate(indexes) if i in held and end[m].summary() != "E"]
    if lost:
        return seen, f"objects the store still holds not served at the end: {lost}"
    return seen, None


@dataclass(frozen=True)
class Served:
    """A serving run: what each task gave, by label, and how often the race's writer
    rewrote its object while the race's reads ran; by kill point, each crash burst's writer
    line and what the burst left."""

    reads: dict[str, TaskRead]
    rewrites: int = 0
    writers: dict[int, dict[str, Any]] = field(default_factory=dict)
    left: dict[int, CrashLeft] = field(default_factory=dict)
    #: The capacity case's objects the store held at its end: index -> bytes (None: the
    #: case did not reach its end, or did not run).
    held: dict[int, int] | None = None


def judge(case: str, serde: str, served: Served) -> tuple[str, str | None]:
    """What ``case`` observed (as the matrix shows it) and why it breaks its rule (None:
    it keeps it), from a serving run."""
    reads = served.reads
    if case == "capacity":
        return capacity_verdict(reads, served.held, serving_plan().capacity)
    if case == "readback":
        return readback_verdict(reads, serving_plan().readback)
    if case.startswith("crash-"):
        kill = int(case.removeprefix("crash-"))
        burst = [reads[f"{case}/{n}"] for n in range(CRASH_BURST)]
        indexes = serving_plan().crash[kill]
        return crash_verdict(kill, indexes, burst, served.writers.get(kill), served.left.get(kill))
    if case == "race":
        return race_verdict([reads[f"race/{k}"] for k in range(RACE_READS)], served.rewrites)
    kind, _, rest = case.partition("-")
    if kind == "task":
        fault, _, position = rest.rpartition("-")
        read, why = worst_read(TASK_FAULT[fault], serde, POSITIONS[position], reads, case)
        return read.summary(), why
    if kind == "after":
        start, read = reads[f"{case}-start"], reads[case]
        middle = POSITIONS["middle"]
        damaged, why = worst_read(BY_NAME[rest], serde, middle, reads, f"{case}-damaged")
        if (start_why := intact_verdict(start)) is not None:
            return (
                f"{start.summary()} (before)",
                f"its intact task before the damaged one: {start_why}",
            )
        if why is not None:
            why = f"the damaged task, read by a StorageManager that had served: {why}"
            return f"{damaged.summary()} (the damaged task)", why
        return f"{damaged.summary()}, then {read.summary()}", intact_verdict(read)
    if kind == "later":
        before, after = reads[f"{case}-before"], reads[case]
        seen = later_seen(before, after)
        return seen, later_verdict(BY_NAME[rest], serde, before, after)
    if case == "together":
        parts = [reads[label] for label in sorted(reads) if label.startswith("together/")]
        return " | ".join(r.summary() for r in parts), together_verdict(parts)
    read = reads[case]
    return read.summary(), intact_verdict(read)
