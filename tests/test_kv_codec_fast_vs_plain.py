"""quant_fast (what the codec runs) equals quant_rules (the rule as SPEC.md writes it) byte
for byte: scales, FP8 bytes and dequantized values, in every scope and axis order, with
special values, and on both sides of every size threshold of the fast path."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lmckv.reference_impl.kv_codec import ScaleScope, quant_fast, quant_numba, quant_rules

V_DTYPES = [torch.float16, torch.bfloat16, torch.float32]
SCALE_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
OUT_DTYPES = [torch.float16, torch.bfloat16, torch.float32]


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bytes of ``t`` (so that NaN compares equal to the same NaN)."""
    return t.reshape(-1).view(torch.uint8)


def assert_same_bytes(fast: torch.Tensor, plain: torch.Tensor) -> None:
    assert fast.dtype == plain.dtype and fast.shape == plain.shape
    assert torch.equal(bits(fast), bits(plain))


def assert_same_values(fast: torch.Tensor, plain: torch.Tensor) -> None:
    """Q-DEQUANT's outputs: the same bytes, except that a NaN may be any NaN (SPEC.md
    leaves an output NaN's sign and payload open; torch's own casts differ)."""
    assert fast.dtype == plain.dtype and fast.shape == plain.shape
    nan = torch.isnan(plain.float()).reshape(-1)
    assert bool(torch.isnan(fast.float()).reshape(-1)[nan].all())
    width = plain.element_size()
    keep = ~nan
    assert torch.equal(bits(fast).view(-1, width)[keep], bits(plain).view(-1, width)[keep])


@contextmanager
def thresholds(
    block: int, small: int, listed: int, kernels: bool = False, numel: int = 0
) -> Iterator[None]:
    """quant_fast with other size thresholds (and a fresh per-thread scratch sized to the
    block), so that small tensors take the multi-block and large-tensor paths; with
    ``kernels`` the numba kernels run where they apply (``quant_numba``), without it the
    torch path does. The block is at least 1/64 of ``numel``, to keep the count of
    Python-level blocks small."""
    block = max(block, numel // 64)
    with (
        mock.patch.object(quant_numba, "ENABLED", kernels and quant_numba.AVAILABLE),
        mock.patch.object(quant_fast, "_BLOCK", block),
        mock.patch.object(quant_fast, "_SMALL", small),
        mock.patch.object(quant_fast, "_LISTED_SCALES", listed),
        mock.patch.object(quant_fast, "_scratch", threading.local()),
    ):
        yield


@st.composite
def cases(draw: st.DrawFn) -> tuple[torch.Tensor, ScaleScope, int, int | None]:
    """V (with special values planted in some groups), a scope and its axes."""
    scope = draw(st.sampled_from([ScaleScope.PER_TENSOR, ScaleScope.PER_LAYER_HEAD,
                                  ScaleScope.PER_PAGE_HEAD]))  # fmt: skip
    ndim = draw(st.integers(2 if scope == ScaleScope.PER_PAGE_HEAD else 1, 4))
    shape = draw(st.lists(st.integers(1, 7) | st.just(0), min_size=ndim, max_size=ndim))
    if draw(st.integers(0, 7)) == 0:  # now and then a tensor above the default block size
        shape[draw(st.integers(0, ndim - 1))] = draw(st.integers(300_000, 600_000)) // max(
            1, torch.Size(shape).numel()
        )
    head_axis = draw(st.integers(-ndim, ndim - 1))
    page_axis = None
    if scope == ScaleScope.PER_PAGE_HEAD:
        others = [a for a in range(ndim) if a != head_axis % ndim]
        page_axis = draw(st.sampled_from(others))
        page_axis -= draw(st.sampled_from([0, ndim]))  # negative spellings too
    dtype = draw(st.sampled_from(V_DTYPES))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    magnitude = draw(st.sampled_from([1e-40, 6e-8, 1e-3, 1.0, 300.0, 6e4]))
    v = (torch.randn(shape, generator=g) * magnitude).to(dtype)
    if v.numel():
        flat = v.view(-1)
        for special in draw(st.lists(st.sampled_from(["nan", "inf", "-inf", "-0", "sub"]))):
            i = draw(st.integers(0, flat.numel() - 1))
            tiny = float(torch.finfo(dtype).smallest_normal) / 4
            flat[i] = {"nan": float("nan"), "inf": float("inf"), "-inf": -float("inf"),
                       "-0": -0.0, "sub": tiny}[special]  # fmt: skip
        if scope != ScaleScope.PER_TENSOR and draw(st.booleans()):  # an all-zero group
            v.select(head_axis, draw(st.integers(0, v.shape[head_axis] - 1))).zero_()
    return v, scope, head_axis, page_axis


size_thresholds = st.tuples(
    st.sampled_from([16, 1000, 1 << 18]),  # _BLOCK
    st.sampled_from([64, 1 << 22]),  # _SMALL
    st.sampled_from([0, 4, 256]),  # _LISTED_SCALES
    st.booleans(),  # the numba kernels (where numba is installed) or the torch path
)


@given(case=cases(), sizes=size_thresholds, data=st.data())
def test_scales_quantize_dequantize_equal_the_rules(case, sizes, data) -> None:
    v, scope, head_axis, page_axis = case
    axes = {"head_axis": head_axis, "page_axis": page_axis}
    scale_dtype = data.draw(st.sampled_from(SCALE_DTYPES))
    out_dtype = data.draw(st.sampled_from(OUT_DTYPES))
    with thresholds(*sizes, v.numel()):
        plain_s = quant_rules.v_scales(v, scope, **axes)
        fast_s = quant_fast.compute_v_scales(v, scope, **axes)
        assert_same_bytes(fast_s, plain_s)
        stored = plain_s.to(scale_dtype)  # Q-SCALE: the converted scales quantize
        plain_q = quant_rules.quantize(v, stored, scope, **axes)
        assert_same_bytes(quant_fast.quantize_v_fp8(v, stored, scope, **axes), plain_q)
        plain_v = quant_rules.dequantize(plain_q, stored, scope, out_dtype=out_dtype, **axes)
        fast_v = quant_fast.dequantize_v_fp8(plain_q, stored, scope, out_dtype=out_dtype, **axes)
        assert_same_values(fast_v, plain_v)


STATIC_SCALES = [1.0, 0.5, 3e-3, 1e-39, 1e-45, 1e-30, float("inf"), float("nan")]


@st.composite
def static_scales(draw: st.DrawFn, shape: torch.Size) -> torch.Tensor:
    """Caller-given scales of ``shape``: normal, subnormal, tiny (V saturates), Inf, NaN."""
    palette = torch.tensor(draw(st.lists(st.sampled_from(STATIC_SCALES), min_size=1)))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    return palette[torch.randint(len(palette), shape, generator=g)]


def assert_same_bytes_but_nan_pairs(
    fast: torch.Tensor, plain: torch.Tensor, src: torch.Tensor, scales: torch.Tensor
) -> None:
    """assert_same_bytes, except that where both the element and its scale are NaN only
    NaN-ness must agree: IEEE 754 leaves the sign of an operation on two NaNs open, and
    torch's vector and scalar loops pick different ones (so even one whole-tensor op gives
    different signs at different positions). Q-SCALE never makes a NaN scale; a caller can."""
    both_nan = torch.isnan(src.to(torch.float32)) & torch.isnan(scales).expand(src.shape)
    assert fast.dtype == plain.dtype and fast.shape == plain.shape
    assert bool(torch.isnan(fast.float())[both_nan].all())
    assert bool(torch.isnan(plain.float())[both_nan].all())
    fast_bits = fast.reshape(-1).view(torch.uint8).view(-1, fast.element_size())
    plain_bits = plain.reshape(-1).view(torch.uint8).view(-1, plain.element_size())
    keep = ~both_nan.reshape(-1)
    assert torch.equal(fast_bits[keep], plain_bits[keep])


@given(case=cases(), sizes=size_thresholds, data=st.data())
def test_static_and_external_scales_equal_the_rules(case, sizes, data) -> None:
    """Scales from the caller (any scope, EXTERNAL broadcast from trailing axes): values
    beyond the FP8 range saturate, subnormal and non-finite scales follow the formulas."""
    v, scope, head_axis, page_axis = case
    if data.draw(st.booleans()):
        ndim = data.draw(st.integers(0, v.ndim))
        trailing = v.shape[v.ndim - ndim :]
        shape = torch.Size(d if data.draw(st.booleans()) else 1 for d in trailing)
        scope, head_axis, page_axis = ScaleScope.EXTERNAL, -2, None
    else:
        shape = quant_rules.v_scales(v, scope, head_axis=head_axis, page_axis=page_axis).shape
    scales = data.draw(static_scales(shape))
    axes = {"head_axis": head_axis, "page_axis": page_axis}
    grouped = quant_rules.group_scales(scales, v.shape, scope, head_axis, page_axis)
    with thresholds(*sizes, v.numel()):
        plain_q = quant_rules.quantize(v, scales, scope, **axes)
        fast_q = quant_fast.quantize_v_fp8(v, scales, scope, **axes)
        assert_same_bytes_but_nan_pairs(fast_q, plain_q, v, grouped)
        out_dtype = data.draw(st.sampled_from(OUT_DTYPES))
        plain_v = quant_rules.dequantize(plain_q, scales, scope, out_dtype=out_dtype, **axes)
        fast_v = quant_fast.dequantize_v_fp8(plain_q, scales, scope, out_dtype=out_dtype, **axes)
        assert_same_values(fast_v, plain_v)


def test_every_fp8_byte_dequantizes_the_same() -> None:
    """All 256 e4m3fn patterns (NaNs, subnormals, +-0, +-448) against several scales."""
    q = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn)
    q = q.view(1, 256).expand(4, 256).contiguous()
    scales = torch.tensor([1.0, 1e-40, 3e38, float("inf")])
    for out_dtype in OUT_DTYPES:
        plain = quant_rules.dequantize(q, scales, ScaleScope.PER_LAYER_HEAD, out_dtype=out_dtype,
                                       head_axis=0)  # fmt: skip
        fast = quant_fast.dequantize_v_fp8(q, scales, ScaleScope.PER_LAYER_HEAD,
                                           out_dtype=out_dtype, head_axis=0)  # fmt: skip
        assert_same_values(fast, plain)


@pytest.mark.parametrize("scope", [ScaleScope.PER_TENSOR, ScaleScope.PER_PAGE_HEAD])
def test_above_the_default_small_threshold(scope: ScaleScope) -> None:
    """A tensor past quant_fast's real _SMALL (two-pass amax) and _BLOCK (many blocks)."""
    pages = quant_fast._SMALL // (16 * 8 * 64) + 1
    v = (torch.randn(pages, 16, 8, 64, generator=torch.Generator().manual_seed(7)) * 9).half()
    v[1, 2, 3, 4] = float("nan")
    v[2, 0, 0, 0] = 6e4
    axes = {"head_axis": 2, "page_axis": 0 if scope == ScaleScope.PER_PAGE_HEAD else None}
    assert v.numel() > quant_fast._SMALL
    plain_s = quant_rules.v_scales(v, scope, **axes)
    assert_same_bytes(quant_fast.compute_v_scales(v, scope, **axes), plain_s)
    plain_q = quant_rules.quantize(v, plain_s, scope, **axes)
    assert_same_bytes(quant_fast.quantize_v_fp8(v, plain_s, scope, **axes), plain_q)
    plain_v = quant_rules.dequantize(plain_q, plain_s, scope, **axes)
    assert_same_values(quant_fast.dequantize_v_fp8(plain_q, plain_s, scope, **axes), plain_v)


def test_a_thread_keeps_a_bounded_number_of_scratch_views() -> None:
    """The per-thread scratch views are keyed by shape and capped at _SCRATCH_VIEWS."""
    s = torch.tensor(1.0)
    with thresholds(1 << 18, 1 << 22, 256):
        for n in range(1, 3 * quant_fast._SCRATCH_VIEWS):
            v = torch.full((n,), float(n), dtype=torch.float16)
            q = quant_fast.quantize_v_fp8(v, s, ScaleScope.PER_TENSOR)
            assert_same_bytes(q, quant_rules.quantize(v, s, ScaleScope.PER_TENSOR))
            assert len(quant_fast._scratch.views) <= quant_fast._SCRATCH_VIEWS
