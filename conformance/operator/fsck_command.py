"""``lmckv fsck``: check a store LMCache writes (SPEC.md "A store", rules STORE-*), on disk, in
Redis or in S3.

    lmckv fsck --l2-adapter '{"type": "fs", "base_path": "/data/l2", "serde": {"type": "fp8"}}'
    lmckv fsck /data/l2                            # an fs store; the serde is detected
    lmckv fsck redis://127.0.0.1:6379/0            # a resp store
    lmckv fsck s3://bucket --endpoint http://127.0.0.1:9000

    lmckv fsck /data/l2 --serde fp8 --repair --quarantine /data/l2-quarantine --max-rate 200M

Prints what the store holds (totals per model, kv_rank, object group and cache_salt) and every
problem with its rule; ``--json PATH`` writes the report (schema ``fsck``; ``-`` for standard
output). ``--repair`` removes the objects proven damaged that LMCache would serve (a file
store's ``--quarantine DIR`` keeps them there), each only if it is still the bytes judged
(SPEC.md "Repairing a store"); ``--max-rate`` and ``--max-objects-rate`` pace the reads.

Exit status, in e2fsck's spirit:

- 0: no problem;
- 1: problems found; with ``--repair``, every one of them corrected (removed, quarantined, or
  rewritten or removed by a writer since it was judged): the store serves none of them;
- 4: with ``--repair``, problems left in the store (entries that are no object of the store,
  objects that cannot be read, a removal that failed);
- 2: usage, a store that cannot be listed, a repair that proves nothing (a serde lmckv does not
  know), or an output that cannot be written (found out before the check where it can be:
  the report goes to a temporary file beside PATH, renamed over it at the end);
- 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).

Each error is one line on standard error, every worker stopped. The checking lives in
``lmckv.conformance.store``; this module parses, shows progress and prints.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from lmckv.base.untrusted_text import bare, shown

from ..store import catalogue, fsck_metrics, pace
from ..store.framing import KeyFileError
from ..store.fsck import (
    Repair,
    RepairRefused,
    Report,
    Settings,
    check_store,
    close_sources,
    default_jobs,
)
from ..store.locations import FileLocation, StoreSpecError
from ..store.serde_plugins import PluginError, load_all
from ..store.sizes import DEFAULT_CHUNK_TOKENS
from ..store.sources import StoreUnreachable
from ..store.spec import AES_BITS, SerdeSpec, StoreSpec, from_l2_adapter, from_target

EXIT_CLEAN, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
#: With ``--repair``: problems found and every one corrected (e2fsck's 1), or some left (4).
EXIT_CORRECTED, EXIT_UNCORRECTED = 1, 4
#: Ended by a signal: 128 + its number, as a shell reports it (``aws s3 ls`` exits 130 on
#: Ctrl-C).
EXIT_INTERRUPTED, EXIT_TERMINATED = 128 + signal.SIGINT, 128 + signal.SIGTERM


#: The grace past ``--time-limit`` before a run is stopped wherever it is (a read that a
#: server trickles byte by byte outlives every per-read timeout): this fraction of the
#: limit, and at least GRACE_MIN_S.
GRACE_FRACTION, GRACE_MIN_S = 0.1, 2.0
#: Seconds a Dask scheduler gets to answer the connection.
SCHEDULER_CONNECT_S = 30.0


class Terminated(Exception):
    """SIGTERM, raised in the main thread so that the run ends as it does on Ctrl-C."""


class OutOfTime(Exception):
    """``--time-limit`` and its grace passed (SIGALRM, raised in the main thread: a blocking
    read is interrupted, PEP 475)."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


#: Whether a SIGALRM stops the run (cleared as the run ends, so that a late one does not).
_TIMED = [False]


def _out_of_time(signum: int, frame: object) -> None:
    if _TIMED[0]:
        _TIMED[0] = False
        raise OutOfTime


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lmckv fsck",
        description="Check a store LMCache writes: every name an ObjectKey's under the "
        "adapter's form, every object what its serde writes (sizes for raw and fp8, the "
        "aesgcm tag with the key file, LMCKV blobs), totals per model, kv_rank, object group "
        "and cache_salt. Exit status: 0 clean, 1 problems (with --repair: all corrected), 4 "
        "problems left by --repair, 2 usage or store unreachable.",
    )
    parser.add_argument(
        "target", nargs="?", metavar="STORE",
        help="DIR (fs), redis://HOST:PORT[/DB] (resp) or s3://BUCKET[/PREFIX] (s3)",
    )  # fmt: skip
    parser.add_argument(
        "--l2-adapter", metavar="JSON", help="the adapter spec exactly as LMCache takes it"
    )
    parser.add_argument("--endpoint", metavar="URL", help="the S3 endpoint of s3://BUCKET")
    parser.add_argument(
        "--serde", choices=catalogue.checkable_serdes(), help="the serde of a STORE given short"
    )
    parser.add_argument(
        "--key-file", type=Path, help="a serde with a key file (aesgcm): LMCache's master_key_path"
    )
    parser.add_argument("--aes-bits", type=int, choices=AES_BITS, default=128)
    parser.add_argument(
        "--object-bytes", action="append", default=[], metavar="[GROUP=]N",
        help="content bytes of a full chunk (of object group GROUP, in hex); default: learned",
    )  # fmt: skip
    parser.add_argument("--chunk-tokens", type=int, default=DEFAULT_CHUNK_TOKENS, metavar="T")
    parser.add_argument("--max-object-bytes", type=int, default=1 << 30, metavar="N")
    parser.add_argument("--temp-age", type=float, default=600.0, metavar="S")
    parser.add_argument(
        "--time-limit", type=float, default=None, metavar="S",
        help="stop checking after S seconds (the report says it is incomplete); a run still "
        "going at S plus a grace (a server that answers too slowly) ends in one line, exit 2",
    )  # fmt: skip
    parser.add_argument("--jobs", type=int, default=None, metavar="N", help="worker processes")
    parser.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler's address")
    parser.add_argument("--json", metavar="PATH", help="write the report as JSON ('-': stdout)")
    parser.add_argument(
        "--metrics", type=Path, metavar="FILE",
        help="write the run's counts as a Prometheus text file (node_exporter's textfile "
        "collector), atomically",
    )  # fmt: skip
    parser.add_argument(
        "--repair", action="store_true",
        help="remove the objects proven damaged that LMCache would serve (size, emptiness, "
        "frame, tag, hash or CRC failures, old unfinished writes), each only if it is still "
        "the bytes judged; foreign entries are reported, never touched",
    )  # fmt: skip
    parser.add_argument(
        "--quarantine", type=Path, metavar="DIR",
        help="with --repair on a file store: move the damaged files to DIR (a folder on the "
        "same file system, outside the store) instead of removing them",
    )  # fmt: skip
    parser.add_argument(
        "--max-rate", type=_rate, metavar="BYTES_PER_S",
        help="read at most this many bytes per second from the store (suffixes k, M, G, or "
        "Ki, Mi, Gi), all workers together",
    )  # fmt: skip
    parser.add_argument(
        "--max-objects-rate", type=_rate, metavar="N", help="read at most N objects per second"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--serde-plugin", action="append", default=[], metavar="MODULE[:FUNCTION]",
        help="import MODULE (and call FUNCTION) first: a package that registers serdes with "
        "LMCache's factory, so that a spec may name them (content not checked; may repeat)",
    )  # fmt: skip
    return parser


class UsageError(ValueError):
    """A command line that names no store, or names one twice."""


#: The suffixes of a rate: SI and binary multiples.
RATE_SUFFIXES = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def _rate(text: str) -> float:
    """A positive rate with an optional suffix (argparse's type: ValueError on others)."""
    number = text.rstrip("kMGi")
    factor = RATE_SUFFIXES.get(text[len(number) :])
    try:
        value = float(number) * factor if factor is not None else None
    except ValueError:
        value = None
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r}: a number, with k, M, G, Ki, Mi or Gi after it")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a rate is positive and finite")
    return value


def _object_bytes(values: list[str]) -> dict[int | None, int]:
    out: dict[int | None, int] = {}
    for value in values:
        group, sep, number = value.rpartition("=")
        try:
            size = int(number)
            key = int(group, 16) if sep else None
        except ValueError:
            raise UsageError(f"--object-bytes {value!r}: expected N or GROUP=N") from None
        if size <= 0:
            raise UsageError(f"--object-bytes {value!r}: a size is positive")
        out[key] = size
    return out


def store_spec(args: argparse.Namespace) -> StoreSpec:
    """The store the command line names (StoreSpecError, UsageError)."""
    if (args.l2_adapter is None) == (args.target is None):
        raise UsageError("name the store once: STORE or --l2-adapter JSON")
    if args.l2_adapter is not None:
        if args.serde or args.key_file or args.endpoint:
            raise UsageError("--serde, --key-file and --endpoint go with STORE, not the spec")
        return from_l2_adapter(args.l2_adapter)
    spec = from_target(args.target, args.endpoint)
    serde = args.serde
    if args.key_file is not None:  # the one serde that takes a key file, unless named
        keyed = [s.name for s in catalogue.SERDES.values() if s.key_file]
        serde = serde or (keyed[0] if len(keyed) == 1 else None)
        if serde not in keyed:
            raise UsageError(f"--key-file goes with a serde that takes one ({', '.join(keyed)})")
    if serde is None:
        return spec
    return StoreSpec(spec.adapter, spec.location, SerdeSpec(serde, args.key_file, args.aes_bits))


def settings(args: argparse.Namespace) -> Settings:
    for name in ("chunk_tokens", "max_object_bytes", "jobs"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if args.time_limit is not None and not args.time_limit > 0:
        raise UsageError(f"--time-limit must be > 0, got {args.time_limit}")
    return Settings(
        _object_bytes(args.object_bytes), args.chunk_tokens, args.max_object_bytes,
        args.temp_age, args.time_limit, _repair(args),
        pace.Rates(args.max_rate, args.max_objects_rate),
    )  # fmt: skip


def _repair(args: argparse.Namespace) -> Repair | None:
    """The repair asked; UsageError for a quarantine that cannot hold the store's files."""
    if not args.repair:
        if args.quarantine is not None:
            raise UsageError("--quarantine goes with --repair")
        return None
    if args.quarantine is None:
        return Repair()
    spec = store_spec(args)
    location = spec.location
    if not isinstance(location, FileLocation):
        raise UsageError(f"--quarantine is for a file store, not a {spec.adapter} store")
    folder = args.quarantine
    try:
        here, there = os.stat(folder), os.stat(location.base_path)
    except OSError as exc:
        raise UsageError(f"--quarantine {folder}: {exc.strerror}") from None
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"--quarantine {folder}: not a folder this user can write")
    if here.st_dev != there.st_dev:
        raise UsageError(
            f"--quarantine {folder}: on another file system than the store (a file is moved "
            "there by a rename)"
        )
    base, inside = Path(location.base_path).resolve(), folder.resolve()
    if inside == base or base in inside.parents:
        raise UsageError(f"--quarantine {folder}: inside the store")
    return Repair(folder.resolve())


@contextlib.contextmanager
def _executor(args: argparse.Namespace) -> Iterator[tuple[Executor | None, int]]:
    """Where pages are checked: a Dask cluster, a pool of processes (pacing their reads on
    one clock), or this process."""
    if args.scheduler:
        with _dask_client(args.scheduler) as client:
            workers = sum(client.nthreads().values()) or 1
            yield client.get_executor(), workers
        return
    jobs = args.jobs or default_jobs()
    if jobs == 1:
        yield None, 1
        return
    # Spawned, not forked: the caller may hold threads (a store client's, LMCache's, a test
    # runner's), and a child forked while one of them holds a lock waits on it forever.
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        jobs, mp_context=context, initializer=_worker_init,
        initargs=(pace.shared_clock(context),),
    )  # fmt: skip
    try:
        yield pool, jobs
    except BaseException:
        # Interrupted or failed: no page is waited for (one may be stuck on a server).
        manager: Any = getattr(pool, "_executor_manager_thread", None)
        pool.shutdown(wait=False, cancel_futures=True)
        for child in multiprocessing.active_children():
            child.kill()
            child.join(5)
        # The pool's manager thread ends once its workers are gone; it is waited for, so that
        # Python's exit hook does not wake it while it closes its pipe (in 3.11 the hook's
        # write can meet the closed pipe: "Exception ignored ... Bad file descriptor").
        if manager is not None:
            manager.join(5)
        raise
    pool.shutdown()


@contextlib.contextmanager
def _dask_client(address: str) -> Iterator[Any]:
    """A client of the Dask scheduler at ``address``, connected within
    :data:`SCHEDULER_CONNECT_S` (a server that accepts the connection and never answers as a
    scheduler would hold Dask's handshake forever): StoreUnreachable otherwise. The run's
    own ``--time-limit`` timer goes on counting."""
    from distributed import Client

    left, _ = signal.getitimer(signal.ITIMER_REAL)  # of --time-limit; 0: none
    bound = min(left, SCHEDULER_CONNECT_S) if left else SCHEDULER_CONNECT_S
    start = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, bound)
    _TIMED[0] = True
    try:
        client = Client(address, timeout=f"{SCHEDULER_CONNECT_S}s")  # type: ignore[no-untyped-call]
    except OutOfTime:
        if left and left <= SCHEDULER_CONNECT_S:
            raise  # the run's own limit
        why = f"{address} did not answer as a Dask scheduler within {SCHEDULER_CONNECT_S:.0f} s"
        raise StoreUnreachable(why) from None
    signal.setitimer(signal.ITIMER_REAL, 0)
    rest = left - (time.monotonic() - start)
    with client:
        if left and rest <= 0:
            raise OutOfTime
        if left:
            signal.setitimer(signal.ITIMER_REAL, rest)
        yield client


def _worker_init(clock: Any) -> None:
    """A pool worker leaves Ctrl-C and SIGTERM to the run (the run stops it), and paces its
    reads on the run's clock."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    pace.use_clock(clock)


def _progress(
    show: bool, rates: pace.Rates
) -> tuple[Callable[[int], None] | None, Callable[[], None]]:
    """A progress bar on standard error (tqdm, the ``bench`` extra) when asked and installed;
    it names the pace asked."""
    if not show:
        return None, lambda: None
    try:
        from tqdm import tqdm
    except ImportError:
        return None, lambda: None
    bar: Any = tqdm(unit="entry", file=sys.stderr, leave=False)
    if rates:
        bar.set_postfix_str(f"paced to {rates.describe()}")
    return bar.update, bar.close


def _takes_key_file(serde: str) -> bool:
    row = catalogue.SERDES.get(serde)
    return row is not None and row.key_file


def format_report(report: Report) -> str:
    """The summary a person reads: the store, the counts, the totals, the first problems."""
    head = report.header()
    store, counts = head["store"], head["counts"]
    detected = ""
    if store["serde_detected"]:
        how = "not recognised in" if store["serde"] == catalogue.UNKNOWN.name else "detected from"
        detected = f" ({how} the objects' first bytes)"
    lines = [
        f"{store['adapter']} store {shown(store['location'])}, serde {store['serde']}{detected}",
        f"{head['entries']} entries, {head['objects']} objects, {head['bytes']} bytes: "
        f"{counts['verified']} verified, {counts['size_checked']} size checked, "
        f"{counts['partial']} partial chunks, {counts['problem']} problems, "
        f"{counts['gone']} gone while checked, {counts['in_flight']} writes in flight",
    ]
    row = catalogue.SERDES.get(store["serde"])
    if row is not None and row.origin and row.check is catalogue.Check.SIZE:
        lines.append(
            f"  unknown serde, content not checked: {store['serde']} comes from "
            f"{shown(row.origin)} and lmckv knows nothing of its frames; only sizes were checked"
        )
    elif store["serde"] == catalogue.UNKNOWN.name:
        lines.append(
            "  unknown serde, content not checked: no frame of a serde lmckv knows was "
            "recognised (raw and fp8 objects, and a serde without a row in lmckv's catalogue, "
            "look alike); only sizes were checked. Name the serde: --serde or --l2-adapter"
        )
    elif not head["content_verifiable"]:
        what = "frames' structure" if row and row.check is catalogue.Check.FRAME else "sizes"
        lines.append(
            f"  {store['serde']} objects carry no checksum: their content cannot be verified, "
            f"only their {what} (a changed byte goes unseen)"
        )
    elif counts["verified"] == 0 and head["objects"] and _takes_key_file(store["serde"]):
        lines.append(f"  {store['serde']} tags not verified: give the key file (--key-file)")
    for t in head["totals"]:
        salt = f" salt {shown(t['cache_salt'])}" if t["cache_salt"] else ""
        lines.append(
            f"  {shown(t['model_name'])} kv_rank {t['kv_rank']:#010x} group "
            f"{t['object_group_id']:x}{salt}: {t['objects']} objects, {t['bytes']} bytes "
            f"({t['verified']} verified, {t['size_checked']} size checked, {t['partial']} "
            f"partial, {t['problems']} problems)"
        )
    if head["incomplete"]:
        lines.append(f"incomplete: {head['incomplete']}")
    if head["max_rate"]["bytes_per_s"] or head["max_rate"]["objects_per_s"]:
        rate = head["read_bytes"] / head["seconds"] if head["seconds"] else 0.0
        lines.append(
            f"paced to {report.rates.describe()}: read {head['read_bytes']} bytes in "
            f"{head['seconds']:.1f} s ({rate:.0f} B/s)"
        )
    if (repair := head["repair"]) is not None:
        outcomes = repair["outcomes"]
        where = f" to {shown(repair['quarantine'])}" if repair["quarantine"] else ""
        lines.append(
            f"repair: {outcomes['removed']} removed, {outcomes['quarantined']} quarantined"
            f"{where}, {outcomes['changed']} rewritten since judged (left), {outcomes['gone']} "
            f"gone, {outcomes['failed']} failed, {outcomes['left']} not an object to remove "
            f"(left); {repair['uncorrected']} problems left"
        )
    lines.append(f"{report.problem_count} problems" + (":" if report.problem_count else ""))
    lines += [
        f"  {v.rule}  {shown(v.name)}: {v.message}" + (f" [{v.repair}]" if v.repair else "")
        for v in report.first_problems
    ]
    if report.problem_count > len(report.first_problems):
        lines.append(f"  ... {report.problem_count - len(report.first_problems)} more (--json)")
    return "\n".join(lines)


def _say(text: object) -> None:
    """One line on standard error (a server's or a file's text shown as data)."""
    print(f"lmckv fsck: {bare(str(text))}", file=sys.stderr)


def main(argv: list[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_CLEAN
    previous = signal.signal(signal.SIGTERM, _terminate)
    alarm = signal.signal(signal.SIGALRM, _out_of_time)
    if args.time_limit is not None and args.time_limit > 0:
        grace = max(GRACE_MIN_S, GRACE_FRACTION * args.time_limit)
        _TIMED[0] = True
        signal.setitimer(signal.ITIMER_REAL, args.time_limit + grace)
    try:
        return _run(args)
    except KeyboardInterrupt:
        _say("interrupted")
        return EXIT_INTERRUPTED
    except Terminated:
        _say("terminated")
        return EXIT_TERMINATED
    except OutOfTime:
        _say(f"stopped: --time-limit {args.time_limit} s and its grace passed (a server too slow)")
        return EXIT_USAGE
    finally:
        _TIMED[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, alarm)
        signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace) -> int:
    try:
        load_all(args.serde_plugin)
        spec, chosen = store_spec(args), settings(args)
    except (StoreSpecError, UsageError, PluginError) as exc:
        _say(exc)
        return EXIT_USAGE
    try:
        out = _Output(args.json) if args.json not in (None, "-") else None
    except OSError as exc:
        _say(f"cannot write the report to {args.json}: {exc.strerror or exc}")
        return EXIT_USAGE
    try:
        if args.metrics is not None:
            fsck_metrics.check_writable(args.metrics)
    except fsck_metrics.MetricsPathError as exc:
        if out is not None:
            out.discard()
        _say(exc)
        return EXIT_USAGE
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if out is not None:
            stack.callback(out.discard)
        update, done = _progress(not args.no_progress and sys.stderr.isatty(), chosen.rates)
        try:
            with _executor(args) as (executor, workers):
                report = check_store(
                    spec, chosen, executor=executor, workers=workers, progress=update,
                    shared_clock=not args.scheduler,
                )  # fmt: skip
            _TIMED[0] = False  # checked: writing the report is not timed
            signal.setitimer(signal.ITIMER_REAL, 0)
        except (StoreUnreachable, KeyFileError, RepairRefused, OSError) as exc:
            _say(exc)
            return EXIT_USAGE
        finally:
            done()
            close_sources()
        stack.callback(report.close)
        try:
            if args.metrics is not None:
                fsck_metrics.write(report, args.metrics, time.monotonic() - started, time.time())
            if args.json == "-":
                report.write_json(sys.stdout)
            else:
                print(format_report(report))
                if out is not None:
                    out.write(report)
        except OSError as exc:
            _say(f"cannot write the report: {exc.strerror or exc}")
            return EXIT_USAGE
    if not report.problem_count:
        return EXIT_CLEAN
    if args.repair:
        return EXIT_UNCORRECTED if report.uncorrected else EXIT_CORRECTED
    return EXIT_PROBLEMS


class _Output:
    """``--json PATH``: a temporary file beside PATH, made before the check (an output that
    cannot be written is known before the store is read), renamed over PATH when the report
    is whole, removed otherwise."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        fd, temp = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=".part", dir=self.path.parent
        )
        self.temp = Path(temp)
        self.file = os.fdopen(fd, "w", encoding="utf-8")

    def write(self, report: Report) -> None:
        report.write_json(self.file)
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self.temp, self.path)

    def discard(self) -> None:
        self.file.close()
        self.temp.unlink(missing_ok=True)
