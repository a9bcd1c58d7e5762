"""compare: the verdict statistics on synthetic samples (deterministic), per-process values
relative to the limit, machine checks; and one end-to-end gate on real runs with a large
injected slowdown. The run-level decision itself: tests/test_bench_decision.py."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from bench_files import MACHINE, throughput_row, tiny_plan, write_results

from lmckv.bench.bench_command import main
from lmckv.bench.common.impls import SLOWDOWN_ENV, parse_slowdown
from lmckv.bench.common.machine import machine_id
from lmckv.bench.common.rows import SCOPES
from lmckv.bench.gate.compare import (
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_REGRESSION,
    Change,
    MinEffects,
    compare_rows,
)
from lmckv.bench.gate.decision import OpDecision, RunDecision
from lmckv.bench.gate.gate_check import judge_separate, measure
from lmckv.bench.gate.verdict import judge, shift_interval
from lmckv.bench.throughput.targets import check_targets


def noisy(center: float, spread: float, n: int = 9, seed: int = 0) -> list[float]:
    """``n`` log-normal samples around ``center`` with relative spread ``spread``."""
    rng = random.Random(seed)
    return [center * (1.0 + spread) ** rng.gauss(0.0, 1.0) for _ in range(n)]


# ---- bench.gate.verdict on synthetic samples


def test_identical_distributions_are_unchanged() -> None:
    v = judge(noisy(1.0, 0.02, seed=1), noisy(1.0, 0.02, seed=2))
    assert v.outcome == "unchanged" and 0.9 < v.ci_low <= v.ratio <= v.ci_high < 1.1


def test_a_clear_slowdown_is_a_regression_and_a_speedup_an_improvement() -> None:
    slow = judge(noisy(1.0, 0.03, seed=1), noisy(1.2, 0.03, seed=2))
    assert slow.outcome == "regression" and slow.p_slower < 0.001
    assert slow.ratio == pytest.approx(1.2, rel=0.05)
    fast = judge(noisy(1.0, 0.03, seed=1), noisy(0.7, 0.03, seed=2))
    assert fast.outcome == "improvement" and fast.p_faster < 0.001


def test_noise_that_hides_a_possible_change_is_inconclusive() -> None:
    v = judge(noisy(1.0, 0.4, seed=3), noisy(1.2, 0.4, seed=4))
    assert v.outcome == "inconclusive"
    assert v.ci_low < 1.0 < 1.1 < v.ci_high


def test_a_significant_change_below_the_minimum_effect_is_not_a_regression() -> None:
    base, head = noisy(1.0, 0.005, seed=5), noisy(1.03, 0.005, seed=6)
    v = judge(base, head)
    assert v.p_slower < 0.001 and v.outcome == "unchanged"
    assert judge(base, head, min_effect=0.02).outcome == "regression"


def test_constant_samples_and_bad_input() -> None:
    assert judge([1.0, 1.0], [1.0, 1.0]).outcome == "unchanged"
    with pytest.raises(ValueError):
        judge([], [1.0])
    with pytest.raises(ValueError):
        judge([0.0], [1.0])


def test_hodges_lehmann_shift_and_interval() -> None:
    shift, low, high = shift_interval([0.0, 1.0, 2.0], [10.0, 11.0, 12.0], alpha=0.25)
    assert shift == 10.0 and low <= 10.0 <= high
    assert (low, high) == (9.0, 11.0)  # k = floor(4.5 - 0.674 * 2.291) = 2 of 8,9,9,10,...,12


# ---- per-round ratios and rows


def _row(impl: str, by_process: list[list[float]], op: str = "encode", **kw: Any) -> dict[str, Any]:
    """A page16 float16 PER_TENSOR row against memcpy; ``kw`` overrides fields."""
    row = throughput_row(op, impl, "PER_TENSOR", "page16", "float16", by_process)
    return {**row, "limit": "memcpy", **kw}


def _drift(seed: int) -> list[list[float]]:
    """A machine whose speed differs by up to 2x between its 5 processes (and 1% between
    rounds). Every run meets the same five process speeds, in its own order: the machine
    differs between processes, not between runs (that is tests/test_bench_decision.py's
    drift check)."""
    rng = random.Random(seed)
    levels = [1.0, 1.2, 1.5, 1.7, 2.0]
    rng.shuffle(levels)
    return [[level * rng.uniform(0.995, 1.005) for _ in range(3)] for level in levels]


def _scaled(drift: list[list[float]], factor: float, seed: int) -> list[list[float]]:
    rng = random.Random(seed)
    return [[d * factor * rng.uniform(0.99, 1.01) for d in p] for p in drift]


def _run_rows(ref_factor: float, seed: int) -> list[dict[str, Any]]:
    """Reference and upstream encode rows and the memcpy limit, measured in the same
    processes of one (drifting) machine."""
    drift = _drift(seed)
    limit = {**_row("memcpy", _scaled(drift, 0.1, seed + 3), op="copy"), "scope": None}
    return [
        _row("reference", _scaled(drift, ref_factor, seed + 1)),
        _row("upstream", _scaled(drift, 2.0, seed + 2)),
        limit,
    ]


def _by_impl(changes: list[Change]) -> dict[str, Change]:
    return {c.impl: c for c in changes}


def test_a_disturbed_limit_sample_does_not_move_its_round() -> None:
    steady = [[1.0, 1.0, 1.0] for _ in range(3)]
    rows = [_row("reference", steady), {**_row("memcpy", steady, op="copy"), "scope": None}]
    # one limit sample 50% high in each process: paired round by round, a third of the
    # row's ratios would drop and the row could not be shown unchanged
    spiked = [[1.0, 1.5, 1.0], [1.0, 1.0, 1.5], [1.5, 1.0, 1.0]]
    head = [rows[0], {**_row("memcpy", spiked, op="copy"), "scope": None}]
    ref = _by_impl(compare_rows(rows, head)[0])["reference"]
    assert ref.relative_to is not None and ref.ratio == 1.0 and ref.outcome == "unchanged"


def test_the_limit_cancels_machine_drift_between_processes() -> None:
    changes, decision = compare_rows(_run_rows(1.0, 10), _run_rows(1.0, 20))
    ref = _by_impl(changes)["reference"]
    assert ref.outcome == "unchanged" and ref.relative_to is not None
    assert "/memcpy/" in ref.relative_to
    assert decision.exit_code == EXIT_OK
    # absolute times see the drift between processes: they cannot show the code unchanged
    absolute = compare_rows(_run_rows(1.0, 10), _run_rows(1.0, 20), relative=False)
    assert _by_impl(absolute[0])["reference"].outcome in ("inconclusive", "regression")
    assert absolute[1].exit_code != EXIT_OK


def test_upstream_is_reported_but_never_a_baseline_or_gated() -> None:
    base, head = _run_rows(1.0, 10), _run_rows(1.0, 20)
    head[1] = {**head[1], "samples_by_process": _scaled(_drift(30), 6.0, 31)}  # upstream 3x
    changes = _by_impl(compare_rows(base, head)[0])
    assert changes["reference"].outcome == "unchanged"
    assert not changes["upstream"].gated and changes["upstream"].relative_to is None


def test_a_code_regression_under_drift_is_found_and_gated() -> None:
    rows, decision = compare_rows(_run_rows(1.0, 10), _run_rows(1.2, 20))
    changes = _by_impl(rows)
    ref = changes["reference"]
    assert ref.regression and ref.ratio == pytest.approx(1.2, rel=0.03)
    assert not changes["upstream"].gated and not changes["upstream"].regression
    assert decision.exit_code == EXIT_REGRESSION
    (encode,) = decision.ops
    assert encode.rows == 1 and encode.ratio == pytest.approx(1.2, rel=0.03)


def test_min_effect_overrides() -> None:
    effects = MinEffects.parse(["0.2", "encode/*/cpu/*/*/page16=0.3"])
    assert effects.for_id("encode/reference/cpu/PER_TENSOR/float16/page16") == 0.3
    assert effects.for_id("parse/reference/cpu/PER_TENSOR/float16/page16") == 0.2
    changes, decision = compare_rows(_run_rows(1.0, 10), _run_rows(1.2, 20), min_effects=effects)
    assert _by_impl(changes)["reference"].outcome == "unchanged"
    assert decision.exit_code == EXIT_OK
    with pytest.raises(ValueError):
        MinEffects.parse(["x=fast"])


def test_exit_codes() -> None:
    def decision(*outcomes: str) -> RunDecision:
        ops = [
            OpDecision(f"op{i}", 1, 5, 5, 1.0, 1.0, 1.0, 0.5, 0.5, 0.1, outcome, "")
            for i, outcome in enumerate(outcomes)
        ]
        return RunDecision(False, 0.05, tuple(ops), ())

    assert decision("unchanged", "improvement").exit_code == EXIT_OK
    assert decision("unchanged", "inconclusive").exit_code == EXIT_INCONCLUSIVE
    assert decision("inconclusive", "regression").exit_code == EXIT_REGRESSION
    assert decision().exit_code == EXIT_INCONCLUSIVE  # nothing judged is no all-clear


def test_rows_present_on_one_side_are_reported_not_gated() -> None:
    changes, decision = compare_rows([_row("reference", [[1.0]])], [])
    assert [(c.outcome, c.regression) for c in changes] == [("missing", False)]
    assert decision.exit_code == EXIT_INCONCLUSIVE


def test_cli_exit_codes_and_machine_refusal(tmp_path: Path, capsys: Any) -> None:
    base = write_results(tmp_path / "a", _run_rows(1.0, 10))
    same = write_results(tmp_path / "b", _run_rows(1.0, 20))
    slow = write_results(tmp_path / "c", _run_rows(1.2, 20))
    other = write_results(
        tmp_path / "d", _run_rows(1.0, 20), {**MACHINE, "host_id": "ffffffffffffffff"}
    )
    assert main(["compare", str(base), str(same)]) == EXIT_OK
    report = tmp_path / "slow.json"
    assert main(["compare", str(base), str(slow), "--json", str(report)]) == EXIT_REGRESSION
    data = json.loads(report.read_text())
    assert data["exit_code"] == 1 and data["ops"]["encode"]["rows"] == 1
    assert "decision: one test per operation" in capsys.readouterr().out
    assert main(["compare", str(base), str(other)]) == 2
    assert "--cross-machine" in capsys.readouterr().err
    assert main(["compare", str(base), str(other), "--cross-machine"]) == EXIT_OK
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("encode/")]
    assert rows and all(line.endswith("[cross-machine]") for line in rows)
    assert main(["compare", str(base), str(same), "--min-effect", "x=fast"]) == 2
    assert machine_id(MACHINE) != machine_id({**MACHINE, "host_id": "ffffffffffffffff"})
    assert machine_id(MACHINE) == machine_id({**MACHINE, "governor": "powersave"})


def test_slowdown_spec() -> None:
    assert parse_slowdown("encode:1.2, parse:2") == {"encode": 1.2, "parse": 2.0}
    assert parse_slowdown(None) == {} and parse_slowdown("") == {}
    for bad in ("encode", "encode:fast", "encode:0.5"):
        with pytest.raises(ValueError):
            parse_slowdown(bad)


# ---- end to end on real runs

# 4 processes a side: Mann-Whitney's smallest p, 1 / C(8, 4), is under Holm's first
# threshold over the plan's two operations (0.05 / 2).
TINY = tiny_plan(processes=4)


def test_compare_flags_a_large_injected_slowdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SLOWDOWN_ENV, "parse:2")  # the caller's own setting comes back after
    plain, slowed = measure(tmp_path, 1, "encode:4", plan=TINY)  # plain, slowed, plain
    assert os.environ[SLOWDOWN_ENV] == "parse:2"
    base, slow = plain[0], slowed[0]
    report = tmp_path / "slow.json"
    assert main(["compare", str(base), str(slow), "--json", str(report)]) == EXIT_REGRESSION
    data = json.loads(report.read_text())
    flagged = {c["id"] for c in data["changes"] if c["regression"]}
    encode = {f"encode/reference/cpu/{s}/float16/small" for s in SCOPES}
    # only encode rows carried it (the decision is on the op's geometric mean)
    assert flagged and flagged <= encode, sorted(flagged)
    assert data["ops"]["encode"]["ratio"] > 2.0
    assert main(["targets", str(base)]) == 0
    # neither the caller's parse:2 nor encode:4 reached the plain runs
    same = judge_separate(plain[0], plain[1])
    assert same.exit_code != EXIT_REGRESSION
    assert 0.5 < same.ratios["encode"] < 2.0 and 0.5 < same.ratios["parse"] < 1.5


def test_targets_read_ratios_from_rows() -> None:
    rows = [
        _row("reference", [[1.0]], ratio_to_upstream=2.5),
        _row("reference", [[1.0]], scope="PER_PAGE_HEAD", ratio_to_upstream=1.5),
        {**_row("crc32", [[1.0]], op="crc32"), "scope": None, "gbps": 2.0},
        {**_row("reference", [[1.0]], op="decode_fp8"), "gbps": 1.5},
    ]
    checks = {c.target: c for c in check_targets(rows)}
    enc = checks["encode_vs_upstream"]
    assert (enc.worst, enc.best, enc.passed) == (1.5, 2.5, False)
    dec = checks["decode_fp8_vs_crc32"]
    assert dec.worst == pytest.approx(0.75) and dec.passed
