"""The golden set's quantized V, scales and dequantized V, recomputed by the torch-free
oracle (conformance/oracle), and the oracle's roundings checked against PyTorch's casts.

Every encode vector is re-quantized from its stored K/V inputs (and static scales) and must
give the golden blob's V and scale sections byte for byte; every dequant expectation is
recomputed from the golden blob's stored V and scales and must give the golden bytes, or
be refused where the golden set expects an error.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lmckv.conformance.core import blob_model
from lmckv.conformance.core.golden_vectors import golden_file, vectors
from lmckv.conformance.oracle.float_bits import BFLOAT16, E4M3FN, FLOAT16, round_float32, to_float32
from lmckv.conformance.oracle.fp8_quant import (
    OracleRefusal,
    Scope,
    clamp_fp8,
    dequantize,
    divide,
    group_scales,
    quantize,
    read_scales,
    scale_grid,
    stored_scales,
    widen,
)
from lmckv.conformance.oracle.logical_shape import logical_shape

CODEC = vectors("codec")
ENCODED = [v for v in CODEC if "encode" in v and v["result"] == "valid"]
DEQUANT = [v for v in CODEC if "dequant" in v.get("decode", {})]
SCALE_DTYPE_IDS = {1: "float16", 2: "float16", 3: "bfloat16", 4: "float32", 5: "float64"}


def _sections(vector: dict[str, Any]) -> tuple[blob_model.Header, bytes, bytes, bytes]:
    """Header and the K, V, scale sections of a vector's golden blob."""
    parsed = blob_model.parse(golden_file(vector["blob"]))
    h = parsed.header
    k_end = h.k_payload_len
    v_end = k_end + h.v_payload_len
    p = parsed.payload
    return h, p[:k_end], p[k_end:v_end], p[v_end:]


def oracle_encode(enc: dict[str, Any]) -> tuple[bytes, bytes]:
    """(FP8 V bytes, scale bytes) the oracle writes for an encode request."""
    shape = tuple(enc["shape"])
    scope = Scope(enc["scale_scope"])
    v = widen(enc["dtype"], golden_file(enc["v_file"]), shape)
    if "v_scales_file" in enc:
        given_scales = np.frombuffer(golden_file(enc["v_scales_file"]), dtype="<f4")
        scales = given_scales.astype(np.float32).reshape(tuple(enc["scales_shape"]))
    else:
        scales = group_scales(v, scope, enc["head_axis"], enc["page_axis"])
    scale_bytes, used = stored_scales(scales, enc["scale_dtype"])
    grid = scale_grid(used, shape, scope, enc["head_axis"], enc["page_axis"])
    return quantize(v, grid).tobytes(), scale_bytes


def oracle_dequant(vector: dict[str, Any], out_dtype: str) -> tuple[bytes, tuple[int, ...]]:
    """Dequantized V bytes and shape, from the golden blob's stored V and scales as a
    decoder sees them (KV-LOGICAL-SHAPE, Q-DEQUANT, Q-EXTERNAL)."""
    h, _, v_bytes, s_bytes = _sections(vector)
    scope = Scope(h.scale_scope)
    hashes = {k.decode(): val.decode() for k, val in h.hash_pairs}
    ls = logical_shape(
        elements=h.v_payload_len,
        scope=scope,
        kv_head_count=h.kv_head_count,
        head_dim=h.head_dim,
        page_size=h.page_size,
        scale_shape=tuple(h.scale_shape),
        kv_layout=hashes.get("kv_layout", ""),
    )
    shape = ls.shape if ls is not None else (h.v_payload_len,)
    q = np.frombuffer(v_bytes, dtype=np.uint8).reshape(shape)
    if q.size == 0:
        return b"", shape
    if ls is None and scope in (Scope.PER_LAYER_HEAD, Scope.PER_PAGE_HEAD):
        raise OracleRefusal("per-head dequantization needs the head axis")
    scales = read_scales(s_bytes, SCALE_DTYPE_IDS[h.scale_dtype_id], tuple(h.scale_shape))
    if scope == Scope.EXTERNAL and scales.size == 0:
        raise OracleRefusal("EXTERNAL blob without scales")
    head = ls.head_axis if ls is not None else -2
    page = ls.page_axis if ls is not None else None
    grid = scale_grid(scales, shape, scope, head, page)
    return dequantize(q, grid, out_dtype).astype("<u2").tobytes(), shape


@pytest.mark.parametrize("vector", ENCODED, ids=[v["id"] for v in ENCODED])
def test_encode_vector(vector: dict[str, Any]) -> None:
    """Q-SCALE + Q-ROUND (+ Q-EXTERNAL): V and scale sections equal the golden blob's."""
    _, _, want_v, want_s = _sections(vector)
    got_v, got_s = oracle_encode(vector["encode"])
    assert got_s == want_s, f"scales differ: {got_s.hex()} != {want_s.hex()}"
    diff = [i for i, (a, b) in enumerate(zip(got_v, want_v, strict=True)) if a != b]
    assert not diff, f"FP8 V differs at {len(diff)} elements, first {diff[:8]}"


@pytest.mark.parametrize("vector", DEQUANT, ids=[v["id"] for v in DEQUANT])
def test_dequant_vector(vector: dict[str, Any]) -> None:
    """Q-DEQUANT: the dequantized V equals the golden file, or is refused where the golden
    set expects UnsupportedConfigError."""
    want = vector["decode"]["dequant"]
    if "error" in want:
        assert want["error"] == "UnsupportedConfigError"
        with pytest.raises(OracleRefusal):
            oracle_dequant(vector, want["out_v_dtype"])
        return
    got, shape = oracle_dequant(vector, want["out_v_dtype"])
    assert list(shape) == want["shape"]
    assert hashlib.sha256(got).hexdigest() == want["sha256"]
    assert got == golden_file(want["file"])


def _axis_order(enc: dict[str, Any]) -> str:
    if enc["page_axis"] is None:
        return f"head {enc['head_axis']}"
    ndim = len(enc["shape"])
    first = "head" if enc["head_axis"] % ndim < enc["page_axis"] % ndim else "page"
    return f"{first} axis first"


def coverage() -> dict[str, Counter[str]]:
    """Vectors and bytes the two tests above compare, per scope (for the report)."""
    count: dict[str, Counter[str]] = {}
    for v in ENCODED:
        enc = v["encode"]
        c = count.setdefault(Scope(enc["scale_scope"]).name, Counter())
        _, _, want_v, want_s = _sections(v)
        c["encode vectors"] += 1
        c["V bytes"] += len(want_v)
        c["scale bytes"] += len(want_s)
        c[f"axes: {_axis_order(enc)}"] += 1
        c[f"scale dtype {enc['scale_dtype']}"] += 1
    for v in DEQUANT:
        c = count.setdefault(Scope(_sections(v)[0].scale_scope).name, Counter())
        want = v["decode"]["dequant"]
        c["dequant vectors"] += 1
        if "error" in want:
            c["dequant refusals"] += 1
        else:
            c["dequant bytes"] += len(golden_file(want["file"]))
    return count


def test_every_scope_and_axis_order_is_covered() -> None:
    count = coverage()
    for scope, c in sorted(count.items()):
        print(scope, dict(sorted(c.items())))
    assert set(count) == {s.name for s in Scope}
    assert count["PER_PAGE_HEAD"]["axes: head axis first"] > 0
    assert count["PER_PAGE_HEAD"]["axes: page axis first"] > 0
    assert sum(c["encode vectors"] for c in count.values()) == len(ENCODED)
    assert sum(c["dequant vectors"] for c in count.values()) == len(DEQUANT)


# -- the oracle's roundings against PyTorch's own casts -----------------------------------

_ALL16 = np.arange(1 << 16, dtype=np.int64)
_scales = st.floats(
    min_value=2.0**-30, max_value=2.0**20, allow_nan=False, allow_infinity=False, width=32
)


def _torch_bits(t: torch.Tensor) -> np.ndarray:
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()]
    return t.contiguous().view(width).numpy().astype(np.int64) & ((1 << (8 * t.element_size())) - 1)


@pytest.mark.parametrize("fmt,dtype", [(FLOAT16, torch.float16), (BFLOAT16, torch.bfloat16)])
@settings(max_examples=25, deadline=None)
@given(scale=_scales, sign=st.sampled_from([1.0, -1.0]))
def test_e4m3fn_rounding_matches_torch(
    fmt: Any, dtype: torch.dtype, scale: float, sign: float
) -> None:
    """Every 16-bit pattern divided by a scale, clamped (torch's own cast does not saturate
    the way Q-ROUND's clamp does), then rounded to e4m3fn: the oracle's bits equal torch's
    ``to(float8_e4m3fn)``, NaNs included."""
    v = to_float32(fmt, _ALL16)
    s = np.float32(sign * scale)
    x = clamp_fp8(divide(v, np.full(v.shape, s, dtype=np.float32)))
    want = _torch_bits(torch.from_numpy(x.copy()).to(torch.float8_e4m3fn))
    np.testing.assert_array_equal(round_float32(E4M3FN, x), want)


@pytest.mark.parametrize("fmt,dtype", [(FLOAT16, torch.float16), (BFLOAT16, torch.bfloat16)])
@settings(max_examples=25, deadline=None)
@given(scale=_scales)
def test_division_matches_torch(fmt: Any, dtype: torch.dtype, scale: float) -> None:
    """float32(V) / float32(scale) for every 16-bit V: the oracle's float32 quotient equals
    torch's mixed 16/32-bit division, bit for bit (NaN inputs aside, whose sign torch keeps
    only on its vectorized path: see test_reference_keeps_nan_sign)."""
    v16 = torch.from_numpy(_ALL16.astype(np.uint16).view(np.int16)).view(dtype)
    s = torch.full((1,), scale, dtype=torch.float32)
    want = _torch_bits(torch.div(v16, s))
    v = to_float32(fmt, _ALL16)
    got = _torch_bits(torch.from_numpy(divide(v, np.full(v.shape, np.float32(scale)))))
    keep = ~np.isnan(v)
    np.testing.assert_array_equal(got[keep], want[keep])


@pytest.mark.parametrize("out", ["float16", "bfloat16"])
@settings(max_examples=50, deadline=None)
@given(scale=_scales | st.sampled_from([float("inf"), 0.0]))
def test_dequant_rounding_matches_torch(out: str, scale: float) -> None:
    """Every FP8 code times a scale, rounded to float16/bfloat16: the oracle's bits equal
    torch's ``(q.float() * scale).to(out)``, NaN patterns included."""
    codes = np.arange(256, dtype=np.int64)
    q = torch.from_numpy(codes.astype(np.uint8)).view(torch.float8_e4m3fn)
    dtype = torch.float16 if out == "float16" else torch.bfloat16
    want = _torch_bits((q.to(torch.float32) * torch.full((256,), scale)).to(dtype))
    grid = np.full(256, np.float32(scale), dtype=np.float32)
    got = dequantize(codes.astype(np.uint8), grid, out)
    np.testing.assert_array_equal(got, want)


# -- the oracle against the reference, beyond the golden inputs ---------------------------


@st.composite
def _quant_cases(draw: st.DrawFn) -> tuple[Any, ...]:
    """(16-bit dtype, V codes, shape, scope, head axis, page axis) with any axis order."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=2, max_size=4)))
    scope = draw(st.sampled_from([Scope.PER_TENSOR, Scope.PER_LAYER_HEAD, Scope.PER_PAGE_HEAD]))
    head = draw(st.integers(0, len(shape) - 1))
    page = draw(st.sampled_from([a for a in range(len(shape)) if a != head]))
    dtype = draw(st.sampled_from(["float16", "bfloat16"]))
    n = int(np.prod(shape))
    finite = st.integers(0, 0x7BFF if dtype == "float16" else 0x7F7F)
    magnitudes = draw(st.lists(finite, min_size=n, max_size=n))
    signs = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    codes = np.array([m | (0x8000 if s else 0) for m, s in zip(magnitudes, signs, strict=True)])
    return dtype, codes, shape, scope, head, page if scope == Scope.PER_PAGE_HEAD else None


@settings(max_examples=200, deadline=None)
@given(case=_quant_cases(), scale_dtype=st.sampled_from(["float32", "float16", "bfloat16"]))
def test_oracle_matches_reference(case: tuple[Any, ...], scale_dtype: str) -> None:
    """Random finite V in every scope and axis order: the oracle's scales, FP8 V and
    dequantized V equal the reference's."""
    from lmckv.reference_impl.kv_codec import AsymK16V8Codec, ScaleScope

    dtype, codes, shape, scope, head, page = case
    data = codes.astype("<u2").tobytes()
    tdtype = torch.float16 if dtype == "float16" else torch.bfloat16
    vt = torch.frombuffer(bytearray(data), dtype=tdtype).reshape(shape)
    codec = AsymK16V8Codec(
        scale_scope=ScaleScope(int(scope)), scale_dtype=getattr(torch, scale_dtype)
    )
    enc = codec.encode(vt, vt, head_axis=head, page_axis=page)
    payload = bytes(enc.payload)
    want_v = payload[enc.k_payload_len : enc.k_payload_len + enc.v_payload_len]
    want_s = payload[enc.k_payload_len + enc.v_payload_len :]

    v = widen(dtype, data, shape)
    scale_bytes, used = stored_scales(group_scales(v, scope, head, page), scale_dtype)
    q = quantize(v, scale_grid(used, shape, scope, head, page))
    assert scale_bytes == want_s
    assert q.tobytes() == want_v
    for out in ("float16", "bfloat16"):
        deq = codec.decode(
            enc, out_v_dtype=getattr(torch, out), shape=shape, head_axis=head, page_axis=page
        )[1]
        got = dequantize(q, scale_grid(used, shape, scope, head, page), out)
        np.testing.assert_array_equal(got, _torch_bits(deq).reshape(shape))


NAN_BITS = {"float16": (0x7E00, 0xFE00), "bfloat16": (0x7FC0, 0xFFC0)}  # +NaN, -NaN


@pytest.mark.parametrize("path", ["quant_fast", "quant_rules"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n", [4, 17, (1 << 18) + 3])  # short; a tail; past one fast block
def test_reference_keeps_nan_sign(n: int, dtype: str, path: str) -> None:
    """Q-ROUND: NaN stays NaN keeping the sign bit, wherever it sits. torch's scalar
    float16 -> float32 cast (short tensors, tails) loses a negative NaN's sign; the
    reference must not."""
    from lmckv.reference_impl.kv_codec import ScaleScope, quant_fast, quant_rules

    quantize_ref = {"quant_fast": quant_fast.quantize_v_fp8, "quant_rules": quant_rules.quantize}
    plus, minus = NAN_BITS[dtype]
    codes = np.full(n, 0x3C00 if dtype == "float16" else 0x3F80, dtype=np.int64)  # 1.0
    codes[[0, n - 2, n - 1]] = [minus, plus, minus]
    data = codes.astype("<u2").tobytes()
    vt = torch.frombuffer(bytearray(data), dtype=getattr(torch, dtype)).reshape(1, n, 1)
    want = quantize_ref[path](vt, torch.tensor(1.0), ScaleScope.PER_TENSOR).view(torch.uint8)
    oracle = quantize(widen(dtype, data, (1, n, 1)), np.ones((1, n, 1), dtype=np.float32))
    got = want.reshape(-1)
    assert [oracle[0, i, 0] for i in (0, n - 2, n - 1)] == [0xFF, 0x7F, 0xFF]
    assert [got[i].item() for i in (0, n - 2, n - 1)] == [0xFF, 0x7F, 0xFF]
    assert got[1].item() == 0x38  # 1.0: the rest is untouched


@pytest.mark.parametrize("path", ["quant_fast", "quant_rules"])
def test_inf_over_inf_is_written_negative(path: str) -> None:
    """Q-NONFINITE: with an Inf in the group the scale is Inf, and Inf/Inf is written 0xFF
    for +Inf and -Inf alike (x86's default NaN, what the golden vectors hold)."""
    from lmckv.reference_impl.kv_codec import ScaleScope, quant_fast, quant_rules

    quantize_ref = {"quant_fast": quant_fast.quantize_v_fp8, "quant_rules": quant_rules.quantize}
    v = torch.tensor([float("inf"), 1.0, float("-inf"), -2.0], dtype=torch.float16)
    q = quantize_ref[path](v.reshape(1, 4, 1), torch.tensor(float("inf")), ScaleScope.PER_TENSOR)
    assert q.view(torch.uint8).reshape(-1).tolist() == [0xFF, 0x00, 0xFF, 0x80]
