"""The benchmark results file: JSON Lines, one file per run, never overwritten.

Format (schema version 1) is documented in ``bench/RESULTS.md``: line 1 is the header
record (``kind: "header"``, environment, schema version), then one record per line of kind
``throughput``, ``accuracy``, ``skip`` or ``telemetry``. ``validate_record`` checks a record
against that format; ``ResultsWriter`` creates ``bench-<UTC stamp>-<commit7>.jsonl`` with
exclusive creation (a counter suffix is added when the name exists), so no run can replace
an earlier one, and flushes each record as it is written so an interrupted run keeps its rows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import IO, Any

#: Version of the results format; bumped when a reader of version 1 could misread a file.
SCHEMA_VERSION = 1

THROUGHPUT_OPS = (
    "encode",
    "parse",
    "decode_fp8",
    "decode_dequant",
    "quantize",
    "copy",
    "crc32",
    "alloc",
)
CODEC_IMPLS = ("reference", "upstream")
LIMIT_IMPLS = ("memcpy", "crc32", "alloc", "d2d", "h2d")
DEVICES = ("cpu", "cuda")
SCOPES = ("PER_TENSOR", "PER_LAYER_HEAD", "PER_PAGE_HEAD", "EXTERNAL")
DTYPES = ("float16", "bfloat16")
FORMATS = ("e4m3", "e5m2", "int8")
METRICS = (
    "rel_fro",
    "sqnr_db",
    "cosine",
    "max_err_over_bound",
    "saturated",
    "subnormal",
    "zeroed",
    "nan",
    "attn_rel_err",
    "bytes_per_token",
)

_NUM = (int, float)
_ENV_FIELDS: dict[str, tuple[type, ...]] = {
    "cpu_model": (str,),
    "cpu_count": (int,),
    "python": (str,),
    "torch": (str,),
    "platform": (str,),
    "git_commit": (str, type(None)),
    "lmcache": (str, type(None)),
    "gpu": (dict, type(None)),
}
_GPU_FIELDS: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "driver": (str,),
    "memory_total_bytes": (int,),
    "sm_clock_mhz": (int,),
    "mem_clock_mhz": (int,),
}
_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "header": {
        "schema_version": (int,),
        "run_id": (str,),
        "mode": (str,),
        "started_utc": (str,),
        "env": (dict,),
    },
    "throughput": {
        "op": (str,),
        "impl": (str,),
        "device": (str,),
        "scope": (str, type(None)),
        "dtype": (str, type(None)),
        "case": (str,),
        "bytes": (int,),
        "rounds": (int,),
        "median_s": _NUM,
        "iqr_s": _NUM,
        "gbps": _NUM,
        "limit": (str, type(None)),
        "ratio_to_limit": (*_NUM, type(None)),
        "ratio_to_upstream": (*_NUM, type(None)),
    },
    "accuracy": {
        "scope": (str,),
        "data": (str,),
        "fmt": (str,),
        "metric": (str,),
        "value": (*_NUM, type(None)),
    },
    "skip": {"what": (str,), "reason": (str,)},
    "telemetry": {"t_s": _NUM, "power_w": _NUM, "util_pct": _NUM},
}
_CHOICES: dict[str, dict[str, tuple[Any, ...]]] = {
    "header": {"mode": ("quick", "full")},
    "throughput": {
        "op": THROUGHPUT_OPS,
        "impl": CODEC_IMPLS + LIMIT_IMPLS,
        "device": DEVICES,
        "scope": (*SCOPES, None),
        "dtype": (*DTYPES, None),
        "limit": (*LIMIT_IMPLS, None),
    },
    "accuracy": {"fmt": FORMATS, "metric": METRICS},
}


class SchemaError(ValueError):
    """A record that does not follow the results format (bench/RESULTS.md)."""


def validate_record(record: Mapping[str, Any]) -> None:
    """Raise SchemaError unless ``record`` has its kind's fields, types and allowed values.

    Records may carry extra keys (readers ignore them); the header's ``env.gpu`` is checked
    field by field when present. Floats must be finite (JSON has no NaN or Infinity).
    """
    kind = record.get("kind")
    if kind not in _FIELDS:
        raise SchemaError(f"unknown record kind {kind!r}")
    for name, types in _FIELDS[kind].items():
        if name not in record:
            raise SchemaError(f"{kind} record lacks {name!r}")
        value = record[name]
        if isinstance(value, bool) or not isinstance(value, types):
            raise SchemaError(f"{kind}.{name} = {value!r} is not of type {types}")
        if isinstance(value, float) and not math.isfinite(value):
            raise SchemaError(f"{kind}.{name} = {value!r} is not finite")
        choices = _CHOICES.get(kind, {}).get(name)
        if choices is not None and value not in choices:
            raise SchemaError(f"{kind}.{name} = {value!r} not in {choices}")
    if kind == "header":
        if record["schema_version"] != SCHEMA_VERSION:
            raise SchemaError(f"schema_version {record['schema_version']} != {SCHEMA_VERSION}")
        _check_fields("env", record["env"], _ENV_FIELDS)
        if record["env"]["gpu"] is not None:
            _check_fields("env.gpu", record["env"]["gpu"], _GPU_FIELDS)


def _check_fields(where: str, obj: Mapping[str, Any], fields: dict[str, tuple[type, ...]]) -> None:
    for name, types in fields.items():
        if name not in obj:
            raise SchemaError(f"{where} lacks {name!r}")
        if isinstance(obj[name], bool) or not isinstance(obj[name], types):
            raise SchemaError(f"{where}.{name} = {obj[name]!r} is not of type {types}")


def results_name(started: datetime, git_commit: str | None, counter: int = 0) -> str:
    """``bench-<YYYYmmddTHHMMSSZ>-<commit7>[-<counter>].jsonl`` (commit7 "nocommit" if unknown)."""
    stamp = started.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
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
        started: datetime | None = None,
        extra_header: Mapping[str, Any] | None = None,
    ) -> None:
        self.started = started or datetime.now(timezone.utc)
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path, self._fh = _create_exclusive(out_dir, self.started, env.get("git_commit"))
        self.run_id = self.path.stem
        self.counts: dict[str, int] = {}
        header = {
            "kind": "header",
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "mode": mode,
            "started_utc": self.started.isoformat(timespec="seconds"),
            "env": dict(env),
            **(extra_header or {}),
        }
        self.write(header)

    def write(self, record: Mapping[str, Any]) -> None:
        """Validate and append one record; flushed at once."""
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
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SchemaError(f"{path}:{lineno}: not JSON: {exc}") from None
            if lineno == 1 and record.get("kind") != "header":
                raise SchemaError(f"{path}:1: first record is not the header")
            try:
                validate_record(record)
            except SchemaError as exc:
                raise SchemaError(f"{path}:{lineno}: {exc}") from None
            yield record


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, other records) of a results file."""
    records = list(read_records(path))
    if not records:
        raise SchemaError(f"{path}: empty results file")
    return records[0], records[1:]
