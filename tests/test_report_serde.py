"""The serde recommendation: the accuracy budget, what the installed LMCache can build, the
fewest bytes in L2, the adapter JSON to paste, skipped serdes, and the labelled line on the
better choice a newer release would allow."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lmckv.bench.accuracy import l2_serdes as serdes
from lmckv.bench.recommendation import serde_choice
from lmckv.reports.e2e_section import context_table

COLUMNS = ["serde", "scope", "cache_dtype", "metric", "value", "ci_low", "ci_high", "context"]


def _rows(fp8_ppl_high: float) -> pd.DataFrame:
    rows = []
    for dtype in ("float16", "bfloat16"):
        rows.append(("none", "NONE", dtype, "l2_bytes_per_token", 1000.0, None, None, 256))
        for serde, scope, size, kl, ppl_high in (
            ("fp8", "NO_SCALE", 500.0, 1e-3, fp8_ppl_high),
            ("asym_k16_v8", "PER_TENSOR", 760.0, 1e-4, 0.004),
            ("asym_k16_v8_v_only", "PER_TENSOR", 260.0, 1e-4, 0.004),
            ("asym_k16_v8_v_only", "PER_PAGE_HEAD", 255.0, 0.9e-4, 0.003),
        ):
            rows.append((serde, scope, dtype, "kl", kl, kl * 0.8, kl * 1.2, 256))
            rows.append((serde, scope, dtype, "top1", 0.99, 0.98, 1.0, 256))
            rows.append((serde, scope, dtype, "ppl_change", ppl_high / 2, 0.0, ppl_high, 256))
            rows.append((serde, scope, dtype, "l2_bytes_per_token", size, None, None, 256))
    frame = pd.DataFrame(
        rows,
        columns=COLUMNS,
    )
    return frame.assign(layer=None)


@pytest.fixture
def only_fp8(monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed LMCache whose factory registers fp8 only (as 0.5.6 does)."""

    def builds(serde: str) -> tuple[bool, str]:
        if serde in (serdes.NONE, serdes.FP8):
            return True, "builds a FSL2Adapter"
        return False, f"its serde factory refuses it: Unknown serde type {serde!r}"

    monkeypatch.setattr(serde_choice, "_builds", builds)


def test_fp8_within_budget_is_chosen_with_its_config_line(only_fp8: None) -> None:
    choice = serde_choice.choose_serde(
        serde_choice.serde_table(_rows(0.008), pd.DataFrame()), "m", 256
    )
    assert choice.chosen is not None and choice.chosen["serde"] == "fp8"
    assert json.loads(choice.config) == {
        "type": "fs",
        "base_path": "/path/to/cache",
        "serde": {"type": "fp8", "fp8_dtype": "float8_e4m3fn"},
    }
    assert "margin to the 1% budget 0.20% points" in choice.statement
    # the better choice: fewest bytes among writable scopes (PER_PAGE_HEAD is not writable),
    # on its own labelled line, never in the recommendation's statement
    assert choice.better is not None
    assert (choice.better["serde"], choice.better["scope"]) == ("asym_k16_v8_v_only", "PER_TENSOR")
    assert choice.newer.startswith("Needs a newer release: asym_k16_v8_v_only PER_TENSOR")
    assert "registers 'asym_k16_v8_v_only'" in choice.newer and "K kept in L1" in choice.newer
    assert "asym" not in choice.statement


def test_fp8_out_of_budget_leaves_no_serde(only_fp8: None) -> None:
    choice = serde_choice.choose_serde(
        serde_choice.serde_table(_rows(0.015), pd.DataFrame()), "m", 256
    )
    assert choice.chosen is not None and choice.chosen["serde"] == "none"
    assert json.loads(choice.config) == {"type": "fs", "base_path": "/path/to/cache"}
    assert "Plain fp8 (K and V cast to e4m3, no scale) is out of budget" in choice.statement
    assert "+1.50%]" in choice.statement


def test_a_lossless_serde_ties_with_none_and_a_skipped_one_is_a_row_never_chosen(
    only_fp8: None,
) -> None:
    rows = _rows(0.015)
    exact = [
        ("aesgcm", "NONE", d, m, v, v, v, 256)
        for d in ("float16", "bfloat16")
        for m, v in (("kl", 0.0), ("top1", 1.0), ("ppl_change", 0.0))
    ] + [("aesgcm", "NONE", d, "l2_bytes_per_token", 1000.1, None, None, 256) for d in ("float16",)]
    extra = pd.DataFrame(exact, columns=COLUMNS).assign(layer=None, exact=True)
    table = serde_choice.serde_table(
        pd.concat([rows, extra]), pd.DataFrame(), {"turboquant": "needs CUDA"}
    )
    choice = serde_choice.choose_serde(table, "m", 256)
    assert choice.chosen is not None and choice.chosen["serde"] == "none"  # fewer bytes
    by = choice.table.set_index("serde")
    assert bool(by.loc["aesgcm", "exact"]) and by.loc["aesgcm", "within_budget"]
    assert by.loc["turboquant", "skipped"] == "needs CUDA"
    assert not by.loc["turboquant", "within_budget"] and not by.loc["turboquant", "chosen"]


def test_error_vs_context_is_one_column_per_context() -> None:
    rows = pd.concat([_rows(0.008), _rows(0.008).assign(context=2048, value=lambda f: f.value * 3)])
    table = context_table(rows)
    assert list(table.columns) == ["serde", "scope", "KL at 256", "KL at 2048"]
    fp8 = table[table["serde"] == "fp8"].iloc[0]
    assert fp8["KL at 2048"] == pytest.approx(3 * fp8["KL at 256"])
    assert context_table(_rows(0.008)).empty  # one context: no table


def test_speed_comes_from_serde_rows_else_the_codec_encode(only_fp8: None) -> None:
    throughput = pd.DataFrame(
        [
            ("serialize", "upstream", "cpu", "PER_TENSOR", 2.0),
            ("serialize", "upstream", "cpu", "PER_TENSOR", 4.0),
            ("deserialize", "reference", "cpu", "PER_TENSOR", 1.0),
            ("serialize_v_only", "reference", "cpu", "PER_TENSOR", 5.0),
            ("encode", "reference", "cpu", "PER_PAGE_HEAD", 1.5),
            ("encode", "reference", "cuda", "PER_PAGE_HEAD", 300.0),
        ],
        columns=["op", "impl", "device", "scope", "gbps"],
    )
    table = serde_choice.serde_table(_rows(0.008), throughput).set_index(["serde", "scope"])
    assert table.loc[("asym_k16_v8", "PER_TENSOR"), "speed"] == (
        "deserialize 1.00 GB/s (reference, cpu); serialize 3.00 GB/s (upstream, cpu)"
    )
    assert table.loc[("asym_k16_v8_v_only", "PER_TENSOR"), "speed"] == (
        "serialize_v_only 5.00 GB/s (reference, cpu)"
    )
    assert table.loc[("asym_k16_v8_v_only", "PER_PAGE_HEAD"), "speed"].startswith(
        "codec encode 1.50 GB/s on cpu, 300.00 GB/s on cuda"
    )
    assert table.loc[("fp8", "NO_SCALE"), "speed"] == "not measured"


def test_speed_is_the_store_path_through_lmcache_where_the_run_measured_it(
    only_fp8: None,
) -> None:
    """fp8 and no serde have no codec rows; their store and load through LMCache's storage
    manager on the page's adapter are what they cost (other adapters' rows are not it)."""
    rows = [
        ("store", "lmcache", "fs:fp8", 1.0, "m1"),
        ("store", "lmcache", "fs:fp8", 3.0, "m2"),
        ("load", "lmcache", "fs:fp8", 4.0, "m1"),
        ("copy", "direct_get", "fs:fp8", 40.0, "m1"),
        ("store", "lmcache", "resp:fp8", 9.0, "m1"),
        ("load", "lmcache", "fs:none", 5.0, "m1"),
        ("store", "lmcache", "fs:none", 6.0, "m1"),
    ]
    throughput = pd.DataFrame(
        [(op, impl, case, gbps, machine, 1e9, 1 / gbps) for op, impl, case, gbps, machine in rows],
        columns=["op", "impl", "case", "gbps", "machine", "bytes", "median_s"],
    ).assign(device="cpu", scope=None, q25_s=lambda f: f.median_s, q75_s=lambda f: f.median_s)
    throughput = throughput.assign(rounds=3)
    table = serde_choice.serde_table(_rows(0.008), throughput).set_index(["serde", "scope"])
    assert table.loc[("fp8", "NO_SCALE"), "speed"] == (
        "store 2.00 GB/s, load 4.00 GB/s through LMCache on fs"
    )
    assert table.loc[("none", "NONE"), "speed"] == (
        "no transform; store 6.00 GB/s, load 5.00 GB/s through LMCache on fs"
    )
    assert table.loc[("asym_k16_v8", "PER_TENSOR"), "speed"] == "not measured"
