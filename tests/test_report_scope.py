"""The recommended scale scope: decided on the real model's end-to-end KL with its paired
bootstrap interval, within the speed and bytes bounds; stress families shown, never deciding."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from lmckv.bench.recommendation.scope_choice import (
    MAX_BYTES_OVERHEAD,
    MAX_ENCODE_COST,
    choose_scope,
)
from lmckv.reports.inputs import BenchRun, load_results

FIXTURES = Path(__file__).parent / "fixtures" / "report"
REAL = "real:m"
STRESS = "synthetic:page_scale"


def accuracy(rows: dict[tuple[str, str], tuple[float, float]]) -> pd.DataFrame:
    """(scope, data) -> (attn_rel_err, bytes_per_token) as accuracy rows in format e4m3."""
    records = []
    for (scope, data), (error, bpt) in rows.items():
        records.append(
            {"scope": scope, "data": data, "fmt": "e4m3", "metric": "attn_rel_err", "value": error}
        )
        records.append(
            {"scope": scope, "data": data, "fmt": "e4m3", "metric": "bytes_per_token", "value": bpt}
        )
    return pd.DataFrame(records)


def encode(
    gbps: dict[str, float],
    device: str = "cpu",
    machine: str = "m1",
    quartiles: dict[str, tuple[float, float]] | None = None,
) -> pd.DataFrame:
    """Reference encode rows, one case, one dtype, scope -> GB/s; ``quartiles``: scope ->
    (GB/s at q75_s, GB/s at q25_s) on 1 GB calls."""
    quartiles = quartiles or {}
    return pd.DataFrame(
        [
            {
                "bytes": 10**9,
                "median_s": 1.0 / value,
                "q25_s": 1.0 / quartiles[scope][1] if scope in quartiles else None,
                "q75_s": 1.0 / quartiles[scope][0] if scope in quartiles else None,
                "op": "encode",
                "impl": "reference",
                "device": device,
                "scope": scope,
                "dtype": "float16",
                "case": "c",
                "gbps": value,
                "machine": machine,
            }
            for scope, value in gbps.items()
        ]
    )


def e2e(blocks: dict[str, list[float]]) -> pd.DataFrame:
    """scope -> per-block KL, as e2e kl/top1/ppl_change rows for both cache dtypes."""
    records = []
    for scope, kl in blocks.items():
        mean = sum(kl) / len(kl)
        for dtype in ("float16", "bfloat16"):
            for metric, value in (("kl", mean), ("top1", 0.99), ("ppl_change", 0.001)):
                records.append(
                    {
                        "model": "m",
                        "scope": scope,
                        "fmt": "e4m3",
                        "cache_dtype": dtype,
                        "layer": None,
                        "metric": metric,
                        "value": value,
                        "ci_low": value * 0.9,
                        "ci_high": value * 1.1,
                        "tokens": 16 * len(kl),
                        "windows": 4,
                        "blocks": kl,
                    }
                )
    return pd.DataFrame(records)


NOISY = [0.001, 0.004, 0.002, 0.003, 0.0015, 0.0035, 0.002, 0.003]
CLEAR_LOW = [0.001] * 8
CLEAR_HIGH = [0.01, 0.011, 0.012, 0.01, 0.011, 0.012, 0.01, 0.011]


def test_lowest_kl_wins_when_clearly_lower() -> None:
    rows = {("PER_TENSOR", REAL): (0.02, 100.0), ("PER_PAGE_HEAD", REAL): (0.02, 101.0)}
    choice = choose_scope(
        accuracy(rows),
        encode({"PER_TENSOR": 1.0, "PER_PAGE_HEAD": 0.95}),
        e2e({"PER_TENSOR": CLEAR_HIGH, "PER_PAGE_HEAD": CLEAR_LOW}),
    )
    assert choice.scope == "PER_PAGE_HEAD"
    assert "end-to-end next-token KL" in choice.basis
    assert "The next scope, PER_TENSOR, moves the predictions more" in choice.statement
    assert "(the interval excludes zero)" in choice.statement
    chosen = choice.table.set_index("scope").loc["PER_TENSOR"]
    assert chosen["kl_diff_low"] > 0


def test_kl_within_the_interval_ties_and_bytes_decide() -> None:
    shifted = [x + 0.0001 for x in NOISY[::-1]]
    rows = {("PER_LAYER_HEAD", REAL): (0.02, 100.0), ("PER_PAGE_HEAD", REAL): (0.02, 101.0)}
    choice = choose_scope(
        accuracy(rows),
        encode({"PER_LAYER_HEAD": 1.0, "PER_PAGE_HEAD": 1.0}),
        e2e({"PER_LAYER_HEAD": shifted, "PER_PAGE_HEAD": NOISY}),
    )
    assert choice.scope == "PER_LAYER_HEAD"  # fewer bytes, KL tied
    assert bool(choice.table["tied"].all())
    assert "The lowest KL is PER_PAGE_HEAD's" in choice.statement
    assert "the choice rests on bytes and speed" in choice.statement
    assert "PER_LAYER_HEAD stores 1.0 fewer bytes per token than PER_PAGE_HEAD" in choice.statement


def test_a_kl_tie_with_equal_bytes_is_broken_by_encode_speed_and_says_so() -> None:
    shifted = [x + 0.0001 for x in NOISY[::-1]]
    rows = {(s, REAL): (0.02, 100.0) for s in ("PER_LAYER_HEAD", "PER_PAGE_HEAD")}
    apart = {"PER_LAYER_HEAD": (0.8, 0.85), "PER_PAGE_HEAD": (0.9, 1.1)}
    choice = choose_scope(
        accuracy(rows),
        encode({"PER_LAYER_HEAD": 0.82, "PER_PAGE_HEAD": 1.0}, quartiles=apart),
        e2e({"PER_LAYER_HEAD": NOISY, "PER_PAGE_HEAD": shifted}),
    )
    assert choice.scope == "PER_PAGE_HEAD"  # KL tied, bytes equal, encodes faster
    assert "The lowest KL is PER_LAYER_HEAD's" in choice.statement
    assert "PER_PAGE_HEAD stores as many bytes per token and encodes faster" in choice.statement


def test_stress_families_never_decide() -> None:
    rows = {
        ("PER_TENSOR", REAL): (0.02, 100.0),
        ("PER_PAGE_HEAD", REAL): (0.02, 100.0),
        ("PER_TENSOR", STRESS): (0.9, 100.0),
        ("PER_PAGE_HEAD", STRESS): (0.01, 100.0),
    }
    choice = choose_scope(
        accuracy(rows),
        encode({"PER_TENSOR": 1.0, "PER_PAGE_HEAD": 1.0}),
        e2e({"PER_TENSOR": CLEAR_LOW, "PER_PAGE_HEAD": CLEAR_HIGH}),
    )
    assert choice.scope == "PER_TENSOR"
    table = choice.table.set_index("scope")
    assert table.loc["PER_TENSOR", "attn_err_stress"] == pytest.approx(0.9)  # shown beside


def test_without_e2e_the_realistic_attention_error_decides() -> None:
    rows = {
        ("PER_TENSOR", REAL): (0.05, 100.0),
        ("PER_PAGE_HEAD", REAL): (0.02, 100.0),
        ("PER_TENSOR", STRESS): (0.01, 100.0),
        ("PER_PAGE_HEAD", STRESS): (0.9, 100.0),
    }
    choice = choose_scope(accuracy(rows), encode({"PER_TENSOR": 1.0, "PER_PAGE_HEAD": 1.0}))
    assert choice.scope == "PER_PAGE_HEAD"
    assert any("no end-to-end rows" in n for n in choice.notes)
    assert "attention-output error" in choice.statement


def test_too_slow_encode_is_out_of_bounds() -> None:
    rows = {("PER_TENSOR", REAL): (0.2, 100.0), ("PER_PAGE_HEAD", REAL): (0.02, 101.0)}
    slow = 1.0 - MAX_ENCODE_COST - 0.05
    choice = choose_scope(
        accuracy(rows),
        encode({"PER_TENSOR": 1.0, "PER_PAGE_HEAD": slow}),
        e2e({"PER_TENSOR": CLEAR_HIGH, "PER_PAGE_HEAD": CLEAR_LOW}),
    )
    assert choice.scope == "PER_TENSOR"
    table = choice.table.set_index("scope")
    assert not table.loc["PER_PAGE_HEAD", "within_bounds"]
    assert table.loc["PER_PAGE_HEAD", "encode_cost"] == pytest.approx(1.0 - slow)


def test_overlapping_encode_intervals_tie_on_speed() -> None:
    """A median 30% slower whose interquartile interval reaches the fastest's is not slower:
    its cost is 0, it stays within bounds, and speed does not break the KL tie."""
    rows = {(s, REAL): (0.05, 100.0) for s in ("PER_LAYER_HEAD", "PER_PAGE_HEAD")}
    quartiles = {"PER_LAYER_HEAD": (0.9, 1.1), "PER_PAGE_HEAD": (0.5, 0.95)}
    choice = choose_scope(
        accuracy(rows),
        encode({"PER_LAYER_HEAD": 1.0, "PER_PAGE_HEAD": 0.7}, quartiles=quartiles),
        e2e({"PER_LAYER_HEAD": NOISY, "PER_PAGE_HEAD": NOISY[::-1]}),
    )
    table = choice.table.set_index("scope")
    assert table.loc["PER_PAGE_HEAD", "encode_cost"] == 0.0
    assert table["within_bounds"].all()
    apart = {"PER_LAYER_HEAD": (0.9, 1.1), "PER_PAGE_HEAD": (0.5, 0.85)}
    separated = choose_scope(
        accuracy(rows),
        encode({"PER_LAYER_HEAD": 1.0, "PER_PAGE_HEAD": 0.7}, quartiles=apart),
        e2e({"PER_LAYER_HEAD": NOISY, "PER_PAGE_HEAD": NOISY[::-1]}),
    ).table.set_index("scope")
    assert separated.loc["PER_PAGE_HEAD", "encode_cost"] == pytest.approx(0.3)
    assert not separated.loc["PER_PAGE_HEAD", "within_bounds"]


def test_worst_machine_and_device_set_the_encode_cost() -> None:
    rows = {("PER_TENSOR", REAL): (0.2, 100.0), ("PER_PAGE_HEAD", REAL): (0.02, 100.0)}
    throughput = pd.concat(
        [
            encode({"PER_TENSOR": 1.0, "PER_PAGE_HEAD": 0.99}, "cpu", "a"),
            encode({"PER_TENSOR": 2.0, "PER_PAGE_HEAD": 1.0}, "cpu", "b"),
        ]
    )
    choice = choose_scope(accuracy(rows), throughput)
    table = choice.table.set_index("scope")
    assert table.loc["PER_PAGE_HEAD", "encode_cost"] == pytest.approx(0.5)
    assert table.loc["PER_PAGE_HEAD", "encode_cost_low"] == pytest.approx(0.01)
    assert table.loc["PER_PAGE_HEAD", "encode_cost_high"] == pytest.approx(0.5)
    assert choice.scope == "PER_TENSOR"


def test_storage_overhead_bound() -> None:
    big = 100.0 * (1.0 + MAX_BYTES_OVERHEAD + 0.01)
    rows = {("PER_TENSOR", REAL): (0.2, 100.0), ("PER_PAGE_HEAD", REAL): (0.02, big)}
    choice = choose_scope(
        accuracy(rows),
        encode({"PER_TENSOR": 1.0, "PER_PAGE_HEAD": 1.0}),
        e2e({"PER_TENSOR": CLEAR_HIGH, "PER_PAGE_HEAD": CLEAR_LOW}),
    )
    assert choice.scope == "PER_TENSOR"


def test_external_scales_are_never_recommended() -> None:
    rows = {
        ("EXTERNAL_CALIBRATED", REAL): (0.001, 90.0),
        ("PER_TENSOR", REAL): (0.2, 100.0),
    }
    choice = choose_scope(
        accuracy(rows),
        encode({"PER_TENSOR": 1.0}),
        e2e({"EXTERNAL_CALIBRATED": CLEAR_LOW, "PER_TENSOR": CLEAR_HIGH}),
    )
    assert choice.scope == "PER_TENSOR"
    assert list(choice.table["scope"]) == ["PER_TENSOR"]
    assert "EXTERNAL_CALIBRATED not eligible" in choice.notes[0]


def test_fixture_run_recommends_per_page_head_without_e2e() -> None:
    run = load_results(FIXTURES / "bench-cpu.jsonl")
    assert isinstance(run, BenchRun)
    choice = choose_scope(run.table("accuracy"), run.table("throughput"), run.table("e2e"))
    assert choice.scope == "PER_PAGE_HEAD"
    assert "EXTERNAL" not in set(choice.table["scope"])
    assert any("EXTERNAL not eligible" in n for n in choice.notes)


def test_no_rows_gives_no_recommendation() -> None:
    frame = accuracy({("PER_TENSOR", REAL): (0.2, 100.0)})
    frame = frame[frame["metric"] != "attn_rel_err"]
    choice = choose_scope(frame, encode({"PER_TENSOR": 1.0}))
    assert choice.scope is None
    assert choice.notes and "no scope is recommended" in choice.notes[0]
