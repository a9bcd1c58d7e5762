"""The benchmark results file: JSON Lines, one file per run, never overwritten.

Format (schema version 2) is documented in ``bench/RESULTS.md``: line 1 is the header
record (``kind: "header"``, environment, machine record and ``machine_id``, schema
version), then one record per line of kind ``throughput``, ``accuracy``, ``skip`` or
``telemetry``, each stamped with the header's ``machine_id``. ``validate_record`` checks a record
against that format; ``ResultsWriter`` creates ``bench-<UTC stamp>-<commit7>.jsonl`` with
exclusive creation (a counter suffix is added when the name exists), so no run can replace
an earlier one, and flushes each record as it is written so an interrupted run keeps its rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from lmckv.bench.machine import machine_id
from lmckv.conformance.core.schemas import BENCH_SCHEMA_VERSION, SchemaError, enum, validate

#: Version of the results format; bumped when a reader of the previous version could misread
#: a file (2: machine record and ``machine_id``, rows measured in several processes).
#: Read from the schema's ``const`` (conformance/core/schemas/bench-row.schema.json).
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
DEVICES: tuple[str, ...] = enum(*_ROW, "throughput", "properties", "device")
SCOPES: tuple[str, ...] = tuple(
    v for v in enum(*_ROW, "throughput", "properties", "scope") if v is not None
)
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


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a results file, validated, header first."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SchemaError("bench-row", "$", f"not JSON: {exc}", location=where) from None
            if lineno == 1 and (not isinstance(record, dict) or record.get("kind") != "header"):
                raise SchemaError(
                    "bench-row", "$.kind", "first record is not the header", location=where
                )
            try:
                validate_record(record)
            except SchemaError as exc:
                raise exc.at(where) from None
            yield record


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, other records) of a results file."""
    records = list(read_records(path))
    if not records:
        raise SchemaError("bench-row", "$", "empty results file", location=str(path))
    return records[0], records[1:]
