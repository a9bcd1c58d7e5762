"""A small blob's payload written by one kernel call (``quant_fast.small_payload``,
``quant_numba.encode_small_into``) is byte for byte the blob of the separate steps (scales
by Q-SCALE, K copied, V by Q-ROUND, each held to ``quant_rules`` by its own tests): every
scope and axis order (the stored (page, head) table transposed where the page axis comes
after the head axis), V in float16, bfloat16 and float32, K-less blobs, NaN, Inf, zeros and
subnormal magnitudes; and the blobs it does not take go the separate way."""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lmckv.reference_impl.kv_codec import AsymK16V8Codec, ScaleScope, codec, quant_fast, quant_numba

pytestmark = pytest.mark.skipif(not quant_numba.AVAILABLE, reason="numba is not installed")

COMPUTED = [ScaleScope.PER_TENSOR, ScaleScope.PER_LAYER_HEAD, ScaleScope.PER_PAGE_HEAD]


@st.composite
def blobs(draw: st.DrawFn) -> tuple[ScaleScope, torch.Tensor | None, torch.Tensor, dict]:
    """(scope, K or None, V, encode's axis keywords) with specials planted in V."""
    scope = draw(st.sampled_from(COMPUTED))
    ndim = draw(st.integers(2 if scope == ScaleScope.PER_PAGE_HEAD else 1, 4))
    shape = draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim))
    head_axis = draw(st.integers(0, ndim - 1))
    page_axis = None
    if scope == ScaleScope.PER_PAGE_HEAD:
        page_axis = draw(st.sampled_from([a for a in range(ndim) if a != head_axis]))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    magnitude = draw(st.sampled_from([0.0, 1e-40, 6e-8, 1e-3, 1.0, 300.0, 6e4]))
    v = (torch.randn(shape, generator=gen) * magnitude).to(
        draw(st.sampled_from([torch.float16, torch.bfloat16, torch.float32]))
    )
    flat = v.view(-1)
    for special in draw(st.lists(st.sampled_from([float("nan"), -float("nan"), float("inf"),
                                                  -float("inf"), -0.0]), max_size=4)):  # fmt: skip
        flat[draw(st.integers(0, flat.numel() - 1))] = special
    k_dtype = draw(st.sampled_from([torch.float16, torch.bfloat16]))
    k = None if draw(st.booleans()) else torch.randn(shape, generator=gen).to(k_dtype)
    axes = {"head_axis": head_axis, "page_axis": page_axis, "k_dtype": k_dtype}
    return scope, k, v, axes


def separate_steps(c: AsymK16V8Codec, k: torch.Tensor | None, v: torch.Tensor, **kw) -> bytes:
    """The blob with the one-call path turned off."""
    with mock.patch.object(codec, "small_payload", lambda *a, **k: None):
        return bytes(c.to_bytes(c.encode(k, v, **kw)))


@settings(max_examples=300, deadline=None)
@given(case=blobs())
def test_one_call_writes_the_bytes_of_the_separate_steps(case) -> None:
    scope, k, v, axes = case
    c = AsymK16V8Codec(scale_scope=scope)
    k_like = v.to(axes["k_dtype"]) if k is None else k
    plan = quant_fast.small_payload(
        v, k_like, scope, scale_dtype=torch.float32, fp8_dtype=torch.float8_e4m3fn,
        head_axis=axes["head_axis"], page_axis=axes["page_axis"],
    )  # fmt: skip
    assert plan is not None  # the case exercises the one-call path
    with mock.patch.object(codec, "write_small_payload", wraps=codec.write_small_payload) as spy:
        fused = bytes(c.to_bytes(c.encode(k, v, **axes)))
    assert spy.call_count == 1
    assert fused == separate_steps(c, k, v, **axes)


def test_a_v_that_requires_grad_is_read_as_it_is() -> None:
    k = torch.randn(1, 16, 2, 8, dtype=torch.float16)
    v = torch.randn(1, 16, 2, 8, requires_grad=True)
    c = AsymK16V8Codec(scale_scope=ScaleScope.PER_LAYER_HEAD)
    assert bytes(c.to_bytes(c.encode(k, v))) == separate_steps(c, k, v)


def _plan(v: torch.Tensor, k: torch.Tensor, **kw) -> quant_numba.SmallPayload | None:
    args = {"scope": ScaleScope.PER_LAYER_HEAD, "scale_dtype": torch.float32,
            "fp8_dtype": torch.float8_e4m3fn, "head_axis": -2, "page_axis": None} | kw  # fmt: skip
    scope = args.pop("scope")
    return quant_fast.small_payload(v, k, scope, **args)


def test_what_the_one_call_does_not_take() -> None:
    v = torch.randn(2, 16, 2, 8, dtype=torch.float16)
    k = v.clone()
    assert _plan(v, k) is not None
    assert _plan(v.transpose(0, 1), k.transpose(0, 1)) is None  # V not contiguous
    assert _plan(v, k.transpose(0, 1).contiguous().transpose(0, 1)) is None  # K not contiguous
    assert _plan(v, k, scope=ScaleScope.EXTERNAL) is None  # scales come from the caller
    assert _plan(v, k, scale_dtype=torch.float16) is None  # stored scales not float32
    assert _plan(v[:0], k[:0]) is None  # nothing to quantize
    big = torch.zeros(quant_numba.PARALLEL_MIN, dtype=torch.float16)
    assert _plan(big, big, head_axis=0) is None  # the threaded kernels' size
    with mock.patch.object(quant_numba, "ENABLED", False):
        assert _plan(v, k) is None  # numba off (LMCKV_NUMBA=0)


def test_precomputed_scales_go_the_separate_way() -> None:
    k = torch.randn(1, 16, 2, 8, dtype=torch.float16)
    c = AsymK16V8Codec(scale_scope=ScaleScope.PER_LAYER_HEAD)
    with mock.patch.object(codec, "write_small_payload") as spy:
        c.encode(k, k, precomputed_v_scales=torch.ones(2))
    assert spy.call_count == 0
