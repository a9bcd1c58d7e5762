"""Tensors <-> the bytes the testee wire and the golden files carry: C order, little-endian
(TESTEE.md, "Field types")."""

from __future__ import annotations

import torch


def tensor_bytes(t: torch.Tensor) -> bytes:
    """The tensor's elements as contiguous little-endian bytes (copied to the CPU)."""
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes()


def tensor_from_bytes(data: bytes, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
    """Inverse of :func:`tensor_bytes`: a new CPU tensor that owns its memory."""
    if not data:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape).clone()
