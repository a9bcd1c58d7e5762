"""A serde plugin for the tests: ``lmckv_test_mantissa`` keeps each 16-bit element with its 4
lowest mantissa bits cleared (lossy, the object's size), registered with LMCache's serde
factory as a third-party package registers one (``register()``; LMCache 0.5.3 and later call
``serialize(src, dst, key)``)."""

from __future__ import annotations

from typing import Any

import torch

NAME = "lmckv_test_mantissa"
MASK = 0xFFF0 - 0x10000  # int16: the 4 low bits cleared


class _Serializer:
    def serialize(self, src: Any, dst: Any, key: Any) -> int:
        bits = src.tensor.contiguous().view(torch.int16).reshape(-1) & MASK
        raw = bits.view(torch.uint8)
        dst.tensor.view(torch.uint8).reshape(-1)[: raw.numel()].copy_(raw)
        return int(raw.numel())

    def estimate_serialized_size(self, layout: Any) -> int:
        return sum(
            torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()
            for shape, dtype in zip(layout.shapes, layout.dtypes, strict=True)
        )


class _Deserializer:
    def deserialize(self, src: Any, dst: Any, key: Any) -> None:
        out = dst.tensor.view(torch.uint8).reshape(-1)
        out.copy_(src.tensor.view(torch.uint8).reshape(-1)[: out.numel()])


def register() -> None:
    from lmcache.v1.distributed.serde.async_processor import AsyncSerdeProcessor
    from lmcache.v1.distributed.serde.factory import register_serde_factory

    register_serde_factory(
        NAME, lambda kwargs: AsyncSerdeProcessor(_Serializer(), _Deserializer(), max_workers=1)
    )
