"""bench.gate.decision: the run-level decision on synthetic runs shaped like the quick plan.

A synthetic run has the quick plan's CPU rows (4 operations x 3 cases x 2 dtypes x 4 scopes
= 96 gated reference rows, each with its limit) measured in several processes of a machine
whose speed differs between processes (the limit sees it too) and whose rows each carry
their own per-process and per-round noise. Identical code on both sides must never give a
regression verdict; a 20% slowdown of one operation must.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from bench_files import synthetic_run, throughput_row, write_results

from lmckv.bench.bench_command import main
from lmckv.bench.gate.compare import bench_id, compare_rows
from lmckv.bench.gate.decision import (
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_REGRESSION,
    RUN_ALPHA,
    _holm,
    process_values,
    processes_needed,
)
from lmckv.bench.gate.verdict import min_p_paired, min_p_unpaired, paired_shift


def gated_rows(rows: list[dict[str, Any]]) -> int:
    return sum(r["impl"] == "reference" for r in rows)


# ---- the statistics' building blocks


def test_smallest_p_values_and_processes_needed() -> None:
    assert min_p_unpaired(3, 3) == pytest.approx(1 / 20)
    assert min_p_unpaired(5, 5) == pytest.approx(1 / 252)
    assert min_p_paired(7) == 1 / 128
    assert processes_needed(0.05 / 4, paired=False) == 5  # 1/70 > 0.0125 >= 1/252
    assert processes_needed(0.05 / 4, paired=True) == 7


def test_paired_shift_is_the_median_of_walsh_averages() -> None:
    shift, low, high = paired_shift([1.0, 2.0, 3.0], alpha=0.25)
    # Walsh averages: 1, 1.5, 2, 2, 2.5, 3
    assert shift == 2.0 and low <= shift <= high


def test_holm_steps_down_and_stops_at_the_first_acceptance() -> None:
    assert _holm({"a": 0.001, "b": 0.03, "c": 0.04}, 0.05) == {"a"}  # b: 0.03 > 0.05/2
    assert _holm({"a": 0.01, "b": 0.02, "c": 0.04}, 0.05) == {"a", "b", "c"}
    assert _holm({"a": 0.02, "b": 0.001}, 0.01) == {"b"}


def test_process_values_are_medians_over_the_limit_of_the_same_process() -> None:
    row = throughput_row(
        "encode", "reference", "PER_TENSOR", "page16", "float16", [[2.0, 4.0], [6.0]]
    )
    limit = throughput_row("copy", "memcpy", None, "page16", "float16", [[1.0, 3.0], [2.0]])
    assert process_values(row, limit) == [1.5, 3.0]
    assert process_values(row) == [3.0, 6.0]
    with pytest.raises(ValueError, match="processes"):
        process_values(row, {**limit, "samples_by_process": [[1.0]]})


# ---- the run-level decision (issue 22's check)


@pytest.mark.parametrize("spread", [0.05, 0.5])
def test_identical_code_never_gives_a_regression_over_many_seeds(spread: float) -> None:
    """96 gated rows, 5 processes a side, 100 pairs of runs of identical code, on a steady
    machine and on one whose processes differ by up to 1.5x (so that the limits often move
    between the runs): the run-level decision at alpha 0.05 never exits 1 and never marks
    a row, while some row looks slower at that alpha, uncorrected, in many of the runs."""
    codes = []
    runs_with_a_row_slower_alone = 0
    for seed in range(100):
        changes, decision = compare_rows(
            synthetic_run(2 * seed, spread=spread), synthetic_run(2 * seed + 1, spread=spread)
        )
        codes.append(decision.exit_code)
        assert not any(c.regression or c.outcome == "regression" for c in changes), seed
        runs_with_a_row_slower_alone += any(
            c.gated and c.p_slower is not None and c.p_slower < RUN_ALPHA for c in changes
        )
    assert gated_rows(synthetic_run(0)) == 96
    assert EXIT_REGRESSION not in codes
    if spread < 0.1:  # a steady machine: identical code is mostly shown unchanged
        assert codes.count(EXIT_OK) > 80, codes
    assert runs_with_a_row_slower_alone > 50


@pytest.mark.parametrize("paired", [False, True])
def test_a_twenty_percent_slowdown_of_one_operation_is_a_regression(paired: bool) -> None:
    """On a steady machine for separate runs (drift between them would make it
    inconclusive: the next test), and on one whose processes differ by up to 1.5x for an
    interleaved session (each pair shares its process's machine state)."""
    processes = 8 if paired else 5
    for seed in range(20):
        machine = [random.Random(seed).uniform(1.0, 1.5) for _ in range(processes)]
        base = synthetic_run(2 * seed, processes=processes, machine=machine if paired else None)
        head = synthetic_run(
            2 * seed + 1,
            processes=processes,
            slowdown={"encode": 1.2},
            machine=machine if paired else None,
        )
        _, decision = compare_rows(base, head, paired=paired)
        ops = {d.op: d for d in decision.ops}
        assert decision.exit_code == EXIT_REGRESSION, seed
        assert ops["encode"].outcome == "regression"
        assert ops["encode"].ratio == pytest.approx(1.2, rel=0.05)
        assert {d.outcome for op, d in ops.items() if op != "encode"} <= {"unchanged"}
        carried = [ident for ident, _ in ops["encode"].carried_by]
        assert carried and all(i.startswith("encode/reference/") for i in carried)


def test_paired_identical_code_never_gives_a_regression() -> None:
    for seed in range(50):
        machine = [random.Random(seed).uniform(1.0, 1.5) for _ in range(8)]
        base = synthetic_run(2 * seed, processes=8, machine=machine)
        head = synthetic_run(2 * seed + 1, processes=8, machine=machine)
        assert compare_rows(base, head, paired=True)[1].exit_code != EXIT_REGRESSION


def test_too_few_processes_is_inconclusive_and_says_how_many_are_needed() -> None:
    base = synthetic_run(1, processes=3)
    head = synthetic_run(2, processes=3, slowdown={"encode": 1.5})
    _, decision = compare_rows(base, head)
    encode = next(d for d in decision.ops if d.op == "encode")
    assert decision.exit_code == EXIT_INCONCLUSIVE
    assert encode.outcome == "inconclusive" and "needs 5 per side" in encode.reason
    assert decision.alpha == RUN_ALPHA


def test_limits_that_moved_between_runs_make_a_slowdown_inconclusive() -> None:
    """Identical code, but the head run's limits ran 25% faster (a neighbour that took
    memory bandwidth left between the runs): relative to its limits every operation looks
    33% slower. The drift check sees the limits move and refuses the verdict."""
    base = synthetic_run(1)
    head = synthetic_run(2, limit_factor=0.75)
    _, decision = compare_rows(base, head)
    assert {kind for kind, _ in decision.drift} == {"memcpy", "crc32"}
    assert decision.exit_code == EXIT_INCONCLUSIVE
    assert all("limits moved" in d.reason for d in decision.ops)
    assert compare_rows(base, head, drift_bound=0.5)[1].exit_code == EXIT_REGRESSION
    # a slowdown far beyond what the limits' movement could explain is still a regression
    slower = synthetic_run(3, limit_factor=0.75, slowdown={"encode": 2.0})
    _, beyond = compare_rows(base, slower)
    encode = next(d for d in beyond.ops if d.op == "encode")
    assert beyond.drift and encode.outcome == "regression" and "drift" in encode.reason


def test_compare_on_files_whose_limits_moved_exits_3_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Constructed files: identical code, the head's limits 25% faster (the machine changed
    between the runs); compare refuses to call it a regression and says why."""
    base = write_results(tmp_path / "a", synthetic_run(1))
    head = write_results(tmp_path / "b", synthetic_run(2, limit_factor=0.75))
    out = tmp_path / "cmp.json"
    assert main(["compare", str(base), str(head), "--json", str(out)]) == EXIT_INCONCLUSIVE
    text = capsys.readouterr().out
    assert "drift: limit" in text and "the machine changed" in text
    assert "drift of the machine between them is not controlled" in text
    data = json.loads(out.read_text())
    assert data["exit_code"] == EXIT_INCONCLUSIVE and data["drift"]
    assert data["ops"]["encode"]["outcome"] == "inconclusive"
    # a real slowdown on a steady machine is a regression; without the check (a loose
    # bound) the drifted pair would have been a false alarm
    steady = write_results(tmp_path / "c", synthetic_run(3, slowdown={"encode": 1.3}))
    assert main(["compare", str(base), str(steady)]) == EXIT_REGRESSION
    assert main(["compare", str(base), str(head), "--drift-bound", "0.5"]) == EXIT_REGRESSION


def test_rows_that_carried_the_decision_are_named() -> None:
    base = synthetic_run(5)
    head = synthetic_run(6, slowdown={"parse": 1.25})
    changes, decision = compare_rows(base, head)
    parse = next(d for d in decision.ops if d.op == "parse")
    flagged = {c.id for c in changes if c.regression}
    assert flagged == {ident for ident, _ in parse.carried_by}
    assert flagged and all(bench_id_op(i) == "parse" for i in flagged)


def bench_id_op(ident: str) -> str:
    return ident.split("/")[0]


def test_bench_id_matches_the_rows_op() -> None:
    row = synthetic_run(0)[-1]
    assert bench_id_op(bench_id(row)) == row["op"]
