"""The Triton Q-ROUND kernel (``quant_triton``) writes the bytes of ``quant_rules``: on the
CPU under Triton's interpreter (what CI can run), and on a CUDA device where one exists
(marked cuda): every 16-bit pattern of float16 and bfloat16 under a set of scales, every
scope and axis order, odd lengths around the block size."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lmckv.reference_impl.kv_codec import ScaleScope, quant_rules, quant_triton

#: Set by ``nox -s tests`` (which installs the ``kernels`` extra): without triton these tests
#: then fail instead of skipping, so CI cannot go green without running the kernel.
REQUIRE_TRITON = "LMCKV_REQUIRE_TRITON"

if not quant_triton.AVAILABLE:
    if os.environ.get(REQUIRE_TRITON, "") not in ("", "0"):
        pytest.fail(f"triton is not installed and {REQUIRE_TRITON} is set", pytrace=False)
    pytest.skip("triton is not installed (pip install 'lmckv[kernels]')", allow_module_level=True)

SCALES = [1.0, 3e-3, 1 / 448, 1e-40, 1e-45, 0.0, float("inf"), float("nan"), -2.0]


def triton_quantize(v: torch.Tensor, grouped: torch.Tensor) -> torch.Tensor:
    """The kernel's bytes: compiled for a CUDA ``v``, interpreted for a CPU one."""
    out = torch.empty(v.shape, dtype=torch.float8_e4m3fn, device=v.device)
    assert quant_triton.applies(v, grouped)
    quant_triton.quantize_into(v, grouped, out, interpret=v.device.type == "cpu")
    return out


def bytes_of(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1).view(torch.uint8).cpu()


def every_pattern_matches(device: str) -> None:
    for dtype in (torch.float16, torch.bfloat16):
        v = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(dtype)
        for scale in SCALES:
            s = torch.tensor([scale])
            want = quant_rules.quantize(v, s, ScaleScope.EXTERNAL)
            got = bytes_of(triton_quantize(v.to(device), s.to(device)))
            bad = (got != bytes_of(want)).nonzero()
            assert bad.numel() == 0, (dtype, scale, v[bad[:4, 0]])


def test_every_16_bit_pattern_under_every_scale() -> None:
    every_pattern_matches("cpu")


@settings(max_examples=30, deadline=None)
@given(
    scope=st.sampled_from(
        [ScaleScope.PER_TENSOR, ScaleScope.PER_LAYER_HEAD, ScaleScope.PER_PAGE_HEAD]
    ),
    shape=st.lists(st.integers(1, 11), min_size=3, max_size=4),
    axes=st.permutations([0, 1, 2]),
    dtype=st.sampled_from([torch.float16, torch.bfloat16, torch.float32]),
    seed=st.integers(0, 2**31),
    specials=st.lists(st.sampled_from([float("nan"), float("inf"), -0.0]), max_size=3),
)
def test_scopes_and_axis_orders_equal_the_rules(scope, shape, axes, dtype, seed, specials) -> None:
    shape[-1] = shape[-1] * 97  # runs of odd lengths, across block boundaries
    v = (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 40).to(dtype)
    for i, special in enumerate(specials):
        v.view(-1)[(i * 7919) % v.numel()] = special
    head_axis, page_axis = axes[0], (axes[1] if scope == ScaleScope.PER_PAGE_HEAD else None)
    scales = quant_rules.v_scales(v, scope, head_axis=head_axis, page_axis=page_axis)
    grouped = quant_rules.group_scales(scales, v.shape, scope, head_axis, page_axis)
    want = quant_rules.quantize(v, scales, scope, head_axis=head_axis, page_axis=page_axis)
    assert torch.equal(bytes_of(triton_quantize(v, grouped)), bytes_of(want))


@pytest.mark.cuda
def test_compiled_on_the_device_every_16_bit_pattern() -> None:
    """The compiled kernel on a GPU: what the interpreter cannot show (approximate
    division, flushed subnormals) must not change a byte."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    every_pattern_matches("cuda")
