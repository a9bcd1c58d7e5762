"""Encode -> bytes -> parse -> decode in every scope, dtype and layout."""

from __future__ import annotations

import pytest
import torch
from kv_blobs import DTYPES, SCOPES, kv

from lmckv.reference_impl.kv_codec import (
    AsymK16V8Codec,
    CodecHashes,
    CorruptEncodedKVError,
    ScaleScope,
    UnsupportedConfigError,
    compute_v_scales,
)

E4M3_HALF_ULP = 2.0**-4  # 3 mantissa bits: relative rounding error <= 2^-4
E4M3_SUBNORMAL_HALF_STEP = 2.0**-10  # subnormal spacing 2^-9, in units of the scale


def _assert_within_e4m3_bound(v: torch.Tensor, v_hat: torch.Tensor, scales: torch.Tensor) -> None:
    """|V' - V| <= half an e4m3 ulp of V, or half a subnormal step, per element (Q-ROUND)."""
    err = (v_hat.float() - v.float()).abs()
    bound = v.float().abs() * E4M3_HALF_ULP + scales * E4M3_SUBNORMAL_HALF_STEP
    assert bool((err <= bound * (1 + 1e-6)).all()), float((err - bound).max())


def _broadcast_scales(scales: torch.Tensor, shape: tuple[int, ...], scope: ScaleScope, axes: dict):
    if scope == ScaleScope.PER_TENSOR:
        return scales.float().reshape(())
    view = [1] * len(shape)
    if scope == ScaleScope.PER_LAYER_HEAD:
        view[axes["head"]] = shape[axes["head"]]
        return scales.float().view(view)
    view[axes["page"]] = shape[axes["page"]]
    view[axes["head"]] = shape[axes["head"]]
    return scales.float().view(view)


LAYOUTS = {
    # name: (shape builder, head axis, page axis)
    "NHD": (lambda p, t, h, d: (p, t, h, d), 2, 0),
    "HND": (lambda p, t, h, d: (p, h, t, d), 1, 0),
}


@pytest.mark.parametrize("scope", SCOPES, ids=lambda s: s.name)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("geometry", [(1, 16, 1, 8), (3, 4, 2, 16), (2, 16, 8, 64)])
def test_round_trip(scope: ScaleScope, dtype: torch.dtype, layout: str, geometry) -> None:
    pages, page_size, heads, dim = geometry
    build, head_axis, page_axis = LAYOUTS[layout]
    shape = build(pages, page_size, heads, dim)
    k, v = kv(shape, dtype, seed=sum(shape), scale=3.0)
    codec = AsymK16V8Codec(scale_scope=scope)
    enc = codec.encode(
        k,
        v,
        hashes=CodecHashes(kv_layout=layout),
        page_size=page_size,
        kv_head_count=heads,
        head_dim=dim,
        head_axis=head_axis,
        page_axis=page_axis,
    )
    blob = codec.to_bytes(enc)
    back = codec.from_bytes(bytes(blob))
    k2, v_q, scales = codec.decode(back)
    assert k2.shape == shape and v_q.shape == shape
    assert torch.equal(k2, k)
    assert v_q.dtype == torch.float8_e4m3fn
    expected = compute_v_scales(v, scope, head_axis=head_axis, page_axis=page_axis)
    assert torch.equal(scales, expected)
    _, v_hat, _ = codec.decode(back, out_v_dtype=torch.float32)
    axes = {"head": head_axis, "page": page_axis}
    _assert_within_e4m3_bound(v, v_hat, _broadcast_scales(scales, shape, scope, axes))
    # every group's largest |q| is the e4m3 maximum: the scale really is per group
    assert float(v_q.float().abs().max()) == 448.0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_unpaged_token_major(dtype: torch.dtype) -> None:
    k, v = kv((10, 2, 8), dtype)
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_LAYER_HEAD)
    enc = codec.from_bytes(codec.to_bytes(codec.encode(k, v, kv_head_count=2, head_dim=8)))
    k2, v2, _ = codec.decode(enc, out_v_dtype=dtype)
    assert k2.shape == (10, 2, 8) and v2.shape == (10, 2, 8) and v2.dtype == dtype


def test_flat_when_header_has_no_geometry() -> None:
    k, v = kv((4, 2, 8), torch.float16)
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_LAYER_HEAD)
    enc = codec.from_bytes(codec.to_bytes(codec.encode(k, v)))
    k2, v_q, _ = codec.decode(enc)
    assert k2.shape == (64,) and v_q.shape == (64,)
    with pytest.raises(UnsupportedConfigError, match="head axis"):
        codec.decode(enc, out_v_dtype=torch.float16)
    _, v2, _ = codec.decode(enc, out_v_dtype=torch.float16, shape=(4, 2, 8), head_axis=1)
    assert v2.shape == (4, 2, 8)


def test_unknown_kv_layout_needs_an_override() -> None:
    k, v = kv((2, 4, 2, 8), torch.float16)
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_PAGE_HEAD)
    enc = codec.encode(
        k, v, hashes=CodecHashes(kv_layout="vllm-xyz"), kv_head_count=2, head_dim=8, page_axis=0
    )
    with pytest.raises(UnsupportedConfigError, match="kv_layout"):
        codec.decode(enc)
    k2, _, _ = codec.decode(enc, layout="NHD")
    assert torch.equal(k2, k)


def test_external_static_scale_stored() -> None:
    k, v = kv((2, 4, 2, 8), torch.float16)
    codec = AsymK16V8Codec(scale_scope=ScaleScope.EXTERNAL)
    one = torch.tensor(1.0)
    enc = codec.from_bytes(
        codec.to_bytes(codec.encode(k, v, precomputed_v_scales=one, kv_head_count=2, head_dim=8))
    )
    assert enc.scale_shape == ()
    _, v_hat, scales = codec.decode(enc, out_v_dtype=torch.float32)
    assert float(scales) == 1.0
    assert v_hat.shape == (8, 2, 8)  # no page_size: [tokens, heads, head_dim]
    want = v.float().clamp(-448, 448).to(torch.float8_e4m3fn).float()
    assert torch.equal(v_hat, want.reshape(8, 2, 8))


def test_external_scales_out_of_band() -> None:
    k, v = kv((2, 4, 2, 8), torch.float16)
    codec = AsymK16V8Codec(scale_scope=ScaleScope.EXTERNAL)
    scale = torch.tensor(0.01)
    q = (v.float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    enc = codec.encode(
        k,
        v,
        precomputed_v_quant=q,
        precomputed_v_scales=torch.empty(0),
        head_dim=8,
        kv_head_count=2,
    )
    assert enc.scale_payload_len == 0
    with pytest.raises(UnsupportedConfigError, match="v_scales"):
        codec.decode(enc, out_v_dtype=torch.float16)
    _, v_hat, _ = codec.decode(enc, out_v_dtype=torch.float32, v_scales=scale)
    assert torch.equal(v_hat, (q.float() * scale).reshape(v_hat.shape))


def test_external_needs_scales() -> None:
    k, v = kv((2, 4), torch.float16)
    with pytest.raises(UnsupportedConfigError, match="EXTERNAL"):
        AsymK16V8Codec(scale_scope=ScaleScope.EXTERNAL).encode(k, v)


def test_precomputed_quant_is_stored_verbatim() -> None:
    k, v = kv((2, 4, 2, 8), torch.bfloat16)
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_LAYER_HEAD)
    scales = torch.tensor([0.5, 0.25])
    q = torch.full(v.shape, 3.0).to(torch.float8_e4m3fn)
    enc = codec.encode(
        k, v, precomputed_v_quant=q, precomputed_v_scales=scales, kv_head_count=2, head_dim=8
    )
    _, q2, s2 = codec.decode(enc)
    assert torch.equal(q2.reshape(-1).view(torch.uint8), q.reshape(-1).view(torch.uint8))
    assert torch.equal(s2, scales)


def test_writable_buffer_gives_views_immutable_gives_copies() -> None:
    k, v = kv((2, 4, 2, 8), torch.float16)
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_PAGE_HEAD)
    blob = codec.to_bytes(codec.encode(k, v, kv_head_count=2, head_dim=8, page_axis=0))
    writable = bytearray(blob)
    k_view, _, _ = codec.decode(codec.from_bytes(writable))
    k_view.view(-1)[0] = 0
    assert writable != blob  # the view aliases the buffer...
    with pytest.raises(CorruptEncodedKVError, match="CRC"):
        codec.from_bytes(writable)  # ...so writing through it is visible to the CRC
    frozen = bytes(blob)
    k_copy, _, _ = codec.decode(codec.from_bytes(frozen))
    k_copy.view(-1)[0] = 0
    assert frozen == blob


def test_to_bytes_returns_encode_buffer_without_copy() -> None:
    k, v = kv((2, 4, 2, 8), torch.float16)
    codec = AsymK16V8Codec()
    enc = codec.encode(k, v)
    assert codec.to_bytes(enc) is enc.blob
    enc.header_bytes = None  # a caller that edits the header gets a fresh serialization
    enc.layer_id = 5
    assert codec.to_bytes(enc) is not enc.blob
    assert codec.from_bytes(codec.to_bytes(enc)).layer_id == 5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kv_head_count": 3, "head_dim": 8}, "inconsistent"),
        ({"page_size": 3, "kv_head_count": 2, "head_dim": 8}, "inconsistent"),
        ({"layer_id": -7}, "inconsistent"),
        ({"layer_id": 2**63}, "out of range"),
    ],
)
def test_encode_refuses_what_the_reader_rejects(kwargs: dict, match: str) -> None:
    k, v = kv((2, 4, 2, 8), torch.float16)
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_PAGE_HEAD)
    with pytest.raises(UnsupportedConfigError, match=match):
        codec.encode(k, v, page_axis=0, **kwargs)


@pytest.mark.parametrize(
    ("k_dtype", "shape_v", "match"),
    [(torch.float32, (2, 4), "float16 or bfloat16"), (torch.float16, (2, 5), "must match")],
)
def test_encode_input_checks(k_dtype: torch.dtype, shape_v: tuple, match: str) -> None:
    with pytest.raises(UnsupportedConfigError, match=match):
        AsymK16V8Codec().encode(torch.zeros(2, 4, dtype=k_dtype), torch.zeros(shape_v))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"fp8_dtype": torch.float8_e5m2}, "reserved"),
        ({"scale_dtype": torch.uint8}, "scale_dtype"),
        ({"scale_scope": 9}, "unknown scale scope"),
    ],
)
def test_codec_configuration_checks(kwargs: dict, match: str) -> None:
    with pytest.raises(UnsupportedConfigError, match=match):
        AsymK16V8Codec(**kwargs)


def test_decode_rechecks_hand_built_encodedkv() -> None:
    k, v = kv((2, 4, 2, 8), torch.float16)
    codec = AsymK16V8Codec()
    enc = codec.encode(k, v)
    enc.v_payload_len += 2
    with pytest.raises(CorruptEncodedKVError):
        codec.decode(enc)


def test_fp16_scale_dtype_round_trip() -> None:
    k, v = kv((2, 4, 2, 8), torch.float16)
    codec = AsymK16V8Codec(scale_dtype=torch.float16, scale_scope=ScaleScope.PER_LAYER_HEAD)
    enc = codec.from_bytes(codec.to_bytes(codec.encode(k, v, kv_head_count=2, head_dim=8)))
    assert enc.scale_dtype == torch.float16 and enc.scale_payload_len == 4
    _, v_hat, scales = codec.decode(enc, out_v_dtype=torch.float32)
    _assert_within_e4m3_bound(v.reshape(8, 2, 8), v_hat, scales.float().view(1, 2, 1))


cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device; this machine has none"
)


@cuda
@pytest.mark.parametrize("scope", SCOPES, ids=lambda s: s.name)
def test_cuda_encode_matches_cpu_bytes(scope: ScaleScope) -> None:
    k, v = kv((4, 16, 8, 64), torch.bfloat16)
    codec = AsymK16V8Codec(scale_scope=scope)
    kw = {"page_size": 16, "kv_head_count": 8, "head_dim": 64, "page_axis": 0}
    on_gpu = codec.to_bytes(codec.encode(k.cuda(), v.cuda(), **kw))
    assert on_gpu == codec.to_bytes(codec.encode(k, v, **kw))
    k2, v2, _ = codec.decode(codec.from_bytes(on_gpu), device="cuda", out_v_dtype=torch.float16)
    assert k2.is_cuda and v2.is_cuda and torch.equal(k2.cpu(), k)
