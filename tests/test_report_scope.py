"""The recommended scale scope: the rule stated on the page, applied to measured rows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from reports.load import BenchRun, load_results
from reports.scope_choice import MAX_BYTES_OVERHEAD, MAX_ENCODE_COST, choose_scope

FIXTURES = Path(__file__).parent / "fixtures" / "report"


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


def encode(gbps: dict[str, float], device: str = "cpu") -> pd.DataFrame:
    """Reference encode rows, one case, one dtype, scope -> GB/s."""
    return pd.DataFrame(
        [
            {
                "op": "encode",
                "impl": "reference",
                "device": device,
                "scope": scope,
                "dtype": "float16",
                "case": "c",
                "gbps": value,
            }
            for scope, value in gbps.items()
        ]
    )


SYN = "synthetic:wide"


def test_fixture_run_recommends_per_page_head() -> None:
    run = load_results(FIXTURES / "bench-cpu.jsonl")
    assert isinstance(run, BenchRun)
    choice = choose_scope(run.table("accuracy"), run.table("throughput"))
    assert choice.scope == "PER_PAGE_HEAD"
    assert "real:SmolLM2-135M-Instruct" in choice.basis
    chosen = choice.table.set_index("scope").loc["PER_PAGE_HEAD"]
    assert chosen["attn_rel_err"] == pytest.approx(0.0213)  # its worst family: wide-range
    assert 0 < chosen["encode_cost"] <= MAX_ENCODE_COST
    assert chosen["bytes_overhead"] == pytest.approx(17331.8 / 17309.8 - 1)
    assert "EXTERNAL" not in set(choice.table["scope"])
    assert any("EXTERNAL not eligible" in n for n in choice.notes)


def test_lowest_error_wins_when_within_bounds() -> None:
    rows = {("PER_TENSOR", SYN): (0.2, 100.0), ("PER_PAGE_HEAD", SYN): (0.02, 101.0)}
    choice = choose_scope(accuracy(rows), encode({"PER_TENSOR": 1.0, "PER_PAGE_HEAD": 0.95}))
    assert choice.scope == "PER_PAGE_HEAD"
    assert "worst attention-output error over the data families" in choice.basis


def test_too_slow_encode_is_out_of_bounds() -> None:
    rows = {("PER_TENSOR", SYN): (0.2, 100.0), ("PER_PAGE_HEAD", SYN): (0.02, 101.0)}
    slow = 1.0 - MAX_ENCODE_COST - 0.05
    choice = choose_scope(accuracy(rows), encode({"PER_TENSOR": 1.0, "PER_PAGE_HEAD": slow}))
    assert choice.scope == "PER_TENSOR"
    table = choice.table.set_index("scope")
    assert not table.loc["PER_PAGE_HEAD", "within_bounds"]
    assert table.loc["PER_PAGE_HEAD", "encode_cost"] == pytest.approx(1.0 - slow)


def test_worst_device_sets_the_encode_cost() -> None:
    rows = {("PER_TENSOR", SYN): (0.2, 100.0), ("PER_PAGE_HEAD", SYN): (0.02, 100.0)}
    throughput = pd.concat(
        [
            encode({"PER_TENSOR": 1.0, "PER_PAGE_HEAD": 0.99}, "cpu"),
            encode({"PER_TENSOR": 500.0, "PER_PAGE_HEAD": 250.0}, "cuda"),
        ]
    )
    choice = choose_scope(accuracy(rows), throughput)
    assert choice.table.set_index("scope").loc["PER_PAGE_HEAD", "encode_cost"] == pytest.approx(0.5)
    assert choice.scope == "PER_TENSOR"


def test_storage_overhead_bound() -> None:
    big = 100.0 * (1.0 + MAX_BYTES_OVERHEAD + 0.01)
    rows = {("PER_TENSOR", SYN): (0.2, 100.0), ("PER_PAGE_HEAD", SYN): (0.02, big)}
    choice = choose_scope(accuracy(rows), encode({"PER_TENSOR": 1.0, "PER_PAGE_HEAD": 1.0}))
    assert choice.scope == "PER_TENSOR"


def test_tied_errors_prefer_the_faster_encode() -> None:
    rows = {("PER_LAYER_HEAD", SYN): (0.0201, 100.0), ("PER_PAGE_HEAD", SYN): (0.0200, 100.0)}
    choice = choose_scope(accuracy(rows), encode({"PER_LAYER_HEAD": 1.0, "PER_PAGE_HEAD": 0.95}))
    assert choice.scope == "PER_LAYER_HEAD"


def test_worst_family_counts_real_and_synthetic_alike() -> None:
    rows = {
        ("PER_TENSOR", SYN): (0.3, 100.0),
        ("PER_PAGE_HEAD", SYN): (0.02, 100.0),
        ("PER_TENSOR", "real:m"): (0.01, 100.0),
        ("PER_PAGE_HEAD", "real:m"): (0.05, 100.0),
    }
    choice = choose_scope(accuracy(rows), encode({"PER_TENSOR": 1.0, "PER_PAGE_HEAD": 1.0}))
    assert choice.scope == "PER_PAGE_HEAD"  # worst 0.05 beats PER_TENSOR's worst 0.3
    assert "real:m" in choice.basis and SYN in choice.basis


def test_worst_synthetic_family_counts() -> None:
    rows = {
        ("PER_TENSOR", "synthetic:a"): (0.01, 100.0),
        ("PER_TENSOR", "synthetic:b"): (0.4, 100.0),
        ("PER_PAGE_HEAD", "synthetic:a"): (0.03, 100.0),
        ("PER_PAGE_HEAD", "synthetic:b"): (0.03, 100.0),
    }
    choice = choose_scope(accuracy(rows), encode({"PER_TENSOR": 1.0, "PER_PAGE_HEAD": 1.0}))
    assert choice.scope == "PER_PAGE_HEAD"


def test_external_scales_are_never_recommended() -> None:
    rows = {
        ("EXTERNAL", SYN): (0.001, 90.0),
        ("EXTERNAL_CALIBRATED", SYN): (0.001, 90.0),
        ("PER_TENSOR", SYN): (0.2, 100.0),
    }
    choice = choose_scope(accuracy(rows), encode({"EXTERNAL": 1.0, "PER_TENSOR": 1.0}))
    assert choice.scope == "PER_TENSOR"
    assert list(choice.table["scope"]) == ["PER_TENSOR"]
    assert "EXTERNAL, EXTERNAL_CALIBRATED not eligible" in choice.notes[0]


def test_missing_throughput_is_noted_and_bytes_still_judged() -> None:
    rows = {("PER_TENSOR", SYN): (0.2, 100.0), ("PER_PAGE_HEAD", SYN): (0.02, 101.0)}
    choice = choose_scope(accuracy(rows), encode({"PER_TENSOR": 1.0}).iloc[0:0])
    assert choice.scope == "PER_PAGE_HEAD"
    assert any("encode cost not judged" in n for n in choice.notes)


def test_no_error_rows_gives_no_recommendation() -> None:
    frame = accuracy({("PER_TENSOR", SYN): (0.2, 100.0)})
    frame = frame[frame["metric"] != "attn_rel_err"]
    choice = choose_scope(frame, encode({"PER_TENSOR": 1.0}))
    assert choice.scope is None
    assert choice.notes and "no scope can be recommended" in choice.notes[0]
