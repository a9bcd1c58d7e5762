"""``lmckv fsck --repair`` (SPEC.md "Repairing a store", STORE-REPAIR-*): on a file store, a
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
import os
import random
import threading
from collections.abc import Iterator
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
from lmckv.conformance.store.spec import from_l2_adapter, l2_adapter_spec
from lmckv.conformance.store.views import StoreView, open_view
from lmckv.reference_impl.keys import ObjectKey

ADAPTERS = ("fs", "resp", "s3")
FULL = 4096  # payload bytes of a full chunk
MODEL = "org/model"
#: The objects each store holds, and which of them are damaged how.
OBJECTS = 12
CUT, SHORT, EMPTIED, FLIPPED = 2, 4, 5, 9
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


def rewrite(
    view: StoreView, rng: random.Random, stop: threading.Event, last: dict[str, bytes], version: int
) -> None:
    """Rewrite random objects with new healthy versions until ``stop``; ``last``: each name's
    last write."""
    while not stop.is_set():
        i = rng.randrange(OBJECTS)
        version += 1
        data = healthy(i, version)
        view.put(name(view.adapter, i), data)
        last[name(view.adapter, i)] = data


#: Rounds per store (moto's S3 answers a write in milliseconds, Redis and files in less).
ROUNDS = {"fs": 25, "resp": 25, "s3": 8}


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_writer_racing_the_repair_never_loses_a_write(adapter: str, tmp_path: Path) -> None:
    """ROUNDS[adapter] rounds, each a fresh damage of the store and ``lmckv fsck --repair`` while a
    writer thread rewrites damaged and healthy objects with new healthy versions as fast as its
    client goes (the interpreter switches between them every few milliseconds, so the writes
    land at every step of the repair: listing, judging, holding, removing). After each round:
    every object the writer wrote holds its last write, every healthy object never rewritten
    is as it was, and every damaged object never rewritten is gone. The worst round is what is
    judged (every round must hold)."""
    rng = random.Random(4)
    with store(adapter, tmp_path) as (view, spec):
        writes = 0
        for round_ in range(ROUNDS[adapter]):
            for n in view.sizes():
                view.delete(n)
            want = fill_and_damage(view)
            damaged = {n for n, r in want.items() if r != "STORE-FOREIGN"}
            before = {n: view.get(n) for n in view.sizes()}
            last: dict[str, bytes] = {}
            stop = threading.Event()

            args = (view, rng, stop, last, round_ * 100_000)
            writer = threading.Thread(target=rewrite, args=args, daemon=True)
            writer.start()
            try:
                argv = ["fsck", "--l2-adapter", spec, "--repair", "--no-progress", "--jobs", "1"]
                status = cli.main(argv)
            finally:
                stop.set()
                writer.join(30)
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
        assert writes >= ROUNDS[adapter], "the writer wrote while the repairs ran"
