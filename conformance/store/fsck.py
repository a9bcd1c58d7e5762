"""Checking a store LMCache writes (SPEC.md "A store", rules STORE-*): the objects an L2
adapter names, framed by a serde, in the layout of their group.

Every listed entry gets one verdict. An entry named like an object must be one ObjectKey's
name under the adapter's form (STORE-NAME), hold something (STORE-EMPTY) and hold what its
serde writes: a size the group's layout produces for raw and fp8 objects (STORE-SIZE: their
content cannot be verified, and they are counted as "size checked", never as "verified"), an
aesgcm frame whose tag verifies under the key LMCache derives (STORE-AESGCM-*), one valid
LMCKV blob (STORE-BLOB-*). Other entries are the adapter's own files, unfinished writes
(STORE-TEMP once they are old) or foreign (STORE-FOREIGN).

The store is live: an object that vanishes between its listing and its reading is counted as
gone (eviction), one that cannot be read is a problem of that object (STORE-READ); neither
stops the run. The listing is read in pages and each page is checked on its own, in this
process, in a pool of processes or on a Dask cluster; only totals and counts stay in memory,
and problems stream to a spool file (:class:`Report`).

Asked to repair (SPEC.md "Repairing a store"), the worker that judged a page removes each of
its objects proven damaged (:data:`REPAIRABLE`) through a hold (:mod:`.holds`): the bytes it
removes are judged again as held, and a writer's newer object is never removed. Reads are
paced by :mod:`.pace` when rates are asked.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from lmckv.base.untrusted_text import shown

from ...reference_impl.keys import ObjectKey
from ...reference_impl.keys.kv_rank import split_kv_rank
from ...reference_impl.kv_codec import CodecError
from ...reference_impl.kv_codec.blob_file import TruncatedBlobError, verify_blob_file
from . import catalogue, checksum_frame, holds, tq01_frame
from .catalogue import Check
from .framing import AesGcmKeys, aesgcm_tag_problem
from .names import key_of
from .pace import Counted, Pace, Rates
from .sizes import DEFAULT_CHUNK_TOKENS, Group, SizeLearner, SizeRule
from .sources import Entry, ObjectGone, ObjectUnreadable, Readable, Source, StoreUnreachable
from .spec import SerdeSpec, StoreSpec, open_source

SCHEMA = "fsck"
KIND = "lmckv-fsck"
SCHEMA_VERSION = 3
#: Objects whose first bytes decide the serde of a store given without one.
DETECT_SAMPLE = 16
#: An unfinished write older than this many seconds is left by a writer that died.
DEFAULT_TEMP_AGE_S = 600.0
#: Objects larger than this are only size-checked (their bytes are not read).
DEFAULT_MAX_OBJECT_BYTES = 1 << 30
#: Pages checked at once beyond the workers' count (bounds what waits in memory).
PAGES_AHEAD = 2
#: Seconds the main thread waits on a page at a time. A signal the kernel hands to another
#: thread of the process (the pool's) interrupts no wait of the main thread, and its handler
#: (Ctrl-C, SIGTERM, --time-limit's alarm) runs only when the main thread next runs Python
#: code: an untimed wait on a page stuck on a server would hold it for as long as the server.
WAKE_S = 0.2
#: The statuses an entry can end with; ``problem`` is the only one that fails the check.
STATUSES = (
    "verified", "size_checked", "partial", "problem", "in_flight", "gone", "adapter",
    "directory",
)  # fmt: skip
#: The problems ``--repair`` removes (SPEC.md FSCK-REPAIR-WHAT): an object LMCache would
#: read under its key, proven damaged by its size, its emptiness, its frame, its tag, its hash
#: or its CRC, and an unfinished write old enough that its writer died. Never STORE-FOREIGN
#: nor STORE-NAME (no object of the store: reported, not touched), nor STORE-READ (nothing
#: is proven of an object that cannot be read).
REPAIRABLE = frozenset({
    "STORE-EMPTY", "STORE-SIZE", "STORE-AESGCM-FRAME", "STORE-AESGCM-TAG",
    checksum_frame.FRAME_RULE, checksum_frame.FINGERPRINT_RULE, checksum_frame.HASH_RULE,
    tq01_frame.RULE, "STORE-BLOB-TRUNCATED", "STORE-BLOB-VALID", "STORE-NAME-BLOB",
    "STORE-TEMP",
})  # fmt: skip
#: How a problem's repair ended: the holds' outcomes, or LEFT (not a problem --repair
#: removes: reported, not touched).
LEFT = "left"
REPAIR_OUTCOMES = (*holds.OUTCOMES, LEFT)


class RepairRefused(ValueError):
    """``--repair`` asked of a store whose problems prove nothing (its serde unknown)."""


@dataclass(frozen=True)
class Repair:
    """``--repair``: where removed objects go (a file store's quarantine folder), if kept."""

    quarantine: Path | None = None


@dataclass(frozen=True)
class Plan:
    """How every page is checked: the store, its serde's catalogue row (carried to every
    worker, so that a row registered in this process reaches them), the keys of its tags and
    the sizes."""

    spec: StoreSpec
    row: catalogue.Serde
    keys: AesGcmKeys | None = None
    sizes: dict[Group, SizeRule] = field(default_factory=dict)
    #: The ``--object-bytes`` rule of groups the operator did not name (None: learned).
    default_size: SizeRule | None = None
    max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES
    temp_age_s: float = DEFAULT_TEMP_AGE_S
    now: float = 0.0
    repair: Repair | None = None
    #: The rates of this plan's reads (a share of the asked ones where workers share no clock).
    rates: Rates = field(default_factory=Rates)

    def size_rule(self, group: Group) -> SizeRule | None:
        return self.sizes.get(group, self.default_size)


@dataclass(frozen=True)
class Verdict:
    """What one entry is; ``rule`` and ``message`` are set for a problem."""

    name: str
    size: int
    status: str
    key: tuple[str, int, int, str] | None = None
    rule: str = ""
    message: str = ""
    #: How its repair ended (REPAIR_OUTCOMES), when one was asked.
    repair: str = ""
    #: Bytes read from the store to judge (and repair) it.
    read: int = 0

    def problem(self, rule: str, message: str) -> Verdict:
        return Verdict(self.name, self.size, "problem", self.key, rule, message)


def _key_tuple(key: ObjectKey) -> tuple[str, int, int, str]:
    return (key.model_name, key.kv_rank, key.object_group_id, key.cache_salt or "")


def _content(
    plan: Plan, source: Readable, entry: Entry, base: Verdict, chunk_hash: bytes
) -> Verdict:
    """The verdict on an object's bytes under the plan's serde (its catalogue row)."""
    assert base.key is not None
    model, _, group, salt = base.key
    row = plan.row
    if row.check is Check.BLOB:
        return _blob(plan, source, entry, base, model)
    if row.check is Check.FRAME:
        return _tq01(plan, source, entry, base)
    if row.check is Check.HASH:
        return _checksum(plan, source, entry, base, chunk_hash)
    verify = row.check is Check.TAG and plan.keys is not None
    verify = verify and entry.size <= plan.max_object_bytes
    frame = b""
    if not row.frame_rule and plan.spec.row.files:
        # A file LMCache cannot open is no object it serves: one byte read tells.
        with source.open(entry, 1) as f:
            f.read(1)
    if row.frame_rule:  # read once: the whole frame when its tag is checked
        wanted = entry.size if verify else len(row.magic)
        with source.open(entry, wanted) as f:
            frame = f.read(wanted + 1)
        if problem := row.frame_problem(frame[: len(row.magic)], entry.size):
            return base.problem(row.frame_rule, problem)
    payload = row.payload_size(entry.size)
    rule = plan.size_rule((model, group))
    if rule is not None and (why := rule.problem(payload)):
        return base.problem("STORE-SIZE", why)
    partial = rule is not None and rule.is_partial(payload)
    status = "partial" if partial else "size_checked"
    if verify and plan.keys is not None:
        if len(frame) != entry.size:
            return base.problem("STORE-READ", f"read {len(frame)} of {entry.size} bytes")
        if why := aesgcm_tag_problem(frame, plan.keys.key(salt)):
            return base.problem(row.tag_rule, why)
        status = "verified"
    return Verdict(base.name, base.size, status, base.key)


def _tq01(plan: Plan, source: Readable, entry: Entry, base: Verdict) -> Verdict:
    """STORE-TQ01-FRAME: the frame's structure against its own header (its content carries no
    checksum: the object counts as size checked)."""
    if entry.size > plan.max_object_bytes:  # not read: no server is asked for more
        return Verdict(base.name, base.size, "size_checked", base.key)
    with source.open(entry, entry.size) as f:
        try:
            tq01_frame.check(f.read, entry.size)
        except tq01_frame.FrameError as exc:
            return base.problem(tq01_frame.RULE, str(exc))
    return Verdict(base.name, base.size, "size_checked", base.key)


def _checksum(
    plan: Plan, source: Readable, entry: Entry, base: Verdict, chunk_hash: bytes
) -> Verdict:
    """STORE-CHECKSUM-*, then STORE-SIZE of the payload: the header and, for an object within
    ``--max-object-bytes``, the payload's hash, read in pieces."""
    model, _, group, _ = base.key or ("", 0, 0, "")
    whole = entry.size <= plan.max_object_bytes
    wanted = entry.size if whole else checksum_frame.HEAD_BYTES
    with source.open(entry, wanted) as f:
        if whole:
            problem = checksum_frame.verify(f.read, entry.size, chunk_hash)
        else:
            problem = checksum_frame.head_problem(f.read(wanted), entry.size, chunk_hash)
    if problem:
        return base.problem(*problem)
    rule = plan.size_rule((model, group))
    payload = plan.row.payload_size(entry.size)
    if rule is not None and (why := rule.problem(payload)):
        return base.problem("STORE-SIZE", why)
    if rule is not None and rule.is_partial(payload):
        return Verdict(base.name, base.size, "partial", base.key)
    return Verdict(base.name, base.size, "verified" if whole else "size_checked", base.key)


def _blob(plan: Plan, source: Readable, entry: Entry, base: Verdict, model: str) -> Verdict:
    if entry.size > plan.max_object_bytes:  # not read: no server is asked for more
        return Verdict(base.name, base.size, "size_checked", base.key)
    try:
        with source.open(entry, entry.size) as f:
            enc = verify_blob_file(f, entry.size)
    except TruncatedBlobError as exc:
        return base.problem("STORE-BLOB-TRUNCATED", f"{exc.rule}: {exc}")
    except CodecError as exc:
        return base.problem("STORE-BLOB-VALID", f"{exc.rule or type(exc).__name__}: {exc}")
    recorded = enc.hashes.model_id
    if recorded and recorded != model:
        why = f"the blob records model_id {shown(recorded)}, the name says {shown(model)}"
        return base.problem("STORE-NAME-BLOB", why)
    return Verdict(base.name, base.size, "verified", base.key)


def judge(plan: Plan, source: Readable, entry: Entry) -> Verdict:
    """The verdict on one listed entry (never raises for what the store holds)."""
    base = Verdict(entry.name, entry.size, entry.kind)
    if entry.kind in ("adapter", "directory"):
        return base
    if entry.kind == "foreign":
        return base.problem("STORE-FOREIGN", entry.why)
    if entry.kind == "unreadable":
        return base.problem("STORE-READ", entry.why)
    if entry.kind == "temp":
        age = plan.now - (entry.mtime or plan.now)
        if age < plan.temp_age_s:
            return Verdict(entry.name, entry.size, "in_flight")
        return base.problem("STORE-TEMP", f"an unfinished write {age:.0f} s old: its writer died")
    key, why = key_of(plan.spec.row.form, entry.name, plan.spec.key_prefix)
    if key is None:
        if not plan.spec.row.files and entry.name.count("@") < 3:
            return base.problem("STORE-FOREIGN", "not named like an object of the adapter")
        return base.problem("STORE-NAME", why)
    base = Verdict(entry.name, entry.size, "object", _key_tuple(key))
    if entry.size == 0:
        return base.problem("STORE-EMPTY", "empty")
    try:
        return _content(plan, source, entry, base, key.chunk_hash)
    except ObjectGone:
        return Verdict(entry.name, entry.size, "gone", base.key)
    except StoreUnreachable:
        raise
    except (ObjectUnreadable, OSError) as exc:
        return base.problem("STORE-READ", f"cannot be read: {exc}")


def repair(plan: Plan, reads: Counted, entry: Entry) -> str:
    """Remove (or quarantine) the object listed as ``entry`` if the bytes held under its name
    are proven damaged now (SPEC.md FSCK-REPAIR-CONDITIONAL); how it ended. The hold's read
    is paced and counted with the check's."""
    assert plan.repair is not None
    reads.take(min(entry.size, plan.max_object_bytes))
    try:
        held = holds.hold(reads.source, entry, plan.max_object_bytes, plan.repair.quarantine)
    except ObjectGone:
        return holds.GONE
    except holds.HeldChanged:
        return holds.CHANGED
    except StoreUnreachable:
        raise
    except (ObjectUnreadable, OSError):
        return holds.FAILED
    try:
        again = judge(plan, held, held.entry)
        if again.status == "problem" and again.rule in REPAIRABLE:
            return held.remove()
        return holds.CHANGED
    except StoreUnreachable:
        raise
    except (ObjectGone, ObjectUnreadable, OSError):
        return holds.FAILED
    finally:
        held.release()


#: The sources of the pages checked in this process, one per store.
_SOURCES: dict[StoreSpec, Source] = {}
#: This process's paced and counted reads, per store and rates.
_COUNTED: dict[tuple[StoreSpec, Rates], Counted] = {}


def _source(spec: StoreSpec) -> Source:
    found = _SOURCES.get(spec)
    if found is None:
        found = _SOURCES[spec] = open_source(spec)
    return found


def _counted(plan: Plan) -> Counted:
    found = _COUNTED.get((plan.spec, plan.rates))
    if found is None:
        found = _COUNTED[(plan.spec, plan.rates)] = Counted(_source(plan.spec), Pace(plan.rates))
    return found


def check_page(plan: Plan, page: list[Entry]) -> list[Verdict]:
    """Every verdict of one page, and the repair of its damaged objects when asked; the unit
    of work of a pool or a cluster (the worker opens the store itself, once)."""
    reads = _counted(plan)
    verdicts = []
    for entry in page:
        before = reads.read_bytes
        verdict = judge(plan, reads, entry)
        if plan.repair is not None and verdict.status == "problem":
            if verdict.rule in REPAIRABLE:
                verdict = replace(verdict, repair=repair(plan, reads, entry))
            else:
                verdict = replace(verdict, repair=LEFT)
        verdicts.append(replace(verdict, read=reads.read_bytes - before))
    return verdicts


@dataclass
class Total:
    """The objects of one model, kv_rank, object group and cache_salt, whatever they hold."""

    objects: int = 0
    bytes: int = 0
    verified: int = 0
    size_checked: int = 0
    partial: int = 0
    problems: int = 0
    gone: int = 0
    #: Damaged objects removed or quarantined by a repair.
    repaired: int = 0


@dataclass
class Report:
    """What a check found: counts and totals in memory, problems in a spool file."""

    spec: StoreSpec
    serde: str
    serde_detected: bool
    counts: Counter[str] = field(default_factory=Counter)
    rules: Counter[str] = field(default_factory=Counter)
    totals: dict[tuple[str, int, int, str], Total] = field(default_factory=dict)
    bytes: int = 0
    incomplete: str | None = None
    #: What a repair was asked to do (None: none was).
    repair: Repair | None = None
    rates: Rates = field(default_factory=Rates)
    #: How the problems' repairs ended; the removed and quarantined ones by rule.
    repairs: Counter[str] = field(default_factory=Counter)
    repaired_by_rule: Counter[str] = field(default_factory=Counter)
    read_bytes: int = 0
    seconds: float = 0.0
    spool: IO[str] = field(default_factory=lambda: _spool())
    #: The first problems, for a summary on a terminal.
    first_problems: list[Verdict] = field(default_factory=list)
    shown_problems: int = 100

    def add(self, verdict: Verdict) -> None:
        self.counts[verdict.status] += 1
        self.bytes += verdict.size
        self.read_bytes += verdict.read
        removed = verdict.repair in (holds.REMOVED, holds.QUARANTINED)
        if verdict.repair:
            self.repairs[verdict.repair] += 1
        if removed:
            self.repaired_by_rule[verdict.rule] += 1
        if verdict.key is not None:
            total = self.totals.setdefault(verdict.key, Total())
            total.objects += 1
            total.bytes += verdict.size
            if verdict.status in ("verified", "size_checked", "partial", "gone"):
                setattr(total, verdict.status, getattr(total, verdict.status) + 1)
            total.problems += verdict.status == "problem"
            total.repaired += removed
        if verdict.status == "problem":
            self.rules[verdict.rule] += 1
            record: dict[str, Any] = {
                "name": verdict.name, "rule": verdict.rule, "message": verdict.message,
                "size": verdict.size,
            }  # fmt: skip
            if verdict.repair:
                record["repair"] = verdict.repair
            self.spool.write(json.dumps(record) + "\n")
            if len(self.first_problems) < self.shown_problems:
                self.first_problems.append(verdict)

    @property
    def problem_count(self) -> int:
        return self.counts["problem"]

    @property
    def uncorrected(self) -> int:
        """Problems a repair left in the store (all of them when none was asked)."""
        if self.repair is None:
            return self.problem_count
        return sum(n for outcome, n in self.repairs.items() if outcome not in holds.CORRECTED)

    def problems(self) -> Iterator[dict[str, Any]]:
        """Every problem, in the order found, read back from the spool."""
        self.spool.flush()
        self.spool.seek(0)
        for line in self.spool:
            yield json.loads(line)

    def header(self) -> dict[str, Any]:
        """The document without its problems (schema ``fsck``, validated with them)."""
        checked = self.counts["verified"] + self.counts["size_checked"] + self.counts["partial"]
        return {
            "kind": KIND,
            "schema_version": SCHEMA_VERSION,
            "store": {
                "adapter": self.spec.adapter,
                "location": self.spec.describe(),
                "serde": self.serde,
                "serde_detected": self.serde_detected,
            },
            "entries": sum(self.counts.values()),
            "objects": sum(t.objects for t in self.totals.values()),
            "checked": checked,
            "counts": {status: self.counts[status] for status in STATUSES},
            "content_verifiable": catalogue.serde(self.serde).verifiable,
            "bytes": self.bytes,
            "problems_by_rule": dict(sorted(self.rules.items())),
            "totals": [_total_record(k, t) for k, t in sorted(self.totals.items())],
            "incomplete": self.incomplete,
            "read_bytes": self.read_bytes,
            "seconds": round(self.seconds, 6),
            "max_rate": {
                "bytes_per_s": self.rates.bytes_per_s,
                "objects_per_s": self.rates.objects_per_s,
            },
            "repair": None if self.repair is None else self._repair_record(self.repair),
        }

    def _repair_record(self, repair: Repair) -> dict[str, Any]:
        return {
            "quarantine": None if repair.quarantine is None else str(repair.quarantine),
            "outcomes": {outcome: self.repairs[outcome] for outcome in REPAIR_OUTCOMES},
            "repaired_by_rule": dict(sorted(self.repaired_by_rule.items())),
            "uncorrected": self.uncorrected,
        }

    def write_json(self, out: IO[str]) -> None:
        """The whole document, its problems streamed from the spool; each part is held to the
        schema on the way."""
        from lmckv.base.schemas import validate  # jsonschema: a tenth of a second to import

        head = self.header()
        validate({**head, "problems": []}, SCHEMA)
        text = json.dumps(head, indent=1, sort_keys=True)
        out.write(text[:-2] + ',\n "problems": [')
        for i, problem in enumerate(self.problems()):
            if i == 0:  # every record is made by ``add``: one of them stands for all
                validate({**head, "problems": [problem]}, SCHEMA)
            out.write(("," if i else "") + "\n  " + json.dumps(problem, sort_keys=True))
        out.write("\n ]\n}\n")

    def close(self) -> None:
        self.spool.close()


def _spool() -> IO[str]:
    """A file the problems stream to (deleted when closed)."""
    return tempfile.TemporaryFile("w+", encoding="utf-8")


def _total_record(key: tuple[str, int, int, str], total: Total) -> dict[str, Any]:
    model, kv_rank, group, salt = key
    world, rank, local_world, local_rank = split_kv_rank(kv_rank)
    return {
        "model_name": model,
        "kv_rank": kv_rank,
        "world_size": world,
        "global_rank": rank,
        "local_world_size": local_world,
        "local_rank": local_rank,
        "object_group_id": group,
        "cache_salt": salt,
        **{name: getattr(total, name) for name in Total.__dataclass_fields__},
    }


@dataclass(frozen=True)
class Settings:
    """The operator's options of one check."""

    object_bytes: dict[int | None, int] = field(default_factory=dict)
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES
    temp_age_s: float = DEFAULT_TEMP_AGE_S
    time_limit_s: float | None = None
    repair: Repair | None = None
    rates: Rates = field(default_factory=Rates)


def _detect(spec: StoreSpec, source: Source) -> str:
    """The serde of the first objects (named as the adapter names objects: another tool's
    entry says nothing of LMCache's serde)."""
    heads: list[tuple[bytes, int, bytes]] = []
    wanted = catalogue.DETECT_BYTES
    for page in source.pages():
        for entry in page:
            if entry.kind != "object" or entry.size == 0:
                continue
            key = key_of(spec.row.form, entry.name, spec.key_prefix)[0]
            if key is None:
                continue
            with (
                contextlib.suppress(ObjectGone, ObjectUnreadable, OSError),
                source.open(entry, wanted) as f,
            ):
                heads.append((f.read(wanted), entry.size, key.chunk_hash))
            if len(heads) >= DETECT_SAMPLE:
                return catalogue.detect_serde(heads).name
    return catalogue.detect_serde(heads).name


def _learn_sizes(spec: StoreSpec, source: Source, serde: catalogue.Serde) -> SizeLearner:
    """The first pass: every object's payload size, per group."""
    learner = SizeLearner()
    for page in source.pages():
        for entry in page:
            if entry.kind != "object" or entry.size == 0:
                continue
            key, _ = key_of(spec.row.form, entry.name, spec.key_prefix)
            if key is not None:
                learner.add((key.model_name, key.object_group_id), serde.payload_size(entry.size))
    return learner


def _plan(spec: StoreSpec, source: Source, settings: Settings, rates: Rates) -> tuple[Plan, bool]:
    detected = spec.serde is None
    serde_spec = spec.serde or SerdeSpec(_detect(spec, source))
    row = serde_spec.row
    if settings.repair is not None and not row.proves_damage:
        why = (
            f"the serde {row.name}'s frames are unknown to lmckv"
            if row.origin
            else "no serde lmckv knows was recognised in the store's objects"
        )
        raise RepairRefused(
            f"not repaired: {why}, and a size learned from the store proves no damage; name "
            "the serde (--serde or --l2-adapter)"
        )
    keys = None
    if row.check is Check.TAG and serde_spec.master_key_path is not None:
        keys = AesGcmKeys.from_file(serde_spec.master_key_path, serde_spec.aes_bits)
    sizes: dict[Group, SizeRule] = {}
    default = None
    if row.check not in (Check.BLOB, Check.FRAME):  # these frames record their own sizes
        given = settings.object_bytes
        if None in given:
            default = SizeRule(given[None], settings.chunk_tokens, learned=False)
        else:
            sizes = _learn_sizes(spec, source, row).rules(settings.chunk_tokens)
        for (model, group), _ in list(sizes.items()):
            if group in given:
                sizes[(model, group)] = SizeRule(given[group], settings.chunk_tokens, False)
    plan = Plan(
        spec, row, keys, sizes, default, settings.max_object_bytes, settings.temp_age_s,
        time.time(), settings.repair, rates,
    )  # fmt: skip
    return plan, detected


def check_store(
    spec: StoreSpec,
    settings: Settings | None = None,
    *,
    executor: Executor | None = None,
    workers: int = 1,
    progress: Callable[[int], None] | None = None,
    shared_clock: bool = True,
) -> Report:
    """Check every entry of the store; ``executor`` checks pages in other processes (a pool,
    or a Dask cluster's executor) with ``workers`` pages at once, else this process does.
    ``progress`` is told the entries checked after each page. ``shared_clock``: whether the
    workers pace their reads on one clock (else each takes a share of the rates).
    StoreUnreachable when the store cannot be listed; KeyFileError when the aesgcm key file
    cannot be used; RepairRefused before anything is read when a repair proves nothing."""
    settings = settings or Settings()
    started = time.monotonic()
    source = _source(spec)
    rates = settings.rates if shared_clock else settings.rates.share(workers)
    plan, detected = _plan(spec, source, settings, rates)
    report = Report(spec, plan.row.name, detected, repair=settings.repair, rates=settings.rates)
    deadline = None if settings.time_limit_s is None else time.monotonic() + settings.time_limit_s
    for verdicts in _checked_pages(plan, source.pages(), executor, workers):
        for verdict in verdicts:
            report.add(verdict)
        if progress is not None:
            progress(len(verdicts))
        if deadline is not None and time.monotonic() > deadline:
            report.incomplete = f"stopped by the time limit of {settings.time_limit_s} s"
            break
    report.seconds = time.monotonic() - started
    return report


def _checked_pages(
    plan: Plan, pages: Iterable[list[Entry]], executor: Executor | None, workers: int
) -> Iterator[list[Verdict]]:
    """The verdicts of each page, in order; at most ``workers + PAGES_AHEAD`` pages are
    submitted and not yet collected."""
    if executor is None:
        for page in pages:
            yield check_page(plan, page)
        return
    pending: list[Any] = []
    for page in pages:
        pending.append(executor.submit(check_page, plan, page))
        if len(pending) >= workers + PAGES_AHEAD:
            yield _result(pending.pop(0))
    for future in pending:
        yield _result(future)


def _result(future: Any) -> list[Verdict]:
    """The page's verdicts, waited for :data:`WAKE_S` at a time so that a signal's handler
    runs within that time whichever thread took the signal. Bounded as the page is: by its
    reads' own timeouts and the run's time limit."""
    while True:
        try:
            verdicts: list[Verdict] = future.result(timeout=WAKE_S)
            return verdicts
        except TimeoutError:
            if future.done():  # the page's own TimeoutError, not the wait's
                raise


def close_sources(spec: StoreSpec | None = None) -> None:
    """Close the readers this process opened (``spec``: that store's only)."""
    for counted in [k for k in list(_COUNTED) if spec is None or k[0] == spec]:
        _COUNTED.pop(counted, None)
    for key in [k for k in list(_SOURCES) if spec is None or k == spec]:
        source = _SOURCES.pop(key, None)
        if source is not None:
            with contextlib.suppress(OSError):
                source.close()


def default_jobs() -> int:
    return min(4, os.cpu_count() or 1)
