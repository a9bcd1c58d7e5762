"""The quantization rule: scales, rounding, saturation, special values, axis handling."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lmckv.reference_impl.kv_codec import (
    ScaleScope,
    UnsupportedConfigError,
    compute_v_scales,
    dequantize_v_fp8,
    quant_fast,
    quantize_v_fp8,
)
from lmckv.reference_impl.kv_codec.quant_rules import group_scales

QMAX = 448.0


def naive_quantize(v: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """Q-ROUND in one unblocked expression: the definition the blocked code must equal."""
    return torch.clamp(v.float() / s, -QMAX, QMAX).to(torch.float8_e4m3fn)


def test_zero_group_gets_sentinel_scale() -> None:
    v = torch.zeros(2, 3, 4, dtype=torch.float16)
    v[:, 0] = 1.0
    s = compute_v_scales(v, ScaleScope.PER_LAYER_HEAD, head_axis=1)
    one_over_max = float(torch.tensor(1.0) / QMAX)  # computed in float32, as Q-SCALE says
    assert s.tolist() == [one_over_max, 1.0, 1.0]
    q = quantize_v_fp8(v, s, ScaleScope.PER_LAYER_HEAD, head_axis=1)
    assert bool((dequantize_v_fp8(q, s, ScaleScope.PER_LAYER_HEAD, head_axis=1)[:, 1:] == 0).all())


def test_nan_group_gets_sentinel_scale_and_nan_survives() -> None:
    v = torch.tensor([1.0, float("nan"), 600.0], dtype=torch.float16)
    s = compute_v_scales(v, ScaleScope.PER_TENSOR)
    assert float(s) == 1.0  # amax is NaN, and NaN > 0 is false: upstream's behaviour
    q = quantize_v_fp8(v, s, ScaleScope.PER_TENSOR).float()
    assert q[0] == 1.0 and torch.isnan(q[1]) and q[2] == QMAX


def test_inf_makes_scale_inf_and_finite_values_zero() -> None:
    v = torch.tensor([1.0, float("inf")], dtype=torch.float16)
    s = compute_v_scales(v, ScaleScope.PER_TENSOR)
    assert torch.isinf(s)
    q = quantize_v_fp8(v, s, ScaleScope.PER_TENSOR).float()
    assert q[0] == 0.0 and torch.isnan(q[1])


def test_static_scale_saturates_at_max() -> None:
    v = torch.tensor([1000.0, -1000.0, 448.0, 449.0])
    q = quantize_v_fp8(v, torch.tensor(1.0), ScaleScope.PER_TENSOR).float()
    assert q.tolist() == [QMAX, -QMAX, QMAX, QMAX]


def test_subnormals_round_to_nearest_even() -> None:
    step = 2.0**-9  # e4m3fn subnormal spacing
    v = torch.tensor([step, 1.5 * step, 2.5 * step, 0.4 * step, 0.5 * step])
    q = quantize_v_fp8(v, torch.tensor(1.0), ScaleScope.PER_TENSOR).float()
    assert (q / step).tolist() == [1.0, 2.0, 2.0, 0.0, 0.0]


@given(
    shape=st.lists(st.integers(1, 7), min_size=2, max_size=4),
    data=st.data(),
    scope=st.sampled_from([ScaleScope.PER_TENSOR, ScaleScope.PER_LAYER_HEAD]),
    dtype=st.sampled_from([torch.float16, torch.bfloat16, torch.float32]),
)
def test_blocked_equals_naive(shape, data, scope, dtype) -> None:
    ndim = len(shape)
    head_axis = data.draw(st.integers(-ndim, ndim - 1))
    v = (torch.randn(shape) * data.draw(st.floats(1e-3, 1e3))).to(dtype)
    s = compute_v_scales(v, scope, head_axis=head_axis)
    view = [1] * ndim
    if scope == ScaleScope.PER_LAYER_HEAD:
        view[head_axis] = shape[head_axis]
    got = quantize_v_fp8(v, s, scope, head_axis=head_axis)
    want = naive_quantize(v, s.view(view) if view != [1] * ndim else s)
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


def test_blocked_equals_naive_on_large_tensor() -> None:
    v = torch.randn(3, 70_000, dtype=torch.float32) * 7
    s = compute_v_scales(v, ScaleScope.PER_TENSOR)
    got = quantize_v_fp8(v, s, ScaleScope.PER_TENSOR)
    assert torch.equal(got.view(torch.uint8), naive_quantize(v, s).view(torch.uint8))


@pytest.mark.parametrize(("page_axis", "head_axis"), [(0, 2), (2, 0), (1, 2), (2, 1)])
def test_per_page_head_scales_follow_their_group_in_any_axis_order(page_axis, head_axis) -> None:
    shape = [3, 4, 5, 2]
    g = torch.Generator().manual_seed(1)
    v = torch.randn(shape, generator=g) * torch.logspace(-2, 2, 5).view(1, 1, 5, 1)
    s = compute_v_scales(v, ScaleScope.PER_PAGE_HEAD, head_axis=head_axis, page_axis=page_axis)
    assert s.shape == (shape[page_axis], shape[head_axis])
    q = quantize_v_fp8(v, s, ScaleScope.PER_PAGE_HEAD, head_axis=head_axis, page_axis=page_axis)
    reduce = tuple(d for d in range(4) if d not in (page_axis, head_axis))
    group_max = q.float().abs().amax(dim=reduce)
    if page_axis > head_axis:
        group_max = group_max.t()
    # With correct pairing, every group's largest element lands exactly on the e4m3 max.
    assert bool((group_max == QMAX).all())


def test_per_page_head_needs_page_axis() -> None:
    with pytest.raises(UnsupportedConfigError, match="page_axis"):
        compute_v_scales(torch.ones(2, 2, 2), ScaleScope.PER_PAGE_HEAD)


@pytest.mark.parametrize("axis", [3, -4])
def test_axis_out_of_range(axis: int) -> None:
    with pytest.raises(UnsupportedConfigError, match="out of range"):
        compute_v_scales(torch.ones(2, 2, 2), ScaleScope.PER_LAYER_HEAD, head_axis=axis)


def test_wrong_scale_shape() -> None:
    with pytest.raises(UnsupportedConfigError, match="PER_LAYER_HEAD"):
        quantize_v_fp8(torch.ones(2, 3, 4), torch.ones(2), ScaleScope.PER_LAYER_HEAD, head_axis=1)


def test_empty_tensor() -> None:
    v = torch.zeros(0, 2, 4)
    s = compute_v_scales(v, ScaleScope.PER_LAYER_HEAD, head_axis=1)
    assert s.tolist() == [1.0, 1.0]
    assert quantize_v_fp8(v, s, ScaleScope.PER_LAYER_HEAD, head_axis=1).shape == (0, 2, 4)


def test_dequantize_rejects_integer_output() -> None:
    q = torch.zeros(4, dtype=torch.float8_e4m3fn)
    with pytest.raises(UnsupportedConfigError):
        dequantize_v_fp8(q, torch.tensor(1.0), ScaleScope.PER_TENSOR, out_dtype=torch.int32)


def special_values(pages: int, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    v = (torch.randn(pages, 16, 3, 8, generator=g) * 50).to(dtype)
    v[0, 0, 0, 0] = float("nan")
    v[1, 3, 1, 2] = -float("inf")
    v[2, :, 2] = -0.0
    v[3, 5, 0, 1] = -1e-7  # subnormal in float16, tiny in the others
    v[3, :, 1] = 1e-40 if dtype != torch.float16 else 6e-8  # amax / 448: a float32 subnormal
    return v


def float32_rule(v: torch.Tensor, keep: tuple[int, ...]) -> torch.Tensor:
    """Q-SCALE with float32 tensor ops, exactly as the rule is written."""
    amax = v.float().abs().amax(dim=tuple(d for d in range(v.ndim) if d not in keep))
    return torch.where(amax > 0, amax / QMAX, 1.0)


# 4 pages x 3 heads is few groups (scales computed per group in Python floats); 100 pages
# is more than 256 groups (tensor ops): both must give the float32 rule's bits.
@pytest.mark.parametrize("pages", [4, 100])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("scope", [ScaleScope.PER_LAYER_HEAD, ScaleScope.PER_PAGE_HEAD])
def test_scales_equal_float32_definition_with_special_values(pages, dtype, scope) -> None:
    """Q-SCALE in float32, as written in the rule, against the fast per-dtype reductions."""
    v = special_values(pages, dtype)
    got = compute_v_scales(v, scope, head_axis=2, page_axis=0)
    keep = (0, 2) if scope == ScaleScope.PER_PAGE_HEAD else (2,)
    assert torch.equal(got.view(torch.int32), float32_rule(v, keep).view(torch.int32))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize(
    "fill",
    [None, "nan", "-inf", "zero", "tiny"],
    ids=["finite", "nan", "-inf", "all-zero", "tiny"],
)
def test_per_tensor_scale_equals_float32_definition(dtype, fill) -> None:
    """The one-group scale (computed in Python floats for 16/32-bit V) has the bits of the
    float32 rule, special groups included."""
    v = special_values(4, dtype)[3:4, :, 2:3]  # a slab without NaN/Inf
    if fill == "nan":
        v[0, 1, 0, 1] = float("nan")
    elif fill == "-inf":
        v[0, 1, 0, 1] = -float("inf")
    elif fill == "zero":
        v = torch.zeros_like(v)
    elif fill == "tiny":
        v = torch.full_like(v, -1e-40 if dtype != torch.float16 else -6e-8)
    got = compute_v_scales(v, ScaleScope.PER_TENSOR)
    assert got.shape == () and got.dtype == torch.float32
    want = float32_rule(v.to(torch.float32) if dtype == torch.float64 else v, ())
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


@pytest.mark.parametrize(
    ("scope", "kw"),
    [
        (ScaleScope.PER_TENSOR, {}),
        (ScaleScope.PER_LAYER_HEAD, {"head_axis": 2}),
        (ScaleScope.PER_PAGE_HEAD, {"head_axis": 2, "page_axis": 0}),
    ],
)
def test_whole_tensor_arithmetic_equals_the_cpu_blocks(scope, kw) -> None:
    """Off the CPU the same operations run on the whole tensor (``quant_fast._whole``); run on
    CPU tensors here, they must give the blocked path's bytes. A 0-d PER_TENSOR scale
    would make torch divide in float16 and fail this."""
    v = (torch.randn(5, 16, 4, 8, generator=torch.Generator().manual_seed(5)) * 30).half()
    s = compute_v_scales(v, scope, **kw)
    out = torch.empty(v.shape, dtype=torch.float8_e4m3fn)
    view = group_scales(s, v.shape, scope, kw.get("head_axis", -2), kw.get("page_axis"))
    quant_fast._whole(v, view, out, torch.div, QMAX)
    want = quantize_v_fp8(v, s, scope, **kw)
    assert torch.equal(out.view(torch.uint8), want.view(torch.uint8))
    back = torch.empty(v.shape, dtype=torch.float16)
    quant_fast._whole(want, view, back, torch.mul, None)
    assert torch.equal(back, dequantize_v_fp8(want, s, scope, **kw))


def test_threads_quantizing_at_once_get_their_own_results() -> None:
    """Each thread has its own float32 scratch: concurrent calls equal sequential ones."""
    g = torch.Generator().manual_seed(9)
    vs = [(torch.randn(n, 16, 4, 8, generator=g) * (n + 1)).half() for n in (1, 3, 40, 600)]
    scales = [compute_v_scales(v, ScaleScope.PER_TENSOR) for v in vs]

    def quantize(i: int) -> torch.Tensor:
        return quantize_v_fp8(vs[i], scales[i], ScaleScope.PER_TENSOR).view(torch.uint8)

    want = [quantize(i) for i in range(len(vs))]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(quantize, [i for _ in range(8) for i in range(len(vs))]))
    assert all(torch.equal(t, want[i % len(vs)]) for i, t in enumerate(got))
