"""The benchmark results file: JSON Lines, one file per run, never overwritten.

Format (schema version 2) is documented in ``bench/RESULTS.md``: line 1 is the header
record (``kind: "header"``, environment, machine record and ``machine_id``, schema
version), then one record per line of kind ``throughput``, ``accuracy``, ``skip`` or
``telemetry``, each stamped with the header's ``machine_id``. ``validate_record`` checks a record
against that format; ``ResultsWriter`` creates ``bench-<UTC stamp>-<commit7>.jsonl`` with
exclusive creation (a counter suffix is added when the name exists), so no run can replace
an earlier one, and flushes each record as it is written so an interrupted run keeps its rows.
:func:`read` is the one reader of these files (bench and the report use it), with an explicit
policy for record kinds newer than the schema (:class:`UnknownKinds`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from lmckv.base.schemas import (
    BENCH_SCHEMA_VERSION,
    SchemaError,
    bench_kinds,
    enum,
    validate,
)
from lmckv.base.untrusted_json import JSONLimits, UntrustedJSONError, loads, read_bounded

from .machine import machine_id
from .scopes import SCOPE_NAMES

#: Version of the results format; bumped when a reader of the previous version could misread
#: a file (2: machine record and ``machine_id``, rows measured in several processes).
#: Read from the schema's ``const`` (lmckv/base/schemas/bench-row.schema.json).
SCHEMA_VERSION = BENCH_SCHEMA_VERSION

_ROW = ("bench-row", "$defs")
#: Allowed values, read from the schema (``enum`` of each field).
THROUGHPUT_OPS: tuple[str, ...] = enum(*_ROW, "throughput", "properties", "op")
LIMIT_IMPLS: tuple[str, ...] = tuple(
    v for v in enum(*_ROW, "throughput", "properties", "limit") if v is not None
)
CODEC_IMPLS: tuple[str, ...] = tuple(
    v for v in enum(*_ROW, "throughput", "properties", "impl") if v not in LIMIT_IMPLS
)
SCOPES = SCOPE_NAMES
DTYPES: tuple[str, ...] = tuple(
    v for v in enum(*_ROW, "throughput", "properties", "dtype") if v is not None
)
FORMATS: tuple[str, ...] = enum(*_ROW, "accuracy", "properties", "fmt")
METRICS: tuple[str, ...] = enum(*_ROW, "accuracy", "properties", "metric")


def validate_record(record: Mapping[str, Any]) -> None:
    """Raise SchemaError unless ``record`` follows the bench-row schema (its kind's fields,
    types and allowed values; the header's version and ``env``).

    Records may carry extra keys (readers ignore them). Floats must be finite (JSON has no
    NaN or Infinity).
    """
    validate(record, "bench-row")


def results_name(started: datetime, git_commit: str | None, counter: int = 0) -> str:
    """``bench-<YYYYmmddTHHMMSSZ>-<commit7>[-<counter>].jsonl`` (commit7 "nocommit" if unknown)."""
    stamp = started.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    commit7 = git_commit[:7] if git_commit else "nocommit"
    suffix = f"-{counter}" if counter else ""
    return f"bench-{stamp}-{commit7}{suffix}.jsonl"


def results_order(path: Path) -> tuple[str, int]:
    """Where a file named by :func:`results_name` falls among runs made one after another
    in its folder: by start stamp, then by counter (a name without one comes first)."""
    parts = path.name.removesuffix(".jsonl").split("-")
    counter = parts[3] if len(parts) == 4 else "0"
    if len(parts) not in (3, 4) or parts[0] != "bench" or not counter.isdigit():
        raise ValueError(f"{path.name}: not a results file name (bench-STAMP-COMMIT[-N].jsonl)")
    return parts[1], int(counter)


class ResultsWriter:
    """Writes one run's results file; every record is validated before it is written."""

    def __init__(
        self,
        out_dir: Path,
        *,
        mode: str,
        env: Mapping[str, Any],
        machine: Mapping[str, Any],
        started: datetime | None = None,
        extra_header: Mapping[str, Any] | None = None,
    ) -> None:
        self.started = started or datetime.now(UTC)
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path, self._fh = _create_exclusive(out_dir, self.started, env.get("git_commit"))
        self.run_id = self.path.stem
        self.counts: dict[str, int] = {}
        self.machine_id = machine_id(dict(machine))
        header = {
            "kind": "header",
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "mode": mode,
            "started_utc": self.started.isoformat(timespec="seconds"),
            "env": dict(env),
            "machine": dict(machine),
            "machine_id": self.machine_id,
            **(extra_header or {}),
        }
        self.write(header)

    def write(self, record: Mapping[str, Any]) -> None:
        """Stamp ``machine_id`` (records after the header), validate and append one
        record; flushed at once."""
        if record.get("kind") != "header":
            record = {**record, "machine_id": self.machine_id}
        validate_record(record)
        self._fh.write(json.dumps(record, sort_keys=False, allow_nan=False) + "\n")
        self._fh.flush()
        kind = str(record["kind"])
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def write_all(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Write several records in order."""
        for record in records:
            self.write(record)

    def close(self) -> None:
        """Close the file (it stays on disk)."""
        self._fh.close()

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _create_exclusive(
    out_dir: Path, started: datetime, git_commit: str | None
) -> tuple[Path, IO[str]]:
    """Open a new results file with O_EXCL, adding a counter suffix while the name exists."""
    for counter in range(10_000):
        path = out_dir / results_name(started, git_commit, counter)
        try:
            return path, open(path, "x", encoding="utf-8")
        except FileExistsError:
            continue
    raise FileExistsError(f"no free results file name in {out_dir}")


class VersionMismatch(SchemaError):
    """A results file of another format version: one line naming both versions and the
    cure."""

    def __init__(self, version: object, location: str) -> None:
        super().__init__(
            "bench-row",
            "$.schema_version",
            f"results file version {version!r}; this lmckv reads version {SCHEMA_VERSION}: "
            "re-run lmckv bench run",
            location=location,
        )


class UnknownKinds(Enum):
    """What :func:`read` does with a record whose ``kind`` the bench-row schema does not
    define (one a newer lmckv writes)."""

    #: an error, like any other record off the schema: bench's own commands (compare,
    #: targets, gate-check) judge only files this version wrote
    REFUSE = "refuse"
    #: left out and counted in :attr:`BenchFile.skipped`: the report shows what it can
    SKIP = "skip"


@dataclass(frozen=True)
class BenchFile:
    """One results file as read: its header, its other records in order (each valid), and
    the record kinds left out under :attr:`UnknownKinds.SKIP`, with their counts."""

    path: Path
    header: dict[str, Any]
    records: list[dict[str, Any]]
    skipped: dict[str, int] = field(default_factory=dict)


def read(path: Path, *, unknown: UnknownKinds) -> BenchFile:
    """Read and validate a results file (see :func:`parse`); an unreadable file is a
    SchemaError naming it."""
    try:
        text = read_bounded(path, FILE_MAX_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError, UntrustedJSONError) as exc:
        raise SchemaError("bench-row", "$", f"cannot read ({exc})", location=str(path)) from None
    return parse(path, text.splitlines(), unknown=unknown)


#: What one bench row may hold (lmckv/base/untrusted_json.py); NaN as Python's json writes
#: it. A results file holds at most FILE_MAX_BYTES.
ROW_LIMITS = JSONLimits(max_bytes=16 << 20, allow_nan=True)
FILE_MAX_BYTES = 256 << 20


def parse(path: Path, lines: Iterable[str], *, unknown: UnknownKinds) -> BenchFile:
    """The records of the results file ``path`` whose text is ``lines``: the first is the
    header, of this format version; every record is an object with a ``kind`` and follows
    the bench-row schema; records of a kind the schema does not define are refused or
    skipped as ``unknown`` says. Every problem is a SchemaError at ``path:line``."""
    known = bench_kinds()
    header: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            record = loads(line, ROW_LIMITS, what="a bench row")
        except UntrustedJSONError as exc:
            raise SchemaError("bench-row", "$", f"not JSON ({exc})", location=where) from None
        if not isinstance(record, dict) or "kind" not in record:
            raise SchemaError(
                "bench-row", "$", "a record must be a JSON object with a 'kind'", location=where
            )
        if header is None:
            if record["kind"] != "header":
                raise SchemaError(
                    "bench-row", "$.kind", "first record must have kind 'header'", location=where
                )
            if "schema_version" in record and record["schema_version"] != SCHEMA_VERSION:
                raise VersionMismatch(record["schema_version"], where)
        elif record["kind"] not in known and unknown is UnknownKinds.SKIP:
            skipped[str(record["kind"])] += 1
            continue
        try:
            validate_record(record)
        except SchemaError as exc:
            raise exc.at(where) from None
        if header is None:
            header = record
        else:
            records.append(record)
    if header is None:
        raise SchemaError(
            "bench-row", "$", "empty results file (no header record)", location=str(path)
        )
    return BenchFile(path, header, records, dict(skipped))


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, other records) of a results file bench wrote: :func:`read` refusing
    unknown record kinds."""
    found = read(path, unknown=UnknownKinds.REFUSE)
    return found.header, found.records
