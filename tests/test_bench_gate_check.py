"""gate-check: the thresholds of its verdict, and its input check. A real series (one pair
of each kind) runs in tests/test_bench_compare.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmckv.bench.compare import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION
from lmckv.bench.gate_check import Outcome, measure, summarize


def outcomes(codes: list[int], encode: float = 1.0) -> list[Outcome]:
    return [Outcome("base", "head", code, {"encode": encode}) for code in codes]


@pytest.mark.parametrize(
    ("false_alarms", "detected", "holds"),
    [(0, 20, True), (1, 19, True), (2, 20, False), (0, 18, False)],
)
def test_the_gate_holds_at_one_false_alarm_and_nineteen_detections_of_twenty(
    false_alarms: int, detected: int, holds: bool
) -> None:
    aa = outcomes([EXIT_REGRESSION] * false_alarms + [EXIT_OK] * (20 - false_alarms))
    slow = outcomes([EXIT_REGRESSION] * detected + [EXIT_INCONCLUSIVE] * (20 - detected), 1.2)
    verdict, text = summarize(aa, slow, "encode:1.2")
    assert verdict is holds
    assert text.startswith("# gate check: " + ("HOLDS" if holds else "DOES NOT HOLD"))
    assert f"| A/A | 20 | {20 - false_alarms} | {false_alarms} | 0 | 1.000-1.000 |" in text
    assert f"| encode:1.2 | 20 | 0 | {detected} | {20 - detected} | 1.200-1.200 |" in text


def test_a_bad_slowdown_fails_before_any_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="OP:FACTOR"):
        measure(tmp_path, 1, "encode")
    assert not any(tmp_path.iterdir())
