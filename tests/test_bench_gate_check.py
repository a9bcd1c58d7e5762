"""gate-check: the thresholds of its verdict, and its input check. A real series (one pair
of each kind) runs in tests/test_bench_compare.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmckv.bench.compare import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION
from lmckv.bench.gate_check import Outcome, measure, summarize


def outcomes(codes: list[int], encode: float = 1.0) -> list[Outcome]:
    return [Outcome("base", "head", code, {"encode": encode}) for code in codes]


def test_compare_is_held_to_false_alarms_only() -> None:
    """Separate runs cannot promise power under drift: a compare series that catches few
    slowdowns still holds when its A/A pairs hold; ab must catch 19 of 20."""
    aa = outcomes([EXIT_OK] * 20)
    weak = outcomes([EXIT_INCONCLUSIVE] * 15 + [EXIT_REGRESSION] * 5, 1.2)
    assert summarize({"compare": (aa, weak)}, "encode:1.2")[0] is True
    assert summarize({"ab": (aa, weak)}, "encode:1.2")[0] is False


@pytest.mark.parametrize(
    ("false_alarms", "detected", "holds"),
    [(0, 20, True), (1, 19, True), (2, 20, False), (0, 18, False)],
)
def test_the_gate_holds_at_one_false_alarm_and_nineteen_detections_of_twenty(
    false_alarms: int, detected: int, holds: bool
) -> None:
    aa = outcomes([EXIT_REGRESSION] * false_alarms + [EXIT_OK] * (20 - false_alarms))
    slow = outcomes([EXIT_REGRESSION] * detected + [EXIT_INCONCLUSIVE] * (20 - detected), 1.2)
    verdict, text = summarize({"ab": (aa, slow)}, "encode:1.2")
    assert verdict is holds
    assert text.startswith("# gate check: " + ("HOLDS" if holds else "DOES NOT HOLD"))
    assert (
        f"| ab | 20 | {false_alarms} (<= 1) | {20 - false_alarms} / {false_alarms} / 0 | "
        f"1.000-1.000 | {detected} (>= 19) | 0 / {detected} / {20 - detected} | 1.200-1.200 |"
    ) in text


def test_a_bad_slowdown_fails_before_any_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="OP:FACTOR"):
        measure(tmp_path, 1, "encode")
    assert not any(tmp_path.iterdir())
