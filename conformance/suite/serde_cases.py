"""Inputs of the serde tests (test_serde.py): (K, V) groups, requests, and the blob the
codec writes for the same inputs (SPEC.md, "The serde layer")."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from ...reference_impl.kv_codec.header_fields import SCALE_AWARE_SCOPES, ScaleScope
from ..core import blob_model as bl
from ..core.dtype_names import dtype_from_name
from ..core.tensor_bytes import tensor_bytes
from ..drivers.base import Driver

MODES = ("kv", "v_only")
SCOPES = {scope.name.lower(): int(scope) for scope in SCALE_AWARE_SCOPES}
#: The scopes a serde writes (SPEC.md, "The serde layer"): heads on axis -2; PER_PAGE_HEAD
#: has no page axis and EXTERNAL no caller scales in a group, so serialize refuses them.
WRITTEN_SCOPES = {
    s.name.lower(): int(s) for s in (ScaleScope.PER_TENSOR, ScaleScope.PER_LAYER_HEAD)
}
SCALE_DTYPES = ("float32", "float16", "bfloat16", "float64")
#: Shapes of one chunk's K or V as the serde sees them: (tokens, heads, head_dim), Llama-8B
#: like (8 KV heads of 128), odd sizes, one element.
SHAPES = {
    "llama-16x8x128": [16, 8, 128],
    "odd-3x5x7": [3, 5, 7],
    "one-1x1x1": [1, 1, 1],
}
#: Layout groups for the estimate: several shapes whose concatenation along the first axis
#: is the tensor serialized.
GROUPS = {
    "one-llama": [[16, 8, 128]],
    "two-llama": [[16, 8, 128], [5, 8, 128]],
    "three-odd": [[1, 3, 7], [2, 3, 7], [9, 3, 7]],
}
FILL = 0xA5


def group_tensor(shape: list[int], dtype: str, seed: int) -> torch.Tensor:
    """Deterministic V- or K-like values of ``shape`` (heads of different ranges)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g, dtype=torch.float32)
    if len(shape) >= 2:
        t = t * (1 + torch.arange(shape[-2], dtype=torch.float32)).view(-1, 1)
    torch_dtype = dtype_from_name(dtype)
    assert torch_dtype is not None
    return t.to(torch_dtype)


def serialize_request(
    mode: str,
    scope: int,
    dtype: str,
    shape: list[int],
    capacity: int,
    *,
    scale_dtype: str = "float32",
    seed: int = 1,
) -> dict[str, Any]:
    """A serde.serialize request of one (K, V) group (K None in V-only mode)."""
    k = tensor_bytes(group_tensor(shape, dtype, seed))
    v = tensor_bytes(group_tensor(shape, dtype, seed + 1))
    return {
        "mode": mode,
        "scale_scope": scope,
        "scale_dtype": scale_dtype,
        "dtype": dtype,
        "shape": shape,
        "k": k if mode == "kv" else None,
        "v": v,
        "capacity": capacity,
        "fill": FILL,
        "k_dtype_tag": dtype if mode == "v_only" else None,
    }


def codec_blob(impl: Driver, request: dict[str, Any]) -> dict[str, Any]:
    """What the implementation's codec writes for the request's inputs (a V-only request:
    the same with K = V's values, then K's section removed: KV-K-ABSENT)."""
    res = impl.call(
        "codec.encode",
        k=request["k"] if request["k"] is not None else request["v"],
        v=request["v"],
        dtype=request["dtype"],
        shape=request["shape"],
        scale_scope=request["scale_scope"],
        scale_dtype=request["scale_dtype"],
    )
    if res["ok"] and request["mode"] == "v_only":
        res = {**res, "blob": k_removed(res["blob"])}
    return res


def k_removed(blob: bytes) -> bytes:
    """``blob`` without its K section: k_payload_len 0, the CRC of the rest (KV-K-ABSENT)."""
    parsed = bl.parse(blob)
    header = dataclasses.replace(parsed.header, k_payload_len=0, crc=None)
    return bl.pack(header, parsed.payload[parsed.header.k_payload_len :])


def expected_v(blob: bytes, dtype: str, shape: list[int]) -> bytes:
    """Q-DEQUANT of the blob's V into ``dtype``, heads on axis -2 (the serde's axis) for
    PER_LAYER_HEAD: out_dtype(float32(q) x float32(scale))."""
    parsed = bl.parse(blob)
    h = parsed.header
    start = h.k_payload_len
    q = torch.frombuffer(
        bytearray(parsed.payload[start : start + h.v_payload_len]), dtype=torch.float8_e4m3fn
    )
    scale_dtype = {
        2: torch.float16,
        1: torch.float16,
        3: torch.bfloat16,
        4: torch.float32,
        5: torch.float64,
    }[h.scale_dtype_id]
    raw = parsed.payload[start + h.v_payload_len :]
    scales = torch.frombuffer(bytearray(raw), dtype=scale_dtype) if raw else torch.ones(1)
    values = q.float().reshape(shape)
    if h.scale_scope == 1:
        values = values * scales.float().view(-1, 1)
    else:
        values = values * scales.float().reshape(())
    out_dtype = dtype_from_name(dtype)
    assert out_dtype is not None
    return tensor_bytes(values.to(out_dtype))


def layout_fields(prefix: str, shapes: list[list[int]] | None, dtype: str) -> dict[str, Any]:
    """The ``{prefix}_layout_*`` fields of a serde.estimate request (null: no layout)."""
    if shapes is None:
        return {f"{prefix}_layout_{n}": None for n in ("dtypes", "ranks", "dims")}
    return {
        f"{prefix}_layout_dtypes": [dtype] * len(shapes),
        f"{prefix}_layout_ranks": [len(s) for s in shapes],
        f"{prefix}_layout_dims": [d for s in shapes for d in s],
    }


def concatenated(shapes: list[list[int]]) -> list[int]:
    """The shape of the shapes' concatenation along the first axis."""
    return [sum(s[0] for s in shapes), *shapes[0][1:]]


def elements(shape: list[int]) -> int:
    return math.prod(shape)
