"""Byte identity with lmcache 0.5.6: same inputs give the same blob, in both directions."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch
from kv_blobs import DTYPES, SCOPES, kv

from lmckv.reference_impl.kv_codec import AsymK16V8Codec, CodecHashes, ScaleScope

GEOMETRY = {"page_size": 16, "kv_head_count": 4, "head_dim": 32, "page_axis": 0}
HASHES = {
    "model_id": "meta-llama/Llama-3.1-8B",
    "model_revision_hash": "abc123",
    "tokenizer_hash": "t0k",
    "rope_config_hash": "rope",
    "attention_backend": "FLASH_ATTN",
    "kv_layout": "NHD",
}


def _both(up: ModuleType, scope: ScaleScope, **codec_kw):
    ours = AsymK16V8Codec(scale_scope=scope, **codec_kw)
    theirs = up.AsymK16V8Codec(scale_scope=up.ScaleScope(int(scope)), **codec_kw)
    return ours, theirs


@pytest.mark.parametrize("scope", SCOPES, ids=lambda s: s.name)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("scale_dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("seed", [0, 1])
def test_encode_bytes_identical(upstream_kv_codec, scope, dtype, scale_dtype, seed) -> None:
    k, v = kv((3, 16, 4, 32), dtype, seed=seed, scale=10.0 ** (seed - 1))
    ours, theirs = _both(upstream_kv_codec, scope, scale_dtype=scale_dtype)
    kw = dict(GEOMETRY, layer_id=seed, chunk_id=7, chunk_size=48)
    mine = ours.to_bytes(ours.encode(k, v, hashes=CodecHashes(**HASHES), **kw))
    their = theirs.to_bytes(
        theirs.encode(k, v, hashes=upstream_kv_codec.CodecHashes(**HASHES), **kw)
    )
    assert mine == their


def test_external_precomputed_bytes_identical(upstream_kv_codec) -> None:
    k, v = kv((2, 16, 4, 32), torch.float16)
    ours, theirs = _both(upstream_kv_codec, ScaleScope.EXTERNAL)
    s = torch.tensor(0.02)
    q = (v.float() / s).clamp(-448, 448).to(torch.float8_e4m3fn)
    kw = dict(GEOMETRY, precomputed_v_quant=q, precomputed_v_scales=s)
    assert ours.to_bytes(ours.encode(k, v, **kw)) == theirs.to_bytes(theirs.encode(k, v, **kw))


def test_special_values_bytes_identical(upstream_kv_codec) -> None:
    k, v = kv((2, 16, 4, 32), torch.float16)
    v[0, 0, 0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e-7])
    v[1, :, 2] = 0  # an all-zero (page, head) group
    for scope in SCOPES:
        ours, theirs = _both(upstream_kv_codec, scope)
        mine = ours.to_bytes(ours.encode(k, v, **GEOMETRY))
        assert mine == theirs.to_bytes(theirs.encode(k, v, **GEOMETRY)), scope.name


@pytest.mark.parametrize("scope", SCOPES, ids=lambda s: s.name)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reference_decodes_upstream_blobs(upstream_kv_codec, scope, dtype) -> None:
    k, v = kv((3, 16, 4, 32), dtype, seed=5)
    ours, theirs = _both(upstream_kv_codec, scope)
    blob = theirs.to_bytes(theirs.encode(k, v, **GEOMETRY))
    k2, _, _ = ours.decode(ours.from_bytes(blob))
    assert torch.equal(k2, k)
    _, _, up_scales = theirs.decode(theirs.from_bytes(blob))
    _, v_hat, scales = ours.decode(ours.from_bytes(blob), out_v_dtype=dtype)
    assert torch.equal(scales, up_scales.reshape(scales.shape))
    assert v_hat.shape == v.shape
    if scope == ScaleScope.PER_TENSOR:  # the one scope upstream can dequantize
        _, up_v, _ = theirs.decode(theirs.from_bytes(blob), out_v_dtype=dtype)
        assert torch.equal(v_hat.reshape(-1), up_v)


@pytest.mark.parametrize("scope", SCOPES, ids=lambda s: s.name)
def test_upstream_parses_reference_blobs(upstream_kv_codec, scope) -> None:
    k, v = kv((2, 16, 4, 32), torch.bfloat16, seed=9)
    ours, theirs = _both(upstream_kv_codec, scope)
    blob = bytes(ours.to_bytes(ours.encode(k, v, hashes=CodecHashes(**HASHES), **GEOMETRY)))
    enc = theirs.from_bytes(blob)
    assert enc.scale_scope == int(scope)
    assert enc.hashes.model_id == HASHES["model_id"]
    up_k, up_q, _ = theirs.decode(enc)
    assert torch.equal(up_k, k.reshape(-1))
    _, q, _ = ours.decode(ours.from_bytes(blob))
    assert torch.equal(up_q.view(torch.uint8), q.reshape(-1).view(torch.uint8))
