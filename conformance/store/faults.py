"""The damages a store suffers, and what LMCache must serve after each (SPEC.md "Reading a
damaged store", rules STORE-LOAD-*).

Each :class:`Fault` is done to one object of a store written by LMCache (its *target*), with
the store's own client (:mod:`.views`), never through LMCache. :func:`fault_plan` lays out
one store: an intact object first, one target per fault, and an intact object last, each of
one layout so that LMCache's RESP connector stores them in one batch. A :func:`verdict` names
what a read of the target (or, for :data:`NEIGHBOURS`, of the intact objects) must have been.

The faults, all of which an operator meets: a write cut short (``truncated``), a file zeroed
by a crash or a full disk (``emptied``), a tool that appended to it (``grown``), one bit turned
in the K half or the V half (``flip-k``, ``flip-v``: disk or memory errors), an object removed
by eviction or by hand (``deleted``), another key's object under this name (``replaced``: a
copy or a rename gone wrong), an unfinished write left by a writer that died (``temp``: the
file adapters only), and the server's connection dropped while the object is on its way
(``dropped``: the server adapters only; :mod:`.drop_proxy` does it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import catalogue
from .lmcache_writer import FULL_CHUNK, PlannedObject, ReadObject, sha256_chunk_hash
from .sources import Source

#: Bytes cut from a truncated object (not a whole number of tokens of FULL_CHUNK), and
#: appended to a grown one.
CUT_BYTES = 1000
GROWN_BYTES = 64
#: The model of a fault run's objects, and the bit a flip turns.
MODEL = "lmckv/faults"
FLIP_MASK = 0x04


#: Which stores a damage can be done to: every one, files only, or a server's only.
EVERY, FILES, SERVERS = "every", "files", "servers"


@dataclass(frozen=True)
class Fault:
    """One damage: its name, the rule a read of its target is judged by, the stores it can
    be done to, and what it does (for the report)."""

    name: str
    rule: str
    stores: str
    does: str

    def applies(self, adapter: str) -> bool:
        """Whether this damage can be done to a store of ``adapter`` (its catalogue row:
        an unfinished write is a file's, a cut connection a server's)."""
        row = catalogue.adapter(adapter)
        return {EVERY: True, FILES: row.files, SERVERS: row.has_server}[self.stores]


def adapters() -> list[str]:
    """The adapters a fault run covers: those whose stores run here (catalogue order)."""
    return [a.name for a in catalogue.adapters_here()]


def serdes() -> list[str]:
    """The serdes a fault run covers, by the name the matrix uses ("none": no serde)."""
    return [s.name for s in catalogue.fault_serdes()]


FAULTS = (
    Fault("truncated", "STORE-LOAD-SIZE", EVERY, f"the last {CUT_BYTES} bytes cut off"),
    Fault("emptied", "STORE-LOAD-SIZE", EVERY, "every byte removed (size 0)"),
    Fault("grown", "STORE-LOAD-SIZE", EVERY, f"{GROWN_BYTES} bytes appended"),
    Fault("flip-k", "STORE-LOAD-CHANGED", EVERY, "one bit turned in the K half"),
    Fault("flip-v", "STORE-LOAD-CHANGED", EVERY, "one bit turned in the V half"),
    Fault("deleted", "STORE-LOAD-MISSING", EVERY, "the object removed"),
    Fault("replaced", "STORE-LOAD-KEY", EVERY, "another key's object stored under its name"),
    Fault("temp", "STORE-LOAD-TEMP", FILES, "only an unfinished write (.tmp) left"),
    Fault("dropped", "STORE-LOAD-DROP", SERVERS, "the connection cut mid-transfer"),
)
BY_NAME = {f.name: f for f in FAULTS}
#: Plan indexes: the first intact object, one target per fault, the last intact object (also
#: the object a ``replaced`` target receives, and the first read after a drop).
FIRST = 0
TARGET = {f.name: 1 + i for i, f in enumerate(FAULTS)}
LAST = 1 + len(FAULTS)
#: What one fault's session reads, in this order, through a StorageManager of its own: an
#: intact object, the fault's target, then an intact object twice (positions in the session).
BEFORE, DAMAGED, AFTER, AGAIN = 0, 1, 2, 3


def session(fault: Fault) -> list[int]:
    """The plan indexes ``fault``'s session reads."""
    return [FIRST, TARGET[fault.name], LAST, LAST]


def fault_plan() -> list[PlannedObject]:
    """One store's objects: an intact one, a target per fault, an intact one; one model,
    kv_rank and group, one full-chunk layout, the chunk hashes of one sequence."""
    return [
        PlannedObject(MODEL, 0, 0, sha256_chunk_hash(100 + i), "", FULL_CHUNK, seed=2000 + i)
        for i in range(LAST + 1)
    ]


def flipped(data: bytes, serde: str, half: str) -> bytes:
    """``data`` with one bit turned a quarter into its K half or its V half of the payload
    (the serde's frame left as it is: K is the first half of the layout, V the second)."""
    first, end = catalogue.serde(serde).payload_span(len(data))
    quarter = (end - first) // 4
    at = first + (quarter if half == "k" else 3 * quarter)
    out = bytearray(data)
    out[at] ^= FLIP_MASK
    return bytes(out)


def damage(store: Source, names: Sequence[str], serde: str, adapter: str) -> list[str]:
    """Do every fault that applies to ``adapter`` to its target in ``store`` (``names``: the
    plan's object names, in plan order), except ``dropped``, which the proxy does while the
    store is read; the faults done."""
    done = []
    for fault in FAULTS:
        if not fault.applies(adapter) or fault.name == "dropped":
            continue
        damage_object(store, fault.name, names[TARGET[fault.name]], names[LAST], serde)
        done.append(fault.name)
    return done


def damage_object(store: Source, fault: str, name: str, other: str, serde: str) -> None:
    """Do the fault named ``fault`` to the object ``name`` of ``store`` (``other``: the
    object whose bytes ``replaced`` puts there)."""
    _DAMAGES[fault](store, name, other, serde)


def _temp(store: Source, name: str, other: str, serde: str) -> None:
    """The object's bytes, cut in half, under its temporary name only (a writer that died
    after writing half of it, before its rename)."""
    data = store.get(name)
    store.delete(name)
    store.put(name.removesuffix(".data") + ".tmp", data[: len(data) // 2])


_DAMAGES: dict[str, Callable[[Source, str, str, str], None]] = {
    "truncated": lambda s, n, o, serde: s.put(n, s.get(n)[:-CUT_BYTES]),
    "emptied": lambda s, n, o, serde: s.put(n, b""),
    "grown": lambda s, n, o, serde: s.put(n, s.get(n) + bytes([0x5A]) * GROWN_BYTES),
    "flip-k": lambda s, n, o, serde: s.put(n, flipped(s.get(n), serde, "k")),
    "flip-v": lambda s, n, o, serde: s.put(n, flipped(s.get(n), serde, "v")),
    "deleted": lambda s, n, o, serde: s.delete(n),
    "replaced": lambda s, n, o, serde: s.put(n, s.get(o)),
    "temp": _temp,
}


def can_know(fault: Fault, serde: str) -> bool:
    """Whether an adapter with ``serde`` can tell the damaged object from a good one: a
    changed byte only through a checksum or a tag (a verifiable serde), another key's object
    only through a frame judged to bind its key (SPEC.md STORE-LOAD-KEY)."""
    row = catalogue.serde(serde)
    if fault.rule == "STORE-LOAD-CHANGED":
        return row.verifiable
    if fault.rule == "STORE-LOAD-KEY":
        return row.binds_key
    return True


#: Outcomes that are a read that ended: a hit (right or wrong bytes), a miss, a typed error.
ENDED = frozenset({"exact", "wrong-bytes", "miss", "error"})


def verdict(fault: Fault, serde: str, read: ReadObject) -> str | None:
    """Why the read of ``fault``'s target breaks its rule, or None when it does not.

    Where the adapter can know the damage, the read must be a miss (or a typed error), never
    a hit; where it cannot (no checksum), the read must still end, a hit or a miss, within
    its bound."""
    if read.outcome not in ENDED:
        return f"the read never ended ({read.outcome}{': ' + read.detail if read.detail else ''})"
    if fault.rule == "STORE-LOAD-DROP" and read.outcome == "exact":
        return None  # the adapter fetched the object again: every byte is the one written
    if can_know(fault, serde) and read.hit:
        bytes_are = "other bytes" if not read.exact else "the bytes it had"
        return f"served as a hit with {bytes_are}"
    return None


def neighbours_verdict(fault: Fault, reads: Sequence[ReadObject]) -> str | None:
    """Why the intact objects of ``fault``'s session break STORE-LOAD-NEIGHBOURS, or None:
    the one read before the target is an exact hit; the one read after it is an exact hit at
    its first read, or, after a dropped connection only, a miss at its first and an exact hit
    at its second (SPEC.md says why that one miss is tolerated)."""
    if not reads[BEFORE].exact:
        return f"the intact object read before it: {reads[BEFORE].outcome}"
    first, second = reads[AFTER], reads[AGAIN]
    if first.exact:
        return None
    if fault.rule == "STORE-LOAD-DROP" and first.outcome == "miss" and second.exact:
        return None
    return f"the intact object read after it: {first.outcome}, then {second.outcome}"
