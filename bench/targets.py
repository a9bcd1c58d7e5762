"""The reference's performance targets, read from a results file.

- ``encode_vs_upstream``: reference encode GB/s >= 2x upstream's (same case, scope, dtype).
- ``decode_fp8_vs_crc32``: reference parse+decode keeping FP8 (``decode_fp8``) GB/s >=
  0.65x of ``zlib.crc32`` GB/s over the same blobs (same case and dtype, CPU).
- ``cuda_quantize_vs_d2d``: reference CUDA ``quantize`` GB/s >= 0.5x device-to-device copy
  (its ``ratio_to_limit``).

Each target is checked on every matching row; a case passes when its worst row passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

TARGETS = {
    "encode_vs_upstream": 2.0,
    "decode_fp8_vs_crc32": 0.65,
    "cuda_quantize_vs_d2d": 0.5,
}


@dataclass(frozen=True)
class TargetCheck:
    """One target on one case: the worst and best ratio over its rows."""

    target: str
    case: str
    goal: float
    worst: float
    best: float
    worst_row: str
    rows: int

    @property
    def passed(self) -> bool:
        """The worst row meets the goal."""
        return self.worst >= self.goal


def _ratios(records: list[Mapping[str, Any]]) -> dict[str, list[tuple[str, float, str]]]:
    """target -> [(case, ratio, row description)]."""
    tp = [r for r in records if r.get("kind") == "throughput"]
    crc = {(r["case"], r["dtype"]): r["gbps"] for r in tp if r["impl"] == "crc32"}
    out: dict[str, list[tuple[str, float, str]]] = {name: [] for name in TARGETS}
    for r in tp:
        if r["impl"] != "reference":
            continue
        where = f"{r['op']} {r['device']} {r['scope']} {r['dtype']}"
        if r["op"] == "encode" and r["device"] == "cpu" and r["ratio_to_upstream"] is not None:
            out["encode_vs_upstream"].append((r["case"], r["ratio_to_upstream"], where))
        if r["op"] == "decode_fp8" and r["device"] == "cpu" and (r["case"], r["dtype"]) in crc:
            ratio = r["gbps"] / crc[(r["case"], r["dtype"])]
            out["decode_fp8_vs_crc32"].append((r["case"], ratio, where))
        if r["op"] == "quantize" and r["device"] == "cuda" and r["ratio_to_limit"] is not None:
            out["cuda_quantize_vs_d2d"].append((r["case"], r["ratio_to_limit"], where))
    return out


def check_targets(records: Iterable[Mapping[str, Any]]) -> list[TargetCheck]:
    """Every target on every case that has rows for it."""
    checks = []
    for target, rows in _ratios(list(records)).items():
        for case in dict.fromkeys(c for c, _, _ in rows):
            mine = [(ratio, where) for c, ratio, where in rows if c == case]
            worst = min(mine)
            checks.append(
                TargetCheck(
                    target,
                    case,
                    TARGETS[target],
                    worst[0],
                    max(r for r, _ in mine),
                    worst[1],
                    len(mine),
                )
            )
    return checks


def format_checks(checks: list[TargetCheck]) -> str:
    """One line per target and case."""
    if not checks:
        return "targets: no rows to check (reference or the baselines are missing)"
    lines = [f"{'target':22} {'case':16} {'goal':>6} {'worst':>7} {'best':>7}  verdict  worst row"]
    for c in checks:
        verdict = "PASS" if c.passed else "FAIL"
        lines.append(
            f"{c.target:22} {c.case:16} {c.goal:>6.2f} {c.worst:>7.2f} {c.best:>7.2f}  "
            f"{verdict:7}  {c.worst_row}"
        )
    return "\n".join(lines)
