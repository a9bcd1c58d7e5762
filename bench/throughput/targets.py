"""The reference's performance targets, read from a results file.

- ``encode_vs_upstream``: reference encode GB/s >= 2x upstream's (same case, scope, dtype).
- ``decode_fp8_vs_crc32``: reference parse+decode keeping FP8 (``decode_fp8``) GB/s >=
  0.65x of ``zlib.crc32`` GB/s over the same blobs (same case and dtype, CPU).
- ``cuda_quantize_vs_d2d``: reference CUDA ``quantize`` GB/s >= 0.5x device-to-device copy
  (its ``ratio_to_limit``).

Issue 23's targets (the codec at the hardware's pace), each a ratio measured in the same run:

- ``encode_vs_upstream`` asks more of some cases (``CASE_GOALS``): >= 4x at 64 MiB, >= 2x
  at ``chunk256-7b`` and ``page16``;
- ``cpu_encode_vs_memcpy`` / ``cpu_decode_dequant_vs_memcpy``: reference CPU ``encode`` and
  ``decode_dequant`` GB/s >= 0.35x ``memcpy`` of the same bytes (their ``ratio_to_limit``),
  at 64 MiB;
- ``cuda_encode_vs_pinned_d2h`` / ``cuda_decode_fp8_vs_pinned_h2d``: reference CUDA
  ``encode`` and ``decode_fp8`` GB/s >= 0.5x the pinned copy their bytes cross (their
  ``ratio_to_pinned``).

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
    "cpu_encode_vs_memcpy": 0.35,
    "cpu_decode_dequant_vs_memcpy": 0.35,
    "cuda_encode_vs_pinned_d2h": 0.5,
    "cuda_decode_fp8_vs_pinned_h2d": 0.5,
}
#: (target, case) -> goal, where a case is held to more than the target's default.
CASE_GOALS = {("encode_vs_upstream", "64MiB"): 4.0}
#: Targets checked on these cases only (the sizes where the hardware's pace is the bound).
ONLY_CASES = {
    "cpu_encode_vs_memcpy": ("64MiB",),
    "cpu_decode_dequant_vs_memcpy": ("64MiB",),
}
#: Reference rows whose own ratio is a target: (op, device, the row's ratio field) -> target.
_ROW_RATIOS = {
    ("encode", "cpu", "ratio_to_limit"): "cpu_encode_vs_memcpy",
    ("decode_dequant", "cpu", "ratio_to_limit"): "cpu_decode_dequant_vs_memcpy",
    ("encode", "cuda", "ratio_to_pinned"): "cuda_encode_vs_pinned_d2h",
    ("decode_fp8", "cuda", "ratio_to_pinned"): "cuda_decode_fp8_vs_pinned_h2d",
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
        for (op, device, field), target in _ROW_RATIOS.items():
            ratio = r.get(field)
            cases = ONLY_CASES.get(target)
            if ratio is None or (r["op"], r["device"]) != (op, device):
                continue
            if cases is None or r["case"] in cases:
                out[target].append((r["case"], ratio, where))
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
                    CASE_GOALS.get((target, case), TARGETS[target]),
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
    lines = [f"{'target':29} {'case':16} {'goal':>6} {'worst':>7} {'best':>7}  verdict  worst row"]
    for c in checks:
        verdict = "PASS" if c.passed else "FAIL"
        lines.append(
            f"{c.target:29} {c.case:16} {c.goal:>6.2f} {c.worst:>7.2f} {c.best:>7.2f}  "
            f"{verdict:7}  {c.worst_row}"
        )
    return "\n".join(lines)
