"""Read the two results formats (bench JSON Lines, conformance results JSON) into tables.

A bench file is JSON Lines whose first record has ``kind == "header"``; a conformance file is
one JSON object with a ``"tests"`` list. Every record and document is checked against its
schema (lmckv/base/schemas/, SCHEMAS.md) before it is tabled; bench files are read by
bench's one reader (bench/common/rows.py) with record kinds newer than the schema counted and
skipped.
Every problem in an input is a :class:`ReportInputError` naming the file (and line), never a
traceback from deep inside pandas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from lmckv.base.schemas import (
    RESULTS_VERSION,
    SchemaError,
    bench_fields,
    bench_kinds,
    enum,
    results_fields,
    results_lists,
    schema,
    validate,
)
from lmckv.base.untrusted_json import JSONLimits, UntrustedJSONError, loads, read_bounded

from ..bench.common.rows import BenchFile, UnknownKinds, VersionMismatch, parse
from ..bench.common.scopes import SCOPE_NAMES

#: The conformance results version this builder reads (the results schema's ``const``).
RESULTS_SCHEMA_VERSION = RESULTS_VERSION

# Columns of each table: the fields the schemas require (lmckv/base/schemas/).
BENCH_FIELDS: dict[str, tuple[str, ...]] = {
    kind: bench_fields(kind) for kind in bench_kinds() if kind != "header"
}
# Extensions the schema declares (quartiles, raw samples, bootstrap blocks...): kept, so that
# they survive into the CSV tables; null where a record lacks them.
BENCH_EXTENSIONS: dict[str, tuple[str, ...]] = {
    kind: tuple(
        f
        for f in schema("bench-row")["$defs"][kind].get("properties", {})
        if f not in ("kind", "machine_id") and f not in fields
    )
    for kind, fields in BENCH_FIELDS.items()
}
# Added to every bench table: which run and which machine a row comes from.
ROW_ORIGIN = ("run_id", "machine")
#: Optional fields of the results lists the report reads (None where a file lacks them).
OPTIONAL_CONFORMANCE_FIELDS: dict[str, tuple[str, ...]] = {"tests": ("observed",)}
CONFORMANCE_FIELDS: dict[str, tuple[str, ...]] = {
    name: results_fields(name) + OPTIONAL_CONFORMANCE_FIELDS.get(name, ())
    for name in results_lists()
}
OUTCOMES: tuple[str, ...] = enum("results", "$defs", "test", "properties", "outcome")
# The header's scale_scope field (ScaleScope values 0..3), in that order.
SCALE_SCOPES = SCOPE_NAMES


class ReportInputError(ValueError):
    """A results file that is not in the agreed format (the message names file and line)."""


@dataclass(frozen=True)
class BenchRun:
    """One ``bench-*.jsonl`` file: its header and one table per record kind."""

    #: the file as bench's reader read it (header, records, skipped kinds)
    file: BenchFile
    tables: dict[str, pd.DataFrame]

    @property
    def path(self) -> Path:
        return self.file.path

    @property
    def header(self) -> dict[str, Any]:
        return self.file.header

    @property
    def ignored_kinds(self) -> dict[str, int]:
        """Record kinds newer than the schema, left out, with their counts."""
        return self.file.skipped

    @property
    def run_id(self) -> str:
        return str(self.header["run_id"])

    @property
    def machine(self) -> str:
        """The machine this run measured (``machine_label`` of its header)."""
        return machine_label(self.header)

    @property
    def lmcache_release(self) -> str | None:
        """The LMCache release this run recorded (header ``env.lmcache``) as
        ``installed_release()`` writes one: ``lmcache 0.5.6``, or ``no lmcache`` where the run
        had none; None where the header records nothing."""
        env = self.header.get("env") or {}
        if "lmcache" not in env:
            return None
        return f"lmcache {env['lmcache']}" if env["lmcache"] else "no lmcache"

    def table(self, kind: str) -> pd.DataFrame:
        """Rows of one record kind, tagged with ``run_id`` and ``machine`` (empty frame, right
        columns, if none)."""
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
    #: ``lmckv bench e2e --model`` files (their header names the model): shown beside the
    #: bundled model's rows, never pooled with them
    models: list[BenchRun] = field(default_factory=list)

    def bench_table(self, kind: str) -> pd.DataFrame:
        """One record kind across all bench runs given as RESULTS (not the baseline)."""
        columns = (*BENCH_FIELDS[kind], *BENCH_EXTENSIONS[kind], *ROW_ORIGIN)
        return concat([run.table(kind) for run in self.bench], columns)

    def model_rows(self) -> list[tuple[str, int, pd.DataFrame, dict[str, str]]]:
        """(model label, primary context, e2e rows, skipped serdes: name -> reason) per
        ``lmckv bench e2e`` file."""
        columns = (*BENCH_FIELDS["e2e"], *BENCH_EXTENSIONS["e2e"], *ROW_ORIGIN)
        skip_columns = (*BENCH_FIELDS["skip"], *BENCH_EXTENSIONS["skip"], *ROW_ORIGIN)
        out = []
        for run in self.models:
            model = run.header["model"]
            config = (run.header.get("config") or {}).get("e2e") or {}
            label = f"{model['name']} (revision {model['revision']}, {model['dtype']})"
            context = int(config.get("context", 256))
            skips = serde_skips(concat([run.table("skip")], skip_columns))
            out.append((label, context, concat([run.table("e2e")], columns), skips))
        return out

    @property
    def machines(self) -> list[str]:
        """The machines of the bench runs, in input order, each once."""
        return list(dict.fromkeys(run.machine for run in self.bench))

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


def machine_record(header: dict[str, Any]) -> dict[str, Any]:
    """The header's machine record (version 2: ``machine``; else ``env.machine``; else {})."""
    for found in (header.get("machine"), (header.get("env") or {}).get("machine")):
        if isinstance(found, dict):
            return found
    return {}


def machine_label(header: dict[str, Any], machine_id: object = None) -> str:
    """A short name for the machine a bench row was measured on.

    The row's ``machine_id`` (else the header's, else the machine record's ``host_id``), then
    the hardware from the header's ``machine`` record (cpu_model, cpu_usable, gpu.name), else
    from ``env.machine`` or the older ``env`` fields (cpu_model, cpu_count, gpu.name): runs of
    different machines are never merged, and two runs of one machine share the name.
    """
    env: dict[str, Any] = header.get("env") or {}
    machine = machine_record(header)
    cpu = machine.get("cpu_model") or env.get("cpu_model") or "?"
    cores = machine.get("cpu_usable") or machine.get("cpu_count") or env.get("cpu_count") or "?"
    gpu = machine.get("gpu") if isinstance(machine.get("gpu"), dict) else env.get("gpu")
    label = f"{cpu} x{cores}"
    if isinstance(gpu, dict) and gpu.get("name"):
        label += f" + {gpu['name']}"
    host = next(
        (
            h
            for h in (machine_id, header.get("machine_id"), machine.get("host_id"))
            if isinstance(h, str) and h
        ),
        None,
    )
    return f"{host[:8]}: {label}" if host else label


def _validate(document: Any, schema_name: str, where: str) -> None:
    """Schema-check one document; a failure is a ReportInputError naming ``where``."""
    try:
        validate(document, schema_name)
    except SchemaError as exc:
        raise ReportInputError(
            f"{where}: {exc.problem} ({exc.schema} schema, at {exc.path})"
        ) from None


def _frame(records: list[dict[str, Any]], columns: tuple[str, ...]) -> pd.DataFrame:
    if not records:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return pd.DataFrame.from_records(records, columns=list(columns))


def _check_schema(value: Any, where: str, supported: int) -> None:
    """A version this builder does not read gets its own message, before the schema check."""
    if value != supported:
        raise ReportInputError(
            f"{where}: schema_version {value!r} (this report builder reads {supported})"
        )


def load_bench(path: Path, lines: list[str]) -> BenchRun:
    """Table a bench JSON Lines file (first record: the header), read by bench's one reader
    (:func:`bench.common.rows.parse`) with record kinds newer than the schema skipped and
    counted."""
    try:
        found = parse(path, lines, unknown=UnknownKinds.SKIP)
    except VersionMismatch as exc:
        raise ReportInputError(f"{exc.location}: {exc.problem}") from None
    except SchemaError as exc:
        raise ReportInputError(
            f"{exc.location}: {exc.problem} ({exc.schema} schema, at {exc.path})"
        ) from None
    header = found.header
    records: dict[str, list[dict[str, Any]]] = {kind: [] for kind in BENCH_FIELDS}
    for record in found.records:
        kind = record["kind"]
        row = {f: record[f] for f in BENCH_FIELDS[kind]}
        row.update({f: record.get(f) for f in BENCH_EXTENSIONS[kind]})
        row["machine_id"] = record.get("machine_id")
        records[kind].append(row)
    tables = {}
    for kind, fields in BENCH_FIELDS.items():
        columns = tuple(dict.fromkeys((*fields, *BENCH_EXTENSIONS[kind], "machine_id")))
        table = _frame(records[kind], columns)
        table["run_id"] = pd.Series([str(header["run_id"])] * len(table), dtype=object)
        # a row's own machine_id (when the writer sets one) names its machine; else the header's
        ids = table.pop("machine_id")
        table["machine"] = pd.Series([machine_label(header, i) for i in ids], dtype=object)
        tables[kind] = table
    return BenchRun(file=found, tables=tables)


def load_conformance(path: Path, document: Any) -> ConformanceRun:
    """Parse a conformance results JSON object."""
    if not isinstance(document, dict):
        raise ReportInputError(f"{path}: conformance results must be a JSON object")
    if "schema_version" in document:
        _check_schema(document["schema_version"], str(path), RESULTS_SCHEMA_VERSION)
    bad = sorted(
        {t.get("outcome") for t in document.get("tests") or [] if isinstance(t, dict)}
        - set(OUTCOMES),
        key=str,
    )
    if bad:
        raise ReportInputError(f"{path}: unknown test outcome(s) {bad}; expected {OUTCOMES}")
    _validate(document, "results", str(path))
    tables = {
        # .get: a list added after schema_version 1 (versions) may be absent
        name: _frame(
            [{f: item.get(f) for f in fields} for item in document.get(name) or []], fields
        )
        for name, fields in CONFORMANCE_FIELDS.items()
    }
    meta = {k: v for k, v in document.items() if k not in CONFORMANCE_FIELDS}
    return ConformanceRun(path=path, meta=meta, tables=tables)


#: What a results file may hold (lmckv/base/untrusted_json.py): a full conformance run is a
#: few MB; NaN as Python's json writes it.
RESULTS_LIMITS = JSONLimits(
    max_bytes=256 << 20, max_items=20_000_000, max_string_chars=16 << 20, allow_nan=True
)


def _json_or_none(text: str, what: str) -> Any:
    """``text`` parsed within RESULTS_LIMITS; None when it is not JSON; a ReportInputError
    when it is JSON past a limit (a bomb is refused, not guessed at)."""
    try:
        return loads(text, RESULTS_LIMITS, what=what)
    except UntrustedJSONError as exc:
        if exc.limit is None:
            return None
        raise ReportInputError(str(exc)) from None


def load_results(path: Path) -> BenchRun | ConformanceRun:
    """Detect a results file by content and parse it.

    Bench JSON Lines: the first non-empty line is an object with ``kind == "header"``.
    Conformance results: the whole file is one JSON object with a ``"tests"`` key.
    """
    try:
        text = read_bounded(path, RESULTS_LIMITS.max_bytes).decode("utf-8")
    except (OSError, UnicodeDecodeError, UntrustedJSONError) as exc:
        raise ReportInputError(f"{path}: cannot read ({exc})") from None
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), "")
    first_record = _json_or_none(first, f"{path} line 1")
    if isinstance(first_record, dict) and first_record.get("kind") == "header":
        return load_bench(path, lines)
    document = _json_or_none(text, str(path))
    if isinstance(document, dict) and "tests" in document:
        return load_conformance(path, document)
    raise ReportInputError(
        f"{path}: neither a bench results file (JSON Lines whose first record has "
        "kind 'header') nor a conformance results file (a JSON object with 'tests')"
    )


def load_inputs(results: list[Path], baseline: Path | None = None) -> ReportInputs:
    """Load every RESULTS file and the optional baseline bench file; a bench file whose
    header names a model (``lmckv bench e2e --model``) is one of ``models``."""
    bench: list[BenchRun] = []
    models: list[BenchRun] = []
    conformance: list[ConformanceRun] = []
    for path in results:
        loaded = load_results(path)
        if isinstance(loaded, BenchRun) and "model" in loaded.header:
            models.append(loaded)
        elif isinstance(loaded, BenchRun):
            bench.append(loaded)
        else:
            conformance.append(loaded)
    base = None
    if baseline is not None:
        loaded = load_results(baseline)
        if not isinstance(loaded, BenchRun):
            raise ReportInputError(f"{baseline}: --baseline must be a bench results file")
        base = loaded
    return ReportInputs(bench=bench, conformance=conformance, baseline=base, models=models)


def serde_skips(skips: pd.DataFrame) -> dict[str, str]:
    """The serdes whose end-to-end measurement a run skipped (skip rows with a ``serde``):
    name -> reason."""
    if skips.empty or "serde" not in skips:
        return {}
    rows = skips[skips["serde"].notna()]
    return {str(r.serde): str(r.reason) for r in rows.itertuples()}
