"""``encode(out=)`` and ``decode(out_v=)``: the codec writing into the caller's buffers
(SPEC.md, "Codec API notes") gives the bytes and values of the allocating calls, refuses
what does not fit with nothing written, and keeps no copy."""

from __future__ import annotations

import mmap

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lmckv.reference_impl.kv_codec import AsymK16V8Codec, ScaleScope, UnsupportedConfigError
from lmckv.reference_impl.kv_codec.errors import OutputTooSmallError

SCOPES = [ScaleScope.PER_TENSOR, ScaleScope.PER_LAYER_HEAD, ScaleScope.PER_PAGE_HEAD]


def _kv(seed: int, dtype: torch.dtype, pages: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    shape = (pages, 16, 2, 8)
    return (torch.randn(shape, generator=gen) * 3).to(dtype), torch.randn(shape, generator=gen)


GEOMETRY = {"page_size": 16, "kv_head_count": 2, "head_dim": 8, "page_axis": 0}


@settings(max_examples=20, deadline=None)
@given(
    scope=st.sampled_from(SCOPES),
    dtype=st.sampled_from([torch.float16, torch.bfloat16]),
    seed=st.integers(0, 2**31),
    k_less=st.booleans(),
    spare=st.integers(0, 64),
)
def test_encode_into_writes_the_bytes_of_encode(scope, dtype, seed, k_less, spare) -> None:
    codec = AsymK16V8Codec(scale_scope=scope)
    k, v = _kv(seed, dtype)
    v = v.to(dtype)
    args = (None if k_less else k, v)
    want = bytes(codec.to_bytes(codec.encode(*args, k_dtype=dtype, **GEOMETRY)))
    out = bytearray(b"\xa5" * (len(want) + spare))
    enc = codec.encode(*args, k_dtype=dtype, out=out, **GEOMETRY)
    assert bytes(out[: len(want)]) == want and out[len(want) :] == b"\xa5" * spare
    blob = codec.to_bytes(enc)
    assert isinstance(blob, memoryview) and blob.obj is out and len(blob) == len(want)
    assert enc.total_bytes == len(want)


def test_encode_into_a_host_tensor_and_an_mmap() -> None:
    codec = AsymK16V8Codec()
    k, v = _kv(1, torch.bfloat16)
    want = bytes(codec.to_bytes(codec.encode(k, v)))
    t = torch.zeros(len(want), dtype=torch.uint8)
    codec.encode(k, v, out=t.numpy().data)
    assert t.numpy().tobytes() == want
    with mmap.mmap(-1, len(want)) as m:
        codec.encode(k, v, out=m)
        assert m[:] == want


def test_encode_into_refuses_with_nothing_written() -> None:
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_LAYER_HEAD)
    k, v = _kv(2, torch.float16)
    n = len(codec.to_bytes(codec.encode(k, v)))
    small = bytearray(b"\x5a" * (n - 1))
    with pytest.raises(OutputTooSmallError, match="needs"):
        codec.encode(k, v, out=small)
    assert small == b"\x5a" * (n - 1)
    with pytest.raises(UnsupportedConfigError, match="read-only"):
        codec.encode(k, v, out=memoryview(bytes(n)))


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_decode_out_v_holds_the_dequantized_v(scope: ScaleScope, dtype: torch.dtype) -> None:
    codec = AsymK16V8Codec(scale_scope=scope)
    k, v = _kv(3, torch.bfloat16)
    enc = codec.from_bytes(bytearray(codec.to_bytes(codec.encode(k, v, **GEOMETRY))))
    _, want, _ = codec.decode(enc, out_v_dtype=dtype)
    out_v = torch.full((v.numel(),), 7.0, dtype=dtype)
    _, got, _ = codec.decode(enc, out_v_dtype=dtype, out_v=out_v)
    assert got.data_ptr() == out_v.data_ptr() and got.shape == want.shape
    assert torch.equal(got.view(-1).view(torch.uint8), want.reshape(-1).view(torch.uint8))


def test_decode_out_v_refuses_what_does_not_fit() -> None:
    codec = AsymK16V8Codec()
    k, v = _kv(4, torch.float16)
    enc = codec.from_bytes(bytearray(codec.to_bytes(codec.encode(k, v))))
    for out_v, dtype in (
        (torch.empty(v.numel() - 1, dtype=torch.float16), torch.float16),
        (torch.empty(v.numel(), dtype=torch.bfloat16), torch.float16),
        (torch.empty(v.numel(), dtype=torch.float16), None),
    ):
        with pytest.raises(UnsupportedConfigError, match="out_v"):
            codec.decode(enc, out_v_dtype=dtype, out_v=out_v)
