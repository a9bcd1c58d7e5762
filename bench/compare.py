"""Compare two results files: each throughput figure's change, a verdict, and a CI gate.

Rows are matched on ``op/impl/device/scope/dtype/case``. Each codec row is compared two
ways: in absolute time, and relative to its baseline measured in the same rounds of the
same run (upstream's row for the same op and scope, else for the same op in PER_TENSOR,
else the row's limit: memcpy, crc32, d2d or h2d), i.e. in units of that baseline's median
time. A time's spread is its interquartile interval (``q25_s`` to ``q75_s``; median +-
IQR/2 for rows without quartiles).

Verdict, as asv and nvbench decide it: when the base and head intervals overlap the change
is ``ambiguous`` (noise could explain it); a row is ``slower`` (``faster``) only when it is
so in absolute time *and* against its same-run baseline, so that a busier machine (which
slows the baseline too) or a noisy baseline alone cannot make a verdict. A ``slower`` row
whose median change exceeds its threshold in both comparisons (default 25%, 50% for the
``page16`` case; per-benchmark overrides by glob pattern) is a regression; regressions of
the gated implementations (default: reference) make ``compare`` exit 1, so CI can gate on
it. Limit rows, and rows with no baseline, are judged on absolute time alone; limits and
upstream are reported, not gated. ``--absolute`` drops the same-run comparison.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.results import LIMIT_IMPLS, load

DEFAULT_THRESHOLD = 0.25
KEY_FIELDS = ("op", "impl", "device", "scope", "dtype", "case")


def bench_id(row: Mapping[str, Any]) -> str:
    """``op/impl/device/scope/dtype/case`` (``-`` for a null field): what thresholds match."""
    return "/".join("-" if row[f] is None else str(row[f]) for f in KEY_FIELDS)


#: Built-in overrides: a 16-token page costs 50-500 us, mostly Python call overhead, which
#: moves with machine load far more than bytes do.
DEFAULT_OVERRIDES: tuple[tuple[str, float], ...] = (("*/page16", 0.5),)


@dataclass(frozen=True)
class Thresholds:
    """Default relative slowdown, then (glob pattern, slowdown) overrides; the last match wins."""

    default: float = DEFAULT_THRESHOLD
    overrides: tuple[tuple[str, float], ...] = DEFAULT_OVERRIDES

    def for_id(self, ident: str) -> float:
        """The threshold that applies to benchmark ``ident``."""
        value = self.default
        for pattern, threshold in self.overrides:
            if fnmatch.fnmatchcase(ident, pattern):
                value = threshold
        return value

    @classmethod
    def parse(cls, specs: Iterable[str]) -> Thresholds:
        """From ``--threshold`` values: ``0.3`` sets the default for every benchmark (dropping
        the built-in overrides), ``PATTERN=0.5`` overrides it where PATTERN matches."""
        default = DEFAULT_THRESHOLD
        overrides: list[tuple[str, float]] = list(DEFAULT_OVERRIDES)
        for spec in specs:
            pattern, sep, value = spec.rpartition("=")
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"threshold {spec!r}: {value!r} is not a number") from None
            if number < 0:
                raise ValueError(f"threshold {spec!r} is negative")
            if sep:
                overrides.append((pattern, number))
            else:
                default = number
                overrides = [o for o in overrides if o not in DEFAULT_OVERRIDES]
        return cls(default, tuple(overrides))


@dataclass(frozen=True)
class Stat:
    """Median and quartiles of a time (seconds) or of a time ratio."""

    median: float
    q25: float
    q75: float


def row_stat(row: Mapping[str, Any]) -> Stat:
    """A row's time: quartiles ``q25_s``/``q75_s`` when recorded, else median +- IQR/2."""
    if row.get("q25_s") is not None and row.get("q75_s") is not None:
        return Stat(row["median_s"], row["q25_s"], row["q75_s"])
    half = row["iqr_s"] / 2
    return Stat(row["median_s"], row["median_s"] - half, row["median_s"] + half)


def relative_stat(row: Mapping[str, Any], baseline: Mapping[str, Any]) -> Stat:
    """A row's time in units of its same-run baseline's median time."""
    mine, unit = row_stat(row), row_stat(baseline).median
    return Stat(mine.median / unit, mine.q25 / unit, mine.q75 / unit)


def verdict(base: Stat, head: Stat) -> str:
    """``ambiguous`` when the interquartile intervals overlap, else ``faster``/``slower``."""
    if head.q25 <= base.q75 and base.q25 <= head.q75:
        return "ambiguous"
    return "slower" if head.median > base.median else "faster"


def baseline_id(row: Mapping[str, Any]) -> list[str]:
    """Candidate same-run baselines of a row, best first: upstream's row for the same op and
    scope, upstream's PER_TENSOR row for the same op (the scopes upstream cannot decode),
    then the row's limit."""
    if row["impl"] in LIMIT_IMPLS:
        return []
    out = []
    if row["impl"] != "upstream":
        out.append(bench_id({**row, "impl": "upstream"}))
        out.append(bench_id({**row, "impl": "upstream", "scope": "PER_TENSOR"}))
    limit = row.get("limit")
    if limit:
        op = "crc32" if limit == "crc32" else "copy"
        out.append(bench_id({**row, "op": op, "impl": limit, "scope": None}))
    return out


@dataclass(frozen=True)
class Change:
    """One benchmark's comparison: head/base of the median time (``time_ratio``) and of the
    time relative to the same-run baseline ``relative_to`` (``change``)."""

    id: str
    base_median_s: float | None
    head_median_s: float | None
    time_ratio: float | None
    relative_to: str | None
    change: float | None
    verdict: str
    threshold: float
    regression: bool


def compare_rows(
    base: Iterable[Mapping[str, Any]],
    head: Iterable[Mapping[str, Any]],
    *,
    thresholds: Thresholds = Thresholds(),
    gated_impls: tuple[str, ...] = ("reference",),
    relative: bool = True,
) -> list[Change]:
    """Changes for every throughput row of either side (``missing``/``new`` when one-sided)."""
    base_rows = {bench_id(r): r for r in base if r.get("kind") == "throughput"}
    head_rows = {bench_id(r): r for r in head if r.get("kind") == "throughput"}
    changes = []
    for ident in sorted(base_rows.keys() | head_rows.keys()):
        b, h = base_rows.get(ident), head_rows.get(ident)
        threshold = thresholds.for_id(ident)
        if b is None or h is None:
            changes.append(
                Change(
                    ident,
                    None if b is None else b["median_s"],
                    None if h is None else h["median_s"],
                    None,
                    None,
                    None,
                    "new" if b is None else "missing",
                    threshold,
                    False,
                )
            )
            continue
        absolute = (row_stat(b), row_stat(h))
        against = next(
            (c for c in baseline_id(h) if relative and c in base_rows and c in head_rows), None
        )
        judged = [absolute]
        if against is not None:
            judged.append(
                (relative_stat(b, base_rows[against]), relative_stat(h, head_rows[against]))
            )
        calls = {verdict(bs, hs) for bs, hs in judged}
        call = calls.pop() if len(calls) == 1 else "ambiguous"
        ratios = [hs.median / bs.median for bs, hs in judged]
        gated = h["impl"] in gated_impls
        regression = gated and call == "slower" and min(ratios) > 1.0 + threshold
        changes.append(
            Change(
                ident,
                b["median_s"],
                h["median_s"],
                ratios[0],
                against,
                ratios[-1] if against is not None else None,
                call,
                threshold,
                regression,
            )
        )
    return changes


def format_table(changes: list[Change]) -> str:
    """A plain-text table, one benchmark per line, regressions marked ``REGRESSION``."""

    def pct(x: float | None) -> str:
        return f"{(x - 1) * 100:+.1f}%" if x is not None else "-"

    def ms(x: float | None) -> str:
        return f"{x * 1e3:.3f}ms" if x is not None else "-"

    lines = [
        f"{'benchmark':60} {'base':>11} {'head':>11} {'time':>8} {'vs same-run baseline':>30}"
        "  verdict"
    ]
    for c in changes:
        rel = f"{pct(c.change)} vs {c.relative_to.split('/')[1]}" if c.relative_to else "-"
        flag = f"  REGRESSION (> +{c.threshold * 100:.0f}%)" if c.regression else ""
        lines.append(
            f"{c.id:60} {ms(c.base_median_s):>11} {ms(c.head_median_s):>11} "
            f"{pct(c.time_ratio):>8} {rel:>30}  {c.verdict}{flag}"
        )
    return "\n".join(lines)


def summary(changes: list[Change]) -> dict[str, int]:
    """How many changes of each verdict, and how many regressions."""
    counts: dict[str, int] = {}
    for c in changes:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    counts["regressions"] = sum(c.regression for c in changes)
    return counts


def compare_files(
    base_path: Path,
    head_path: Path,
    *,
    thresholds: Thresholds,
    gated_impls: tuple[str, ...],
    relative: bool = True,
    json_out: Path | None = None,
) -> tuple[list[Change], str]:
    """Compare two results files; returns the changes and the printable report."""
    base_header, base_rows = load(base_path)
    head_header, head_rows = load(head_path)
    changes = compare_rows(
        base_rows, head_rows, thresholds=thresholds, gated_impls=gated_impls, relative=relative
    )
    notes = []
    for name in ("cpu_model", "gpu", "torch", "torch_threads"):
        if base_header["env"].get(name) != head_header["env"].get(name):
            notes.append(
                f"note: env.{name} differs ({base_header['env'].get(name)!r} vs "
                f"{head_header['env'].get(name)!r}): changes may reflect the machine"
            )
    counts = summary(changes)
    report = "\n".join(
        [
            f"base {base_path.name} ({base_header['mode']}), head {head_path.name} "
            f"({head_header['mode']}); verdicts on "
            + (
                "absolute times and times relative to same-run baselines"
                if relative
                else "absolute times"
            ),
            *notes,
            format_table(changes),
            "summary: " + ", ".join(f"{k} {v}" for k, v in counts.items()),
        ]
    )
    if json_out is not None:
        json_out.write_text(
            json.dumps(
                {
                    "base": str(base_path),
                    "head": str(head_path),
                    "relative": relative,
                    "gated_impls": list(gated_impls),
                    "summary": counts,
                    "changes": [asdict(c) for c in changes],
                },
                indent=1,
            )
        )
    return changes, report
