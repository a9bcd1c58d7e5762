"""The bench's preallocated destinations (bench/common/impls.py): an implementation whose codec
takes ``encode(out=)`` and ``decode(out_v=)`` writes into buffers made before timing, the
same bytes and values as its allocating calls; one without them keeps allocating."""

from __future__ import annotations

import types

import torch

from lmckv.bench.common.impls import CodecImpl, CodecOps
from lmckv.bench.throughput.measure import Case, make_layers
from lmckv.reference_impl import kv_codec

CASE = Case("tiny", layers=2, pages=2, heads=2, head_dim=16)


def _ops(module: types.ModuleType) -> CodecOps:
    layers = make_layers(CASE, torch.bfloat16, "cpu", seed=5)
    return CodecOps(CodecImpl("reference", module, None), "PER_LAYER_HEAD", layers)


def test_encode_writes_the_same_bytes_into_the_prepared_buffers() -> None:
    ops = _ops(kv_codec)
    fresh = [bytes(b) for b in ops.encode()]
    ops.prepare("encode", torch.bfloat16)
    for out in ops._outs:
        out[:] = bytes(len(out))
    blobs = ops.encode()
    assert [bytes(b) for b in blobs] == fresh
    assert all(b.obj is out for b, out in zip(blobs, ops._outs, strict=True))


def test_decode_dequant_fills_the_prepared_v_tensors() -> None:
    ops = _ops(kv_codec)
    ops.prepare("decode_dequant", torch.bfloat16)
    outs = ops._v_outs[torch.bfloat16]
    for out in outs:
        out.fill_(7.0)
    ops.op("decode_dequant", torch.bfloat16)()
    codec = ops.codec
    for buf, out in zip(ops.buffers(), outs, strict=True):
        _, want, _ = codec.decode(codec.from_bytes(buf), out_v_dtype=torch.bfloat16)
        assert torch.equal(out.view(torch.int16), want.reshape(-1).view(torch.int16))


class _NoDestinations:
    """A codec module whose encode and decode take no destination keywords."""

    ScaleScope = kv_codec.ScaleScope

    class AsymK16V8Codec:
        def __init__(self, scale_scope: kv_codec.ScaleScope) -> None:
            self._codec = kv_codec.AsymK16V8Codec(scale_scope=scale_scope)

        def encode(self, k: torch.Tensor, v: torch.Tensor, **kwargs: object) -> object:
            return self._codec.encode(k, v, **kwargs)  # type: ignore[arg-type]

        def to_bytes(self, enc: kv_codec.EncodedKV) -> bytearray | memoryview:
            return self._codec.to_bytes(enc)

        def decode(self, enc: kv_codec.EncodedKV, **kwargs: object) -> object:
            return self._codec.decode(enc, **kwargs)  # type: ignore[arg-type]


def test_an_implementation_without_destinations_keeps_allocating() -> None:
    ops = _ops(_NoDestinations)  # type: ignore[arg-type]
    ops.prepare("encode", torch.bfloat16)
    ops.prepare("decode_dequant", torch.bfloat16)
    assert ops._outs == [] and ops._v_outs == {}
    assert all(isinstance(b, bytearray) for b in ops.encode())
