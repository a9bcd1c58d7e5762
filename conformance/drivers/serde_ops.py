"""The serde operations of TESTEE.md ("Serde operations") over a Python serde module.

The module must expose upstream's four class names (``AsymK16V8MultiSerializer``, ...);
``scope_enum`` is the codec's ``ScaleScope`` of the same implementation.
Group slots are passed as simple objects with a ``tensor`` attribute (what the serdes use
of LMCache's ``MemoryObj``) and layouts as objects with ``shapes`` and ``dtypes``. The
destination of serialize and the output slots of deserialize start filled with the
request's ``fill`` byte, and their contents after the call come back in the result, also
when the call refused (:class:`Refused`), so the suite can see what was written.
"""

from __future__ import annotations

import types
from typing import Any

import torch

from ..core.dtype_names import dtype_from_name
from ..core.tensor_bytes import tensor_bytes, tensor_from_bytes

#: Mode -> (serializer, deserializer) class names.
MODE_CLASSES = {
    "kv": ("AsymK16V8MultiSerializer", "AsymK16V8MultiDeserializer"),
    "v_only": ("AsymK16V8VOnlyMultiSerializer", "AsymK16V8VOnlyMultiDeserializer"),
}
CLASS_NAMES: tuple[str, ...] = tuple(n for pair in MODE_CLASSES.values() for n in pair)


class Refused(Exception):
    """An operation's exception, with what the buffers held afterwards."""

    def __init__(self, cause: Exception, state: dict[str, Any]) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.state = state


def _slot(t: torch.Tensor | None) -> types.SimpleNamespace | None:
    return None if t is None else types.SimpleNamespace(tensor=t)


def _config(scope_enum: Any, scale_scope: int, scale_dtype: str | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"scale_scope": scope_enum(scale_scope)}
    if scale_dtype is not None:
        kwargs["scale_dtype"] = dtype_from_name(scale_dtype)
    return kwargs


def _class(serde: Any, mode: str, index: int) -> Any:
    if mode not in MODE_CLASSES:
        raise ValueError(f"unknown serde mode {mode!r}")
    return getattr(serde, MODE_CLASSES[mode][index])


def _dtype(name: str) -> torch.dtype:
    dtype = dtype_from_name(name)
    assert dtype is not None
    return dtype


def serialize(
    serde: Any,
    scope_enum: Any,
    *,
    mode: str,
    scale_scope: int,
    dtype: str,
    shape: list[int],
    v: bytes | None,
    capacity: int,
    fill: int = 0xA5,
    k: bytes | None = None,
    scale_dtype: str | None = None,
    k_dtype_tag: str | None = None,
) -> dict[str, Any]:
    """serde.serialize: ``written`` and the whole ``dst`` after the call."""
    torch_dtype = _dtype(dtype)
    kwargs = _config(scope_enum, scale_scope, scale_dtype)
    if mode == "v_only" and k_dtype_tag is not None:
        kwargs["k_dtype_tag"] = _dtype(k_dtype_tag)
    ser = _class(serde, mode, 0)(**kwargs)
    kt = None if k is None else tensor_from_bytes(k, torch_dtype, shape)
    vt = None if v is None else tensor_from_bytes(v, torch_dtype, shape)
    dst = torch.full((capacity,), fill, dtype=torch.uint8)
    try:
        written = ser.serialize((_slot(kt), _slot(vt)), types.SimpleNamespace(tensor=dst), None)
    except Exception as exc:
        raise Refused(exc, {"dst": tensor_bytes(dst)}) from exc
    return {"written": int(written), "dst": tensor_bytes(dst)}


def _out(dtype: str | None, shape: list[int] | None, fill: int) -> torch.Tensor | None:
    if dtype is None or shape is None:
        return None
    t = torch.empty(shape, dtype=_dtype(dtype))
    t.view(-1).view(torch.uint8).fill_(fill)
    return t


def deserialize(
    serde: Any,
    scope_enum: Any,
    *,
    mode: str,
    scale_scope: int,
    src: bytes,
    fill: int = 0xA5,
    scale_dtype: str | None = None,
    k_out_dtype: str | None = None,
    k_out_shape: list[int] | None = None,
    v_out_dtype: str | None = None,
    v_out_shape: list[int] | None = None,
) -> dict[str, Any]:
    """serde.deserialize: the bytes of each output slot after the call (null: no slot)."""
    de = _class(serde, mode, 1)(**_config(scope_enum, scale_scope, scale_dtype))
    k_out = _out(k_out_dtype, k_out_shape, fill)
    v_out = _out(v_out_dtype, v_out_shape, fill)
    source = types.SimpleNamespace(tensor=torch.frombuffer(bytearray(src), dtype=torch.uint8))

    def state() -> dict[str, Any]:
        return {
            "k_out": None if k_out is None else tensor_bytes(k_out),
            "v_out": None if v_out is None else tensor_bytes(v_out),
        }

    try:
        de.deserialize(source, (_slot(k_out), _slot(v_out)), None)
    except Exception as exc:
        raise Refused(exc, state()) from exc
    return state()


def _layout(
    dtypes: list[str] | None, ranks: list[int] | None, dims: list[int] | None
) -> types.SimpleNamespace | None:
    if dtypes is None or ranks is None or dims is None:
        return None
    shapes, pos = [], 0
    for rank in ranks:
        shapes.append(torch.Size(dims[pos : pos + rank]))
        pos += rank
    return types.SimpleNamespace(shapes=shapes, dtypes=[_dtype(d) for d in dtypes])


def estimate(
    serde: Any,
    scope_enum: Any,
    *,
    mode: str,
    scale_scope: int,
    scale_dtype: str | None = None,
    k_dtype_tag: str | None = None,
    k_layout_dtypes: list[str] | None = None,
    k_layout_ranks: list[int] | None = None,
    k_layout_dims: list[int] | None = None,
    v_layout_dtypes: list[str] | None = None,
    v_layout_ranks: list[int] | None = None,
    v_layout_dims: list[int] | None = None,
) -> dict[str, Any]:
    """serde.estimate: the size the serializer asks for the layout group."""
    kwargs = _config(scope_enum, scale_scope, scale_dtype)
    if mode == "v_only" and k_dtype_tag is not None:
        kwargs["k_dtype_tag"] = _dtype(k_dtype_tag)
    ser = _class(serde, mode, 0)(**kwargs)
    group = (
        _layout(k_layout_dtypes, k_layout_ranks, k_layout_dims),
        _layout(v_layout_dtypes, v_layout_ranks, v_layout_dims),
    )
    return {"size": int(ser.estimate_serialized_size(group))}
