"""The plain fp8 serde: the reference writes the bytes upstream's ``Fp8QuantizationSerializer``
writes and reads them back as upstream's deserializer does (every element cast to e4m3fn,
no scale); the bench's round trip casts K as well as V."""

from __future__ import annotations

import types
from dataclasses import dataclass

import pytest
import torch
from conftest import import_upstream

from lmckv.bench.accuracy import l2_serdes as serdes
from lmckv.reference_impl.serde import (
    DestinationTooSmallError,
    Fp8QuantizationDeserializer,
    Fp8QuantizationSerializer,
)


@dataclass
class Obj:
    tensor: torch.Tensor


@pytest.fixture(scope="module")
def up_fp8() -> types.ModuleType:
    return import_upstream("lmcache.v1.distributed.serde.fp8")


def _kv(dtype: torch.dtype) -> torch.Tensor:
    gen = torch.Generator().manual_seed(7)
    kv = torch.randn((2, 4, 32, 96), generator=gen) * 40.0
    kv[0, 0, 0, :4] = torch.tensor([1e-4, -3e-3, 500.0, 0.0])  # subnormal, underflow, beyond max
    return kv.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reference_bytes_equal_upstream(up_fp8: types.ModuleType, dtype: torch.dtype) -> None:
    kv = _kv(dtype)
    ours, theirs = (Obj(torch.zeros(kv.numel() + 8, dtype=torch.uint8)) for _ in range(2))
    n = Fp8QuantizationSerializer().serialize(Obj(kv), ours)
    m = up_fp8.Fp8QuantizationSerializer().serialize(Obj(kv), theirs, None)
    assert n == m == kv.numel()
    assert torch.equal(ours.tensor, theirs.tensor)
    back_ours, back_theirs = Obj(torch.empty_like(kv)), Obj(torch.empty_like(kv))
    Fp8QuantizationDeserializer().deserialize(ours, back_ours)
    up_fp8.Fp8QuantizationDeserializer().deserialize(theirs, back_theirs, None)
    assert torch.equal(back_ours.tensor, back_theirs.tensor)


def test_the_cast_loses_what_e4m3_cannot_hold() -> None:
    kv = _kv(torch.float16)
    dst = Obj(torch.zeros(kv.numel(), dtype=torch.uint8))
    Fp8QuantizationSerializer().serialize(Obj(kv), dst)
    back = Obj(torch.empty_like(kv))
    Fp8QuantizationDeserializer().deserialize(dst, back)
    first = back.tensor[0, 0, 0, :4].tolist()
    assert first[0] == 0.0 and first[3] == 0.0  # 1e-4 is below e4m3's smallest subnormal
    assert first[1] == pytest.approx(-(2**-9) * 2, rel=0.5)  # a subnormal: one significant bit
    assert first[2] == 448.0  # beyond e4m3fn's range: torch's cast saturates to its max
    with pytest.raises(DestinationTooSmallError):
        Fp8QuantizationSerializer().serialize(Obj(kv), Obj(torch.zeros(10, dtype=torch.uint8)))


def test_the_bench_round_trip_casts_k_and_v() -> None:
    kv = _kv(torch.float16)
    k, v = kv[0], kv[1]
    k_hat, v_hat, n = serdes.Fp8Serde().roundtrip(k, v)
    assert n == k.numel() + v.numel()
    assert not torch.equal(k_hat, k)  # K went through e4m3 too
    rel = float((v_hat - v).float().norm() / v.float().norm())
    assert 0.0 < rel < 0.1
