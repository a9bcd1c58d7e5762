"""The serving cases' plan, script and verdicts (conformance/store/serving.py; SPEC.md
"Serving from a store"): each rule judged on constructed task reads, so that a verdict that
would let a broken release pass, or fail a good one, fails here without a store."""

from __future__ import annotations

import pytest

from lmckv.conformance.core.rules import RULES
from lmckv.conformance.store import lmcache_serving_worker as worker
from lmckv.conformance.store.faults import BY_NAME
from lmckv.conformance.store.serving import (
    CAPACITY_BYTES,
    CAPACITY_OBJECTS,
    CAPACITY_ROUNDS,
    CHUNKS,
    CRASH_BURST,
    CRASH_KILLS,
    EVICTED,
    LATER_FAULTS,
    POSITIONS,
    RACE_READS,
    READBACK_OBJECTS,
    TASK_FAULT,
    CrashLeft,
    Served,
    TaskRead,
    capacity_labels,
    cases,
    crash_case,
    judge,
    prefix_verdict,
    script,
    serving_plan,
    task_case,
    task_read,
)

E, W, M = "exact", "wrong-bytes", "miss"


def rows(*groups: str) -> TaskRead:
    """``rows("E E -", "E - -")``: a task read from its matrix text."""
    short = {"E": E, "W": W, "-": M, "U": "unreadable"}
    return TaskRead([[short[c] for c in g.split()] for g in groups])


def test_the_plan_damages_one_object_of_the_second_group_at_each_position() -> None:
    plan = serving_plan()
    for fault in TASK_FAULT:
        for position, chunk in POSITIONS.items():
            case = task_case(fault, position)
            groups = plan.tasks[case]
            assert [len(g) for g in groups] == [CHUNKS, CHUNKS]
            assert plan.damaged[case] == groups[1][chunk]
    everything = [i for groups in plan.tasks.values() for g in groups for i in g]
    damaged = set(plan.damaged.values())
    # No damaged object is read by another task, and every object is written once.
    for case, groups in plan.tasks.items():
        if not case.startswith("task-"):
            assert not damaged & {i for g in groups for i in g}, case
    assert len({o.chunk_hash for o in plan.objects}) == len(plan.objects)
    assert max(everything) < len(plan.objects)


def test_the_script_reads_every_judged_case_and_pauses_once_per_eviction() -> None:
    plan = serving_plan()
    steps = script(plan)
    labels = {str(s["label"]) for s in steps if s["op"] == "task"}
    for case in cases():
        assert case.rule in RULES
        if case.id == "together":
            assert any(s["op"] == "together" for s in steps)
        elif case.id == "race":
            assert {f"race/{k}" for k in range(RACE_READS)} <= labels
        elif case.rule == "STORE-SERVE-CRASH":
            assert {f"{case.id}/{n}" for n in range(CRASH_BURST)} <= labels
        elif case.id in ("capacity", "readback"):
            (fill,) = [s for s in steps if s["op"] == "fill" and s["label"] == case.id]
            assert fill["objects"] == getattr(plan, case.id)
            assert fill["read"] == ("before" if case.id == "capacity" else "just")
        else:
            assert case.id in labels
        if case.id.startswith("later-"):
            assert f"{case.id}-before" in labels
    armed = [s for s in steps if s["op"] == "arm"]
    assert len(armed) == len(POSITIONS)
    assert all(s["label"].startswith(f"task-{EVICTED.name}-") for s in armed)
    pauses = [s["label"] for s in steps if s["op"] == "pause"]
    gaps = ["race-gap"] * RACE_READS
    assert pauses == ["crashed", "later", "race", *gaps, "race-end", "capacity"]
    # Every race read but none other is followed by a pause for the writer's next rewrite.
    for k, step in enumerate(steps):
        if step["op"] == "task" and step["label"].startswith("race/"):
            assert steps[k + 1] == {"op": "pause", "label": "race-gap"}
    # Each case starts in a StorageManager that has read nothing damaged: each whole task in
    # its own; no other case shares one with a case read before it.
    first_read: dict[str, str] = {}
    manager = 0
    for s in steps:
        manager += s["op"] == "manager"
        if s["op"] in ("task", "together"):
            case = (
                s["label"]
                .split("/")[0]
                .removesuffix("-start")
                .removesuffix("-damaged")
                .removesuffix("-before")
            )
            first_read.setdefault(case, f"manager {manager}")
    owners = list(first_read.values())
    shared = {m for m in owners if owners.count(m) > 1}
    assert {c for c, m in first_read.items() if m in shared} == {
        f"later-{f.name}" for f in LATER_FAULTS
    }


@pytest.mark.parametrize(
    ("fault", "serde", "chunk", "read", "broken"),
    [
        # The rule kept: every group has the chunks before c, nothing at or past c.
        ("truncated", "none", 1, rows("E - -", "E - -"), False),
        ("truncated", "none", 0, rows("- - -", "- - -"), False),
        ("deleted", "aesgcm", 2, rows("E E -", "E E -"), False),
        # A change the serde cannot see: every chunk, the damaged one with its changed bytes.
        ("flip-v", "none", 1, rows("E E E", "E W E"), False),
        ("flip-v", "none", 1, rows("E - -", "E - -"), False),
        # Broken: an intact chunk with other bytes (the S3 overrun into its neighbour).
        ("grown", "none", 1, rows("E E E", "E E W"), True),
        # Broken: a chunk before the damage lost (the whole task lost to one tag failure).
        ("flip-v", "aesgcm", 1, rows("- - -", "- - -"), True),
        # Broken: a hit past the damage where the adapter can know it.
        ("truncated", "fp8", 1, rows("E E E", "E - E"), True),
        ("grown", "none", 0, rows("E E E", "E E E"), True),
        # Broken: a changed object served, where a tag would have told.
        ("flip-v", "aesgcm", 2, rows("E E E", "E E W"), True),
        # Broken: hits past the damage that are not a prefix (a hole).
        ("flip-v", "none", 0, rows("E - E", "W E E"), True),
        # Broken: a hit L1 could not give back.
        ("deleted", "none", 2, rows("E U -", "E E -"), True),
    ],
)
def test_prefix_semantics(fault: str, serde: str, chunk: int, read: TaskRead, broken: bool) -> None:
    why = prefix_verdict(TASK_FAULT[fault], serde, chunk, read)
    assert (why is not None) == broken, why


@pytest.mark.parametrize(
    ("ending", "chunk", "broken"),
    [
        ("timeout", 0, True),
        ("hung", 2, True),
        ("crashed", 0, True),
        ("error", 0, False),
        ("error", 1, True),
    ],
)
def test_a_task_that_does_not_end_or_fails_whole(ending: str, chunk: int, broken: bool) -> None:
    why = prefix_verdict(EVICTED, "none", chunk, TaskRead([], ending, "x"))
    assert (why is not None) == broken, why


def test_judge_reads_each_kind_of_case() -> None:
    intact = rows("E E E", "E E E")
    reads = {
        "task-deleted-middle": rows("E - -", "E - -"),
        "after-truncated-start": intact,
        "after-truncated-damaged": rows("E - -", "E - -"),
        "after-truncated": rows("- - -", "- - -"),
        "after-grown-start": rows("- - -", "- - -"),
        "after-grown-damaged": intact,
        "after-grown": intact,
        "later-truncated-before": rows("E"),
        "later-truncated": rows("W"),
        "later-flip-v-before": rows("E"),
        "later-flip-v": rows("W"),
        "mixed": intact,
        "together/0": intact,
        "together/1": intact,
        "together/2": TaskRead([], "timeout"),
    }
    served = Served(reads)
    assert judge("task-deleted-middle", "none", served) == ("E - - / E - -", None)
    seen, why = judge("after-truncated", "none", served)
    assert seen == "E - - / E - -, then - - - / - - -" and why is not None
    # An after case whose manager could not serve before the damage judges nothing of it.
    why = judge("after-grown", "none", served)[1]
    assert why is not None and why.startswith("its intact task before the damaged one")
    seen, why = judge("later-truncated", "none", served)
    assert seen == "E, then W" and why is not None  # a cut object's size tells
    assert judge("later-flip-v", "fp8", served) == ("E, then W", None)  # no checksum: cannot tell
    assert judge("later-flip-v", "aesgcm", served)[1] is not None
    assert judge("mixed", "none", served) == ("E E E / E E E", None)
    seen, why = judge("together", "none", served)
    assert seen == "E E E / E E E | E E E / E E E | timeout"
    assert why is not None and why.startswith("task 2")
    assert BY_NAME["replaced"].rule == "STORE-LOAD-KEY"


def test_a_failed_load_handed_to_the_store_path_breaks_later_whatever_it_served() -> None:
    """STORE-SERVE-LATER: a read after the change that missed keeps the rule, unless its key
    was announced to LMCache's store path as written (differences item 57), on every serde;
    the worker's line carries the hand-over."""
    before = rows("E")
    plain = task_read({"label": "later-deleted", "cells": [[M]]})
    handed = task_read({"label": "later-deleted", "cells": [[M]], "handed": [[0, 0]]})
    assert (plain.handed, handed.handed) == ([], [(0, 0)])
    for serde in ("none", "fp8", "aesgcm"):
        kept = Served({"later-deleted-before": before, "later-deleted": plain})
        assert judge("later-deleted", serde, kept) == ("E, then -", None)
        broken = Served({"later-deleted-before": before, "later-deleted": handed})
        seen, why = judge("later-deleted", serde, broken)
        assert seen == "E, then -, handed to the store path"
        assert why is not None and "announced the key as written" in why


def test_the_worker_hears_what_l1_announces_as_written_and_nothing_else() -> None:
    """The worker's L1 listener records the keys of ``on_l1_keys_write_finished`` in order
    (what LMCache's store controller stores) and takes every other event without effect."""
    heard = worker.Announced()
    heard.on_l1_keys_reserved_write(["a"])
    heard.on_l1_keys_write_finished(["a", "b"])
    mark = heard.mark()
    heard.on_l1_keys_finish_write_and_reserve_read(["c"])
    heard.on_l1_keys_write_finished(["c"])
    assert (mark, heard.since(0), heard.since(mark)) == (2, {"a", "b", "c"}, {"c"})
    with pytest.raises(AttributeError):
        heard.close  # noqa: B018 (not an event: a listener has no other attributes)


class LockedCopy:
    """A StorageManager whose L1 copy of a stored object stays locked for ``locked`` deletes
    (LMCache's store controller releases it a little after the adapter's report)."""

    def __init__(self, locked: int) -> None:
        self.locked, self.deletes = locked, 0

    def delete_l1_keys(self, keys: list[str]) -> tuple[int, int]:
        self.deletes += 1
        return (0, len(keys)) if self.deletes <= self.locked else (len(keys), 0)


def test_a_stored_objects_copy_is_deleted_until_the_delete_no_longer_skips_it() -> None:
    """STORE-SERVE-READBACK reads the store only once the L1 copy is gone (differences item
    55): the worker repeats a delete that skipped the key, and says when its bound ran out."""
    script = object.__new__(worker.Script)
    script.pause_s = 0.2
    script.manager = LockedCopy(locked=3)
    assert script._drop_stored("key") is True
    assert script.manager.deletes == 4
    script.manager = LockedCopy(locked=10**9)
    assert script._drop_stored("key") is False


def race(*summaries: str, rewrites: int) -> Served:
    reads = [rows(s) if s != "timeout" else TaskRead([], "timeout") for s in summaries]
    return Served({f"race/{k}": r for k, r in enumerate(reads)}, rewrites)


def test_the_race_is_judged_by_its_worst_read_and_only_when_it_raced() -> None:
    n = RACE_READS
    assert judge("race", "none", race(*["E"] * n, rewrites=5 * n)) == (
        f"{n} E of {n} reads; {5 * n} rewrites",
        None,
    )
    seen, why = judge("race", "none", race(*["E"] * (n - 2), "-", "-", rewrites=n))
    assert why is None and seen.startswith(f"2 -, {n - 2} E")  # a miss costs a hit only
    why = judge("race", "none", race(*["E"] * (n - 1), "W", rewrites=n))[1]
    assert why is not None and "torn" in why
    why = judge("race", "none", race(*["E"] * (n - 1), "timeout", rewrites=n))[1]
    assert why is not None and "never ended" in why
    why = judge("race", "none", race(*["E"] * n, rewrites=n - 1))[1]
    assert why is not None and "no race" in why


def test_tasks_together_may_miss_what_the_other_is_loading_but_never_lose_it() -> None:
    intact = rows("E E E", "E E E")

    def together(*parts: TaskRead) -> str | None:
        return judge("together", "none", Served({f"together/{k}": p for k, p in enumerate(parts)}))[
            1
        ]

    assert together(intact, intact, intact) is None
    # The second task met the first loading the shared keys: a miss, not a loss.
    assert together(intact, rows("- - -", "- - -"), intact) is None
    assert together(rows("- - -", "- - -"), intact, intact) is None
    # Lost: a chunk neither task got; a hit with other bytes; the task of its own keys short.
    assert together(rows("E - E", "E E E"), rows("E - -", "- - -"), intact) is not None
    assert together(intact, rows("E W E", "E E E"), intact) is not None
    assert together(intact, intact, rows("E E -", "E E E")) is not None


def test_an_after_case_judges_the_damaged_task_read_by_a_manager_that_had_served() -> None:
    intact = rows("E E E", "E E E")
    reads = {
        "after-truncated-start": intact,
        "after-truncated-damaged": rows("E E W", "E W E"),  # seen on 0.5.3's resp
        "after-truncated": intact,
    }
    seen, why = judge("after-truncated", "none", Served(reads))
    assert why is not None and why.startswith("the damaged task")
    assert seen == "E E W / E W E (the damaged task)"  # what came after it is not judged
    reads["after-truncated-damaged"] = rows("E - -", "E - -")
    assert judge("after-truncated", "none", Served(reads))[1] is None


def test_crash_bursts_come_first_and_are_read_by_a_fresh_manager_after_the_pause() -> None:
    plan = serving_plan()
    steps = script(plan)
    crashes = [s for s in steps if s["op"] == "crash"]
    # The worker forks the writers before it builds any StorageManager.
    assert steps[: len(crashes)] == crashes
    assert [s["kill_after"] for s in crashes] == list(CRASH_KILLS)
    assert steps[len(crashes) : len(crashes) + 2] == [
        {"op": "pause", "label": "crashed"},
        {"op": "manager"},
    ]
    # Each burst is read by a StorageManager of its own (the first_read check above).
    burst = {i for s in crashes for i in s["objects"]}
    assert len(burst) == CRASH_BURST * len(CRASH_KILLS)
    # The bursts' objects are new: the store holds none of them before the script starts.
    written = {o.chunk_hash for o in plan.written()}
    assert not written & {plan.objects[i].chunk_hash for i in burst}
    later = len(burst) + len(plan.capacity) + len(plan.readback)
    assert len(written) == len(plan.objects) - later


def crashed(
    kill: int,
    served: str,
    states: str,
    *,
    leftovers: dict[str, str | None] | None = None,
    fsck_objects: dict[int, str] | None = None,
    writer: dict[str, object] | None = None,
) -> tuple[str, str | None]:
    """Judge ``crash-<kill>`` from its reads (``"E E - - - -"``) and what each object's name
    holds (``"whole whole absent ..."``); ``leftovers``: name -> the rule fsck gave it (None:
    fsck did not name it)."""
    indexes = serving_plan().crash[kill]
    reads = {f"{crash_case(kill)}/{n}": rows(c) for n, c in enumerate(served.split())}
    left = CrashLeft(
        dict(zip(indexes, states.split(), strict=True)),
        {name: 100 for name in leftovers or {}},
        {name: rule for name, rule in (leftovers or {}).items() if rule is not None},
        {indexes[n]: rule for n, rule in (fsck_objects or {}).items()},
    )
    line = writer or {"stored": kill, "handed": kill + 1, "submitted": kill + 1, "killed": True}
    return judge(crash_case(kill), "none", Served(reads, 0, {kill: line}, {kill: left}))


def test_a_crash_never_serves_other_bytes_nor_loses_what_was_stored() -> None:
    assert crashed(2, "E E - - - -", "whole whole absent absent absent absent") == (
        "served - E; stored absent whole",
        None,
    )
    # The object in flight when the writer died may be there whole, and served.
    assert crashed(2, "E E E - - -", "whole whole whole absent absent absent")[1] is None
    why = crashed(2, "E E W - - -", "whole whole whole absent absent absent")[1]
    assert why is not None and "other bytes" in why
    why = crashed(2, "E - - - - -", "whole whole absent absent absent absent")[1]
    assert why is not None and "not served: [1]" in why
    why = crashed(2, "E E - - - -", "whole whole partial absent absent absent")[1]
    assert why is not None and "partial write" in why and "does not name" in why


def test_fsck_must_name_every_unfinished_write_and_no_whole_object() -> None:
    states = "whole whole absent absent absent absent"
    seen, why = crashed(2, "E E - - - -", states, leftovers={"a.tmp": "STORE-TEMP"})
    assert why is None and seen.endswith("+ unfinished writes (STORE-TEMP)")
    why = crashed(2, "E E - - - -", states, leftovers={"a.tmp": "STORE-TEMP", "b.tmp": None})[1]
    assert why is not None and "did not name 1 unfinished" in why
    why = crashed(2, "E E - - - -", states, fsck_objects={0: "STORE-SIZE"})[1]
    assert why is not None and "whole object 0" in why


def test_a_burst_whose_writer_was_not_killed_at_its_point_is_no_crash() -> None:
    states = "whole whole absent absent absent absent"
    early = {"stored": 1, "handed": 2, "submitted": 2, "killed": True}
    seen, why = crashed(2, "E E - - - -", states, writer=early)
    assert seen == "no crash" and why is not None and "not killed at its point" in why
    # Once every object is stored, the writer may have ended by itself before the kill.
    done = {"stored": CRASH_BURST, "handed": CRASH_BURST, "submitted": CRASH_BURST, "killed": False}
    assert crashed(CRASH_BURST, " ".join(["E"] * CRASH_BURST), " ".join(["whole"] * CRASH_BURST),
                   writer=done)[1] is None  # fmt: skip


def test_the_capacity_case_runs_last_and_only_where_the_adapter_takes_a_capacity() -> None:
    plan = serving_plan()
    steps = script(plan)
    manager, fill, pause = steps[-3:]
    assert manager["op"] == "manager" and manager["extra"]["max_capacity_gb"] > 0
    assert fill["op"] == "fill" and pause == {"op": "pause", "label": "capacity"}
    assert [s["label"] for s in script(plan, capacity=False) if s["op"] == "fill"] == ["readback"]
    assert not {plan.objects[i].chunk_hash for i in plan.capacity} & {
        o.chunk_hash for o in plan.written()
    }
    # 20 objects of 16 KiB into room for 4: the case fills the adapter past its capacity.
    assert CAPACITY_OBJECTS * 16384 > 2 * CAPACITY_BYTES


def capacity_run(end: list[str], held: dict[int, int] | None, *, other: str = "E") -> Served:
    """A capacity run whose reads are ``other`` but the last round's, which is ``end``."""
    indexes = serving_plan().capacity
    last = f"capacity/r{CAPACITY_ROUNDS - 1}/"
    reads = {
        label: rows(end[int(label.rsplit("/", 1)[1])] if label.startswith(last) else other)
        for label in capacity_labels(indexes)
    }
    return Served(reads, held=None if held is None else {indexes[m]: n for m, n in held.items()})


def test_capacity_holds_the_limit_and_serves_what_the_store_keeps() -> None:
    n = CAPACITY_OBJECTS
    end = ["-"] * (n - 3) + ["E"] * 3
    kept = {m: 16384 for m in range(n - 3, n)}
    assert judge("capacity", "none", capacity_run(end, kept)) == (
        "filling, evicting E; end - E; store within its capacity",
        None,
    )
    # Which objects survive is the policy's; that what it keeps is served is the rule.
    first = ["E"] * 3 + ["-"] * (n - 3)
    assert judge("capacity", "none", capacity_run(first, {0: 1, 1: 1, 2: 1}))[1] is None
    why = judge("capacity", "none", capacity_run(end, {**kept, 2: 16384}))[1]
    assert why is not None and "still holds not served at the end: [2]" in why
    # The capacity and one object more is the bound (a pass follows the store that filled it).
    full = {m: 16384 for m in range(5)}
    assert judge("capacity", "none", capacity_run(["E"] * 5 + ["-"] * (n - 5), full))[1] is None
    over = {m: 16384 for m in range(6)}
    seen, why = judge("capacity", "none", capacity_run(["E"] * 6 + ["-"] * (n - 6), over))
    assert seen.endswith("over its capacity") and why is not None and str(CAPACITY_BYTES) in why
    why = judge("capacity", "none", capacity_run(end, kept, other="W"))[1]
    assert why is not None and "other bytes" in why
    seen, why = judge("capacity", "none", capacity_run(end, None))
    assert seen == "not run" and why is not None


def test_readback_wants_every_object_exact_right_after_its_store() -> None:
    indexes = serving_plan().readback
    exact = {f"readback/{n}/{n}": rows("E") for n in range(READBACK_OBJECTS)}
    assert judge("readback", "fp8", Served(exact)) == ("E", None)
    once = {**exact, "readback/7/7": rows("W")}
    seen, why = judge("readback", "fp8", Served(once))
    assert seen == "E W" and why is not None and "1 of 100" in why and "object 7" in why
    lost = {**exact, "readback/0/0": rows("-")}
    assert judge("readback", "none", Served(lost))[1] is not None  # a store done, then lost
    assert len(indexes) == READBACK_OBJECTS
