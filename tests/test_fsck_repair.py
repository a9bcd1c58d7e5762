"""``lmckv fsck --repair`` (SPEC.md "Repairing a store", FSCK-REPAIR-*): on a file store, a
Redis store and an S3 store, it removes exactly the objects proven damaged (cut, emptied, a
changed byte under a checksum), never a healthy object and never an entry that is no object of
the store; the quarantine keeps the damaged files as they were; each removal is conditional on
the object still being the bytes judged (a hold that a writer's rewrite defeats); a writer
rewriting objects while the repair runs never loses a write (raced many times: the worst of
the rounds is judged); a serde lmckv does not know is not repaired at all; and the exit codes
say what was left.

Stores are built here: checksum frames made with ``xxhash`` directly (test_fsck_plugin_frames),
written and read back with the adapters' own clients (:mod:`lmckv.conformance.store.views`).
Stores LMCache wrote are repaired in tests/test_store_lmcache.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import random
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest
from test_fsck_plugin_frames import checksum_frame_of

from lmckv import cli
from lmckv.base.schemas import validate
from lmckv.conformance.store import catalogue, fsck, holds
from lmckv.conformance.store.pace import Counted, Pace, Rates
from lmckv.conformance.store.servers import StoreUnavailable
from lmckv.conformance.store.sources import Entry
from lmckv.conformance.store.spec import from_l2_adapter, l2_adapter_spec, open_source
from lmckv.conformance.store.views import StoreView, open_view
from lmckv.reference_impl.keys import ObjectKey

ADAPTERS = ("fs", "resp", "s3")
FULL = 4096  # payload bytes of a full chunk
MODEL = "org/model"
#: The objects each store holds, and which of them are damaged how.
OBJECTS = 12
CUT, SHORT, EMPTIED, FLIPPED = 2, 4, 5, 9
DAMAGED = (CUT, SHORT, EMPTIED, FLIPPED)
FOREIGN_NAME = {"fs": "notes.txt"}


def key(i: int) -> ObjectKey:
    return ObjectKey(hashlib.sha256(b"repair-%d" % i).digest(), MODEL, 0, 0, "")


def healthy(i: int, version: int = 0, payload_bytes: int = FULL) -> bytes:
    payload = (hashlib.sha256(b"%d-%d" % (i, version)).digest() * (FULL // 32))[:payload_bytes]
    return checksum_frame_of(payload, key(i).chunk_hash)


def name(adapter: str, i: int) -> str:
    return catalogue.adapter(adapter).form.name_of(key(i))


@contextlib.contextmanager
def store(adapter: str, root: Path) -> Iterator[tuple[StoreView, str]]:
    """An empty store of ``adapter`` and the --l2-adapter spec fsck is given (checksum)."""
    with contextlib.ExitStack() as servers:
        try:
            view = open_view(adapter, root / "store", servers)
        except StoreUnavailable as exc:
            pytest.skip(str(exc))
        yield view, l2_adapter_spec(adapter, view.fields, "checksum")


def fill_and_damage(view: StoreView) -> dict[str, str]:
    """OBJECTS healthy objects, then the damages: name -> the rule fsck must name. SHORT is a
    whole frame of a payload no layout gives (a writer's short chunk), CUT a frame cut short."""
    for i in range(OBJECTS):
        view.put(name(view.adapter, i), healthy(i))
    view.put(name(view.adapter, CUT), healthy(CUT)[:-100])
    view.put(name(view.adapter, SHORT), healthy(SHORT, payload_bytes=FULL - 100))
    view.put(name(view.adapter, EMPTIED), b"")
    flipped = bytearray(healthy(FLIPPED))
    flipped[len(flipped) // 2] ^= 0x10
    view.put(name(view.adapter, FLIPPED), bytes(flipped))
    foreign = FOREIGN_NAME.get(view.adapter, "another-tool/notes")
    view.put(foreign, b"not ours\n")
    return {
        name(view.adapter, CUT): "STORE-CHECKSUM-HASH",
        name(view.adapter, SHORT): "STORE-SIZE",
        name(view.adapter, EMPTIED): "STORE-EMPTY",
        name(view.adapter, FLIPPED): "STORE-CHECKSUM-HASH",
        foreign: "STORE-FOREIGN",
    }


def run_fsck(spec: str, out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    status = cli.main(
        ["fsck", "--l2-adapter", spec, "--json", str(out), "--no-progress", "--jobs", "1", *extra]
    )
    doc = json.loads(out.read_text())
    validate(doc, "fsck")
    return status, doc


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_repair_removes_exactly_the_damaged_objects(adapter: str, tmp_path: Path) -> None:
    with store(adapter, tmp_path) as (view, spec):
        want = fill_and_damage(view)
        before = {n: view.get(n) for n in view.sizes()}
        status, doc = run_fsck(spec, tmp_path / "repair.json", "--repair")
        assert status == 4, doc["problems"]  # the foreign entry is left
        got = {p["name"]: (p["rule"], p["repair"]) for p in doc["problems"]}
        foreign = next(n for n, r in want.items() if r == "STORE-FOREIGN")
        assert got == {n: (rule, "left" if n == foreign else "removed") for n, rule in want.items()}
        assert doc["repair"]["outcomes"]["removed"] == 4 and doc["repair"]["uncorrected"] == 1
        assert doc["repair"]["repaired_by_rule"] == {
            "STORE-SIZE": 1, "STORE-EMPTY": 1, "STORE-CHECKSUM-HASH": 2
        }  # fmt: skip
        # What is left: every healthy object byte for byte, the foreign entry untouched.
        removed = {n for n, r in want.items() if r != "STORE-FOREIGN"}
        after = {n: view.get(n) for n in view.sizes()}
        assert after == {n: b for n, b in before.items() if n not in removed}
        # A second check names only what is no object of the store.
        status, doc = run_fsck(spec, tmp_path / "again.json", "--repair")
        assert status == 4
        assert {p["name"]: p["rule"] for p in doc["problems"]} == {foreign: "STORE-FOREIGN"}
        assert doc["repair"]["outcomes"]["removed"] == 0


def test_a_file_store_quarantines_the_damaged_files_as_they_were(tmp_path: Path) -> None:
    quarantine = tmp_path / "quarantine"
    quarantine.mkdir()
    with store("fs", tmp_path) as (view, spec):
        want = fill_and_damage(view)
        damaged = {n: view.get(n) for n, r in want.items() if r != "STORE-FOREIGN"}
        status, doc = run_fsck(
            spec, tmp_path / "r.json", "--repair", "--quarantine", str(quarantine)
        )
        assert status == 4 and doc["repair"]["outcomes"]["quarantined"] == 4
        assert doc["repair"]["quarantine"] == str(quarantine.resolve())
        kept = {p.name: p.read_bytes() for p in quarantine.iterdir()}
        assert kept == damaged
        assert not set(damaged) & set(view.sizes())


def test_a_store_whose_serde_is_unknown_is_not_repaired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Raw objects of a store given without its serde: sizes learned from the store prove
    nothing (exit 2 before anything is read or removed)."""
    root = tmp_path / "store"
    root.mkdir()
    form = catalogue.FS.form
    for i in range(6):
        (root / form.name_of(key(i))).write_bytes(os.urandom(FULL if i else 100))
    listing = sorted(p.name for p in root.iterdir())
    assert cli.main(["fsck", str(root), "--repair", "--no-progress"]) == 2
    assert "not repaired" in capsys.readouterr().err
    assert sorted(p.name for p in root.iterdir()) == listing
    # Named, its sizes are the layout's: the short object is removed (exit 1: all corrected).
    assert cli.main(["fsck", str(root), "--serde", "none", "--repair", "--no-progress"]) == 1
    assert len(list(root.iterdir())) == 5
    assert cli.main(["fsck", str(root), "--serde", "none", "--repair", "--no-progress"]) == 0


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--quarantine", "{q}"], "--quarantine goes with --repair"),
        (["--repair", "--quarantine", "{store}/inside"], "inside the store"),
        (["--repair", "--quarantine", "{q}/missing"], "--quarantine"),
        (["--max-rate", "0"], "positive"),
        (["--max-rate", "12X"], "a number, with k, M, G"),
    ],
)
def test_usage_errors_are_one_line_and_touch_nothing(
    argv: list[str], why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, q = tmp_path / "store", tmp_path / "q"
    (root / "inside").mkdir(parents=True)
    q.mkdir()
    (root / catalogue.FS.form.name_of(key(0))).write_bytes(b"")
    args = [a.format(q=q, store=root) for a in argv]
    assert cli.main(["fsck", str(root), "--serde", "none", "--no-progress", *args]) == 2
    err = capsys.readouterr().err
    assert why in err
    assert len(list(root.iterdir())) == 2


def test_quarantine_is_for_a_file_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with store("resp", tmp_path) as (view, spec):
        view.put(name("resp", 0), b"")
        argv = ["fsck", "--l2-adapter", spec, "--repair", "--quarantine", str(tmp_path)]
        assert cli.main(argv) == 2
        assert "file store" in capsys.readouterr().err
        assert view.sizes() == {name("resp", 0): 0}


def _plan(spec: str) -> fsck.Plan:
    parsed = from_l2_adapter(spec)
    assert parsed.serde is not None
    return fsck.Plan(parsed, parsed.serde.row, repair=fsck.Repair())


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_hold_removes_only_the_bytes_judged(adapter: str, tmp_path: Path) -> None:
    """Deterministic, at the two points a writer can come in: before the hold (the bytes held
    are healthy: judged again, they are left), and after it (Redis and S3 refuse the removal;
    a file store removes the held file, and the writer's new file has the name)."""
    with store(adapter, tmp_path) as (view, spec):
        plan, source = _plan(spec), view.source
        reads = Counted(source, Pace(Rates()))
        n = name(adapter, CUT)
        view.put(n, healthy(CUT)[:-100])
        listed = Entry(n, FULL - 100 + 17)
        view.put(n, healthy(CUT, 1))  # rewritten after the listing, before the hold
        assert fsck.repair(plan, reads, listed) == holds.CHANGED
        assert view.get(n) == healthy(CUT, 1)

        view.put(n, healthy(CUT)[:-100])
        held = holds.hold(source, listed, 1 << 20)
        try:
            again = fsck.judge(plan, held, held.entry)
            assert again.status == "problem" and again.rule in fsck.REPAIRABLE
            view.put(n, healthy(CUT, 2))  # rewritten while held
            outcome = held.remove()
        finally:
            held.release()
        assert outcome == (holds.REMOVED if adapter == "fs" else holds.CHANGED)
        assert view.get(n) == healthy(CUT, 2)
        assert [p for p in view.sizes() if "held" in p] == []


def rewriter(spec: str, conn: Connection) -> None:
    """A writer process (spawned once per store). For each round the parent starts with
    ``(round, seconds)``, it rewrites each damaged object and two healthy ones once, with a new
    healthy version, at moments drawn at random over ``seconds``; it then waits for the
    parent's stop and sends each name's version. Every write is the last of its name in the
    round, so a write the repair removed shows. ``None`` ends it."""
    source = open_source(from_l2_adapter(spec))
    adapter = from_l2_adapter(spec).adapter
    while (command := conn.recv()) is not None:
        round_, seconds = command
        rng = random.Random(round_)
        healthy_ones = [i for i in range(OBJECTS) if i not in DAMAGED]
        chosen = [*DAMAGED, *rng.sample(healthy_ones, 2)]
        plan = sorted((rng.uniform(0, seconds), i) for i in chosen)
        start, last = time.monotonic(), {}
        for at, i in plan:
            if conn.poll(max(0.0, start + at - time.monotonic())):
                break  # the repair ended first
            source.put(name(adapter, i), healthy(i, round_ + 1))
            last[name(adapter, i)] = (i, round_ + 1)
        conn.recv()
        conn.send(last)
    source.close()


#: Seconds each step of a repair is held open in the race (a hold taken this long after the
#: judgement, a removal this long after the hold), and the seconds over which the writer
#: spreads its writes (about the repair's length with those steps).
STEP_S = {"fs": 0.01, "resp": 0.01, "s3": 0.02}
SPREAD_S = {"fs": 0.1, "resp": 0.1, "s3": 0.5}


def slow_steps(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Every hold fsck takes starts ``seconds`` late, and its removal too: a fault injected at a
    known point (the windows a writer can come in by are the race's, only wider)."""
    real = holds.hold

    def hold(*args: Any, **kwargs: Any) -> holds.Held:
        time.sleep(seconds)
        held = real(*args, **kwargs)
        remove = held.remove

        def late_remove() -> str:
            time.sleep(seconds)
            return remove()

        held.remove = late_remove  # type: ignore[method-assign]
        return held

    monkeypatch.setattr(fsck.holds, "hold", hold)


#: Rounds per store (moto's S3 answers a write in milliseconds, Redis and files in less).
ROUNDS = {"fs": 25, "resp": 25, "s3": 12}


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_writer_racing_the_repair_never_loses_a_write(
    adapter: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ROUNDS[adapter] rounds, each a fresh damage of the store and ``lmckv fsck --repair``
    while a writer process (on the other core) rewrites every damaged object and two healthy
    ones at random moments of the repair, whose steps are held open a few milliseconds each
    (slow_steps), so that writes land before the judgement, between it and the hold, and
    between the hold and the removal. After each round: every object the writer wrote holds
    its write, every healthy object not rewritten is as it was, and every damaged object not
    rewritten is gone. The worst round is what is judged (every round must hold); it fails
    within the rounds when the second judgement, the condition, or a file's hold is taken
    away."""
    slow_steps(monkeypatch, STEP_S[adapter])
    context = multiprocessing.get_context("spawn")
    with store(adapter, tmp_path) as (view, spec):
        ours, theirs = context.Pipe()
        writer = context.Process(target=rewriter, args=(spec, theirs), daemon=True)
        writer.start()
        writes = 0
        try:
            for round_ in range(ROUNDS[adapter]):
                for n in view.sizes():
                    view.delete(n)
                want = fill_and_damage(view)
                damaged = {n for n, r in want.items() if r != "STORE-FOREIGN"}
                before = {n: view.get(n) for n in view.sizes()}
                ours.send((round_, SPREAD_S[adapter]))
                try:
                    argv = ["fsck", "--l2-adapter", spec, "--repair", "--no-progress"]
                    status = cli.main([*argv, "--jobs", "1"])
                finally:
                    ours.send("stop")
                    assert ours.poll(60), "the writer did not answer"
                    last = {n: healthy(i, v) for n, (i, v) in ours.recv().items()}
                assert status in (1, 4), round_
                after = {n: view.get(n) for n in view.sizes()}
                lost = {n for n in last if after.get(n) != last[n]}
                assert not lost, (round_, sorted(lost))
                untouched = set(before) - set(last)
                assert {n: after.get(n) for n in untouched - damaged} == {
                    n: before[n] for n in untouched - damaged
                }, round_
                assert not (untouched & damaged) & set(after), round_
                writes += len(last)
        finally:
            ours.send(None)
            writer.join(30)
            writer.kill()
        assert writes >= ROUNDS[adapter], "the writer wrote while the repairs ran"
