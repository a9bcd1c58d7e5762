"""The numba kernels (``quant_numba``) write the bytes of ``quant_rules`` (SPEC.md,
"Quantization rule"): every 16-bit pattern of float16 and bfloat16 under a set of scales
(0, subnormal, tiny, huge, Inf, NaN), exact ties, saturation, odd lengths, every scope and
axis order, one thread and several; and quant_fast falls back cleanly without numba."""

from __future__ import annotations

import subprocess
import sys
from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lmckv.reference_impl.kv_codec import ScaleScope, quant_numba, quant_rules

pytestmark = pytest.mark.skipif(not quant_numba.AVAILABLE, reason="numba is not installed")

#: Scales that reach every branch of Q-ROUND: saturation (tiny), subnormal results, ties.
SCALES = [1.0, 0.5, 3.0, 1 / 448, 3e-3, 1e-3, 1e-39, 1e-40, 1e-45, 0.0, 1e30,
          float("inf"), float("nan"), -2.0]  # fmt: skip


def all_patterns(dtype: torch.dtype) -> torch.Tensor:
    """Every 16-bit pattern of ``dtype``, NaNs and subnormals included."""
    return torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(dtype)


def kernel_quantize(v: torch.Tensor, grouped: torch.Tensor) -> torch.Tensor:
    out = torch.empty(v.shape, dtype=torch.float8_e4m3fn)
    quant_numba.quantize_into(v.contiguous(), grouped, out)
    return out


def bytes_of(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1).view(torch.uint8)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("parallel", [False, True])
def test_every_16_bit_pattern_under_every_scale(dtype: torch.dtype, parallel: bool) -> None:
    v = all_patterns(dtype)
    minimum = 1 << 10 if parallel else quant_numba.PARALLEL_MIN
    with mock.patch.object(quant_numba, "PARALLEL_MIN", minimum):
        for scale in SCALES:
            s = torch.tensor([scale], dtype=torch.float32)
            want = quant_rules.quantize(v, s, ScaleScope.EXTERNAL)
            got = kernel_quantize(v, s)
            bad = (bytes_of(got) != bytes_of(want)).nonzero()
            assert bad.numel() == 0, (scale, v[bad[:4, 0]], bytes_of(got)[bad[:4, 0]])


def test_ties_round_to_even_and_saturate() -> None:
    """Midpoints between neighbouring e4m3fn values at every exponent (subnormal ones
    included), just above and below them, and values past 448."""
    codes = torch.arange(0x7F, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn)
    grid = codes.float()
    mids = (grid[:-1] + grid[1:]) / 2
    nudged = torch.cat([mids, mids.nextafter(torch.tensor(0.0)), mids.nextafter(grid[1:])])
    v = torch.cat([nudged, torch.tensor([448.0, 464.0, 480.0, 500.0, 1e30, 2.0**-10])])
    v = torch.cat([v, -v])
    for scale in (1.0, 0.25, 2.0**-7):
        s = torch.tensor([scale])
        want = quant_rules.quantize(v * scale, s, ScaleScope.EXTERNAL)
        assert torch.equal(bytes_of(kernel_quantize(v * scale, s)), bytes_of(want))


def test_nan_keeps_vs_sign_and_inf_over_inf_is_0xff() -> None:
    """Q-ROUND / Q-NONFINITE: both NaN signs of V kept; Inf/Inf, 0/0 and x/NaN give 0xFF."""
    raw = {torch.float16: (0x7E00, -0x200, torch.int16),  # +NaN, -NaN (0xFE00)
           torch.bfloat16: (0x7FC0, -0x40, torch.int16),
           torch.float32: (0x7FC00000, -0x400000, torch.int32)}  # fmt: skip
    for dtype, (pos, neg, int_dtype) in raw.items():
        nans = torch.tensor([pos, neg], dtype=int_dtype).view(dtype)  # from bits, signs exact
        rest = torch.tensor([float("inf"), -float("inf"), 0.0, 1.0], dtype=dtype)
        v = torch.cat([nans, rest])
        q = kernel_quantize(v, torch.tensor([float("inf")]))
        assert bytes_of(q).tolist()[:4] == [0x7F, 0xFF, 0xFF, 0xFF]
        assert bytes_of(kernel_quantize(v, torch.tensor([0.0]))).tolist()[4] == 0xFF
        assert bytes_of(kernel_quantize(v, torch.tensor([float("nan")]))).tolist()[5] == 0xFF


@st.composite
def grouped_cases(draw: st.DrawFn) -> tuple[torch.Tensor, ScaleScope, int, int | None]:
    """V of odd sizes in any scope and axis order, with specials planted."""
    scope = draw(st.sampled_from([ScaleScope.PER_TENSOR, ScaleScope.PER_LAYER_HEAD,
                                  ScaleScope.PER_PAGE_HEAD]))  # fmt: skip
    ndim = draw(st.integers(2 if scope == ScaleScope.PER_PAGE_HEAD else 1, 4))
    shape = draw(st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim))
    head_axis = draw(st.integers(0, ndim - 1))
    page_axis = None
    if scope == ScaleScope.PER_PAGE_HEAD:
        page_axis = draw(st.sampled_from([a for a in range(ndim) if a != head_axis]))
    dtype = draw(st.sampled_from([torch.float16, torch.bfloat16, torch.float32]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    magnitude = draw(st.sampled_from([1e-40, 6e-8, 1e-3, 1.0, 300.0, 6e4]))
    v = (torch.randn(shape, generator=g) * magnitude).to(dtype)
    if v.numel():
        flat = v.view(-1)
        for special in draw(st.lists(st.sampled_from([float("nan"), float("inf"), -0.0]))):
            flat[draw(st.integers(0, flat.numel() - 1))] = special
    return v, scope, head_axis, page_axis


@settings(max_examples=150, deadline=None)
@given(case=grouped_cases(), parallel=st.booleans())
def test_scopes_and_axis_orders_equal_the_rules(case, parallel) -> None:
    """amax per group, FP8 bytes and dequantized values against quant_rules."""
    v, scope, head_axis, page_axis = case
    axes = {"head_axis": head_axis, "page_axis": page_axis}
    with mock.patch.object(quant_numba, "PARALLEL_MIN", 8 if parallel else 1 << 16):
        head, page = quant_rules.group_axes(v.ndim, scope, head_axis, page_axis)
        keep = tuple(a for a in (page, head) if a is not None)
        amax = quant_numba.group_absmax(v, keep).float()
        reduce = tuple(a for a in range(v.ndim) if a not in keep)
        if v.numel():
            want_amax = v.float().abs().amax(dim=reduce) if reduce else v.float().abs()
        else:
            want_amax = torch.zeros([v.shape[a] for a in sorted(keep)])
        torch.testing.assert_close(amax, want_amax, rtol=0, atol=0, equal_nan=True)
        scales = quant_rules.v_scales(v, scope, **axes)
        grouped = quant_rules.group_scales(scales, v.shape, scope, head_axis, page_axis)
        want = quant_rules.quantize(v, scales, scope, **axes)
        got = kernel_quantize(v, grouped)
        assert torch.equal(bytes_of(got), bytes_of(want))
        for out_dtype in (torch.float16, torch.bfloat16, torch.float32):
            plain = quant_rules.dequantize(want, scales, scope, out_dtype=out_dtype, **axes)
            fast = torch.empty(v.shape, dtype=out_dtype)
            quant_numba.dequantize_into(want, grouped, fast)
            nan = torch.isnan(plain.float())
            assert bool(torch.isnan(fast.float())[nan].all())  # SPEC: any NaN
            assert torch.equal(fast[~nan].float(), plain[~nan].float())
            assert torch.equal(torch.signbit(fast[~nan]), torch.signbit(plain[~nan]))


def test_quant_fast_falls_back_without_numba() -> None:
    """With numba unimportable, quant_numba says so and quant_fast's torch path still
    writes the rule's bytes."""
    script = """
import sys
sys.modules["numba"] = None
import torch
from lmckv.reference_impl.kv_codec import ScaleScope, quant_fast, quant_numba, quant_rules
assert not quant_numba.AVAILABLE and not quant_numba.ENABLED
v = torch.randn(3, 5, 7).half()
s = quant_fast.compute_v_scales(v, ScaleScope.PER_LAYER_HEAD, head_axis=1)
assert torch.equal(s, quant_rules.v_scales(v, ScaleScope.PER_LAYER_HEAD, head_axis=1))
q = quant_fast.quantize_v_fp8(v, s, ScaleScope.PER_LAYER_HEAD, head_axis=1)
want = quant_rules.quantize(v, s, ScaleScope.PER_LAYER_HEAD, head_axis=1)
assert torch.equal(q.view(torch.uint8), want.view(torch.uint8))
print("fallback ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "fallback ok" in done.stdout
