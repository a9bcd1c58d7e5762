"""Read the two results formats (bench JSON Lines, conformance results JSON) into tables.

The formats are the ones agreed for schema_version 1: a bench file is JSON Lines whose first
record has ``kind == "header"``; a conformance file is one JSON object with a ``"tests"`` list.
Every problem in an input is a :class:`ReportInputError` naming the file (and line), never a
traceback from deep inside pandas.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

SCHEMA_VERSION = 1

# Fields each bench record kind must carry (SCHEMAS: "Benchmark results").
BENCH_FIELDS: dict[str, tuple[str, ...]] = {
    "throughput": (
        "op",
        "impl",
        "device",
        "scope",
        "dtype",
        "case",
        "bytes",
        "rounds",
        "median_s",
        "iqr_s",
        "gbps",
        "limit",
        "ratio_to_limit",
        "ratio_to_upstream",
    ),
    "accuracy": ("scope", "data", "fmt", "metric", "value"),
    "skip": ("what", "reason"),
    "telemetry": ("t_s", "power_w", "util_pct"),
}
HEADER_FIELDS = ("schema_version", "run_id", "mode", "started_utc", "env")

# Fields of each list in a conformance results file (SCHEMAS: "Conformance results").
CONFORMANCE_FIELDS: dict[str, tuple[str, ...]] = {
    "impls": ("name", "kind", "version", "capabilities"),
    "rules": ("id", "level", "spec_anchor", "summary"),
    "tests": ("id", "rule", "level", "impl", "producer", "outcome", "reason"),
    "summary": ("impl", "level", "pass", "fail", "known_failure", "unexpected_pass", "skip"),
    "matrix": ("producer", "consumer", "cases", "pass", "fail", "known_failure"),
}
OUTCOMES = ("pass", "fail", "known_failure", "unexpected_pass", "skip")
# The header's scale_scope field (ScaleScope values 0..3), in that order.
SCALE_SCOPES = ("PER_TENSOR", "PER_LAYER_HEAD", "PER_PAGE_HEAD", "EXTERNAL")


def scope_rank(scope: object) -> int:
    """Sort key putting scopes in ScaleScope order, anything else after them."""
    return SCALE_SCOPES.index(scope) if scope in SCALE_SCOPES else len(SCALE_SCOPES)


class ReportInputError(ValueError):
    """A results file that is not in the agreed format (the message names file and line)."""


@dataclass(frozen=True)
class BenchRun:
    """One ``bench-*.jsonl`` file: its header and one table per record kind."""

    path: Path
    header: dict[str, Any]
    tables: dict[str, pd.DataFrame]
    ignored_kinds: dict[str, int] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return str(self.header["run_id"])

    def table(self, kind: str) -> pd.DataFrame:
        """Rows of one record kind, tagged with ``run_id`` (empty frame, right columns, if none)."""
        return self.tables[kind]


@dataclass(frozen=True)
class ConformanceRun:
    """One conformance results JSON file: one table per list in it."""

    path: Path
    meta: dict[str, Any]
    tables: dict[str, pd.DataFrame]


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report is built from."""

    bench: list[BenchRun]
    conformance: list[ConformanceRun]
    baseline: BenchRun | None = None

    def bench_table(self, kind: str) -> pd.DataFrame:
        """One record kind across all bench runs given as RESULTS (not the baseline)."""
        return concat([run.table(kind) for run in self.bench], (*BENCH_FIELDS[kind], "run_id"))

    def conformance_table(self, name: str) -> pd.DataFrame:
        """One list across all conformance results files, de-duplicated."""
        frames = [run.tables[name] for run in self.conformance]
        table = concat(frames, CONFORMANCE_FIELDS[name])
        key = {"impls": ["name"], "rules": ["id"]}.get(name)
        return table.drop_duplicates(subset=key, keep="first").reset_index(drop=True)


def concat(frames: list[pd.DataFrame], columns: tuple[str, ...]) -> pd.DataFrame:
    """Concatenate frames sharing ``columns``; an empty frame with those columns if none."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return pd.concat(frames, ignore_index=True)


def _require(record: dict[str, Any], fields: tuple[str, ...], where: str) -> None:
    missing = [f for f in fields if f not in record]
    if missing:
        raise ReportInputError(f"{where}: missing field(s) {', '.join(missing)}")


def _frame(records: list[dict[str, Any]], columns: tuple[str, ...]) -> pd.DataFrame:
    if not records:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return pd.DataFrame.from_records(records, columns=list(columns))


def _check_schema(value: Any, where: str) -> None:
    if value != SCHEMA_VERSION:
        raise ReportInputError(
            f"{where}: schema_version {value!r} (this report builder reads {SCHEMA_VERSION})"
        )


def load_bench(path: Path, lines: list[str]) -> BenchRun:
    """Parse a bench JSON Lines file (first record: the header)."""
    records: dict[str, list[dict[str, Any]]] = {kind: [] for kind in BENCH_FIELDS}
    ignored: Counter[str] = Counter()
    header: dict[str, Any] | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReportInputError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict) or "kind" not in record:
            raise ReportInputError(f"{where}: a record must be a JSON object with a 'kind'")
        kind = record["kind"]
        if header is None:
            if kind != "header":
                raise ReportInputError(f"{where}: first record must have kind 'header'")
            _require(record, HEADER_FIELDS, where)
            _check_schema(record["schema_version"], where)
            if not isinstance(record["env"], dict):
                raise ReportInputError(f"{where}: 'env' must be an object")
            header = record
        elif kind in BENCH_FIELDS:
            _require(record, BENCH_FIELDS[kind], where)
            records[kind].append({f: record[f] for f in BENCH_FIELDS[kind]})
        else:
            ignored[str(kind)] += 1
    if header is None:
        raise ReportInputError(f"{path}: empty bench file (no header record)")
    tables = {}
    for kind, fields in BENCH_FIELDS.items():
        table = _frame(records[kind], fields)
        table["run_id"] = pd.Series([str(header["run_id"])] * len(table), dtype=object)
        tables[kind] = table
    throughput = tables["throughput"]
    for column in ("bytes", "rounds", "median_s", "iqr_s", "gbps"):
        if not throughput.empty and not pd.api.types.is_numeric_dtype(throughput[column]):
            raise ReportInputError(f"{path}: throughput field '{column}' must be numeric")
    return BenchRun(path=path, header=header, tables=tables, ignored_kinds=dict(ignored))


def load_conformance(path: Path, document: Any) -> ConformanceRun:
    """Parse a conformance results JSON object."""
    if not isinstance(document, dict):
        raise ReportInputError(f"{path}: conformance results must be a JSON object")
    _require(document, ("schema_version", *CONFORMANCE_FIELDS), str(path))
    _check_schema(document["schema_version"], str(path))
    tables = {}
    for name, fields in CONFORMANCE_FIELDS.items():
        items = document[name]
        if not isinstance(items, list):
            raise ReportInputError(f"{path}: '{name}' must be a list")
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise ReportInputError(f"{path}: {name}[{index}] must be an object")
            _require(item, fields, f"{path}: {name}[{index}]")
        tables[name] = _frame([{f: item[f] for f in fields} for item in items], fields)
    bad = sorted(set(tables["tests"]["outcome"]) - set(OUTCOMES))
    if bad:
        raise ReportInputError(f"{path}: unknown test outcome(s) {bad}; expected {OUTCOMES}")
    meta = {k: v for k, v in document.items() if k not in CONFORMANCE_FIELDS}
    return ConformanceRun(path=path, meta=meta, tables=tables)


def load_results(path: Path) -> BenchRun | ConformanceRun:
    """Detect a results file by content and parse it.

    Bench JSON Lines: the first non-empty line is an object with ``kind == "header"``.
    Conformance results: the whole file is one JSON object with a ``"tests"`` key.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportInputError(f"{path}: cannot read ({exc})") from None
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), "")
    try:
        first_record = json.loads(first)
    except json.JSONDecodeError:
        first_record = None
    if isinstance(first_record, dict) and first_record.get("kind") == "header":
        return load_bench(path, lines)
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        document = None
    if isinstance(document, dict) and "tests" in document:
        return load_conformance(path, document)
    raise ReportInputError(
        f"{path}: neither a bench results file (JSON Lines whose first record has "
        "kind 'header') nor a conformance results file (a JSON object with 'tests')"
    )


def load_inputs(results: list[Path], baseline: Path | None = None) -> ReportInputs:
    """Load every RESULTS file and the optional baseline bench file."""
    bench: list[BenchRun] = []
    conformance: list[ConformanceRun] = []
    for path in results:
        loaded = load_results(path)
        if isinstance(loaded, BenchRun):
            bench.append(loaded)
        else:
            conformance.append(loaded)
    base = None
    if baseline is not None:
        loaded = load_results(baseline)
        if not isinstance(loaded, BenchRun):
            raise ReportInputError(f"{baseline}: --baseline must be a bench results file")
        base = loaded
    return ReportInputs(bench=bench, conformance=conformance, baseline=base)
