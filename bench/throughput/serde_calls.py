"""The serde path benchmarked: the AsymK16V8 serializers and deserializers (both modes) of
an implementation, beside its codec rows (SPEC.md, "The serde layer").

Both ``lmckv.reference_impl.serde`` and upstream's ``lmcache.v1.distributed.serde.asym_k16_v8``
expose upstream's four class names; ``SerdeOps`` builds the timed callables from those only.
Operations (each over every per-layer (K, V) group of a case, one serde call a layer):

- ``serialize``: ``AsymK16V8MultiSerializer.serialize((K, V), dst)``, the blob of K and V
  ("storage-only-dequant");
- ``serialize_v_only``: ``AsymK16V8VOnlyMultiSerializer.serialize((None, V), dst)``, the
  K-less blob of V ("split-tier");
- ``deserialize``: ``AsymK16V8MultiDeserializer.deserialize(blob, (K_out, V_out))``, K copied
  and V dequantized into K's dtype;
- ``deserialize_v_only``: ``AsymK16V8VOnlyMultiDeserializer.deserialize(blob, (None, V_out))``.

Destinations are preallocated before timing, once per layer, as the ``memcpy`` limit's are
(a serde writes into the caller's buffer, LMCache's ``MemoryObj``): each serializer's ``dst``
holds exactly the blob its first call wrote (upstream's size estimate refuses PER_LAYER_HEAD,
so the blob itself sizes it), each deserializer reads its blob from a uint8 tensor and writes
into K/V outputs of the layer's shape and dtype. The serdes write PER_TENSOR and
PER_LAYER_HEAD only (``SERDE_SCOPES``).
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable
from typing import Any

import torch

from ...reference_impl.kv_codec.header_fields import ScaleScope
from ..common.impls import LayerKV

SERDE_MODULES = {
    "reference": "lmckv.reference_impl.serde",
    "upstream": "lmcache.v1.distributed.serde.asym_k16_v8",
}
#: The scopes a serde writes (its size rule needs no page axis and no caller's scales).
SERDE_SCOPES = (ScaleScope.PER_TENSOR.name, ScaleScope.PER_LAYER_HEAD.name)
#: Operation -> (serializer or deserializer class, V only).
SERDE_CLASSES = {
    "serialize": ("AsymK16V8MultiSerializer", False),
    "serialize_v_only": ("AsymK16V8VOnlyMultiSerializer", True),
    "deserialize": ("AsymK16V8MultiDeserializer", False),
    "deserialize_v_only": ("AsymK16V8VOnlyMultiDeserializer", True),
}
SERDE_OPS = tuple(SERDE_CLASSES)
#: The codec operation each serde operation wraps: what "the serde costs on top of the
#: codec" compares against (the same implementation, scope, case and dtype).
CODEC_OF = {
    "serialize": "encode",
    "serialize_v_only": "encode",
    "deserialize": "decode_dequant",
    "deserialize_v_only": "decode_dequant",
}


def _slot(t: torch.Tensor | None) -> types.SimpleNamespace | None:
    """A group slot: what the serdes use of LMCache's ``MemoryObj``."""
    return None if t is None else types.SimpleNamespace(tensor=t)


class SerdeOps:
    """Timed serde callables of one implementation (``SERDE_MODULES``) and scope over a list
    of layers; everything they write into is made in ``prepare`` (untimed).

    ``groups[v_only]``: per layer, the serializer's (src group, dst); ``reads[v_only]``: per
    layer, the deserializer's (blob, output group), the blob being that layer's dst."""

    def __init__(
        self, impl_name: str, scope_enum: Any, scope_name: str, layers: list[LayerKV]
    ) -> None:
        self.impl_name = impl_name
        self.scope = getattr(scope_enum, scope_name)
        self.layers = layers
        self.groups: dict[bool, list[tuple[Any, types.SimpleNamespace]]] = {}
        self.reads: dict[bool, list[tuple[types.SimpleNamespace, Any]]] = {}
        self._serdes: dict[str, Any] = {}

    def _new(self, op: str) -> Any:
        name, v_only = SERDE_CLASSES[op]
        cls = getattr(importlib.import_module(SERDE_MODULES[self.impl_name]), name)
        if v_only and op.startswith("serialize"):
            return cls(scale_scope=self.scope, k_dtype_tag=self.layers[0].k.dtype)
        return cls(scale_scope=self.scope)

    def _serialized(self, v_only: bool) -> list[tuple[Any, types.SimpleNamespace]]:
        """Each layer's (src group, dst sized to its blob), the blob written once."""
        if v_only not in self.groups:
            op = "serialize_v_only" if v_only else "serialize"
            ser = self._serdes.setdefault(op, self._new(op))
            groups = []
            for layer in self.layers:
                src = (None if v_only else _slot(layer.k), _slot(layer.v))
                scratch = torch.empty(layer.kv_bytes + (1 << 16), dtype=torch.uint8)
                n = int(ser.serialize(src, _slot(scratch), None))
                groups.append((src, types.SimpleNamespace(tensor=scratch[:n].clone())))
            self.groups[v_only] = groups
        return self.groups[v_only]

    def prepare(self, op: str) -> None:
        """Make ``op``'s serde, destinations and (to deserialize) blobs: untimed."""
        _, v_only = SERDE_CLASSES[op]
        groups = self._serialized(v_only)
        self._serdes.setdefault(op, self._new(op))
        if op.startswith("deserialize") and v_only not in self.reads:
            self.reads[v_only] = [
                (
                    blob,
                    (
                        None if v_only else _slot(torch.empty_like(layer.k)),
                        _slot(torch.empty_like(layer.v)),
                    ),
                )
                for (_, blob), layer in zip(groups, self.layers, strict=True)
            ]

    def op(self, name: str) -> Callable[[], object]:
        """The callable timed for serde operation ``name`` (after ``prepare(name)``)."""
        _, v_only = SERDE_CLASSES[name]

        def serialize_all() -> None:
            ser = self._serdes[name]
            for src, dst in self.groups[v_only]:
                ser.serialize(src, dst, None)

        def deserialize_all() -> None:
            de = self._serdes[name]
            for blob, outs in self.reads[v_only]:
                de.deserialize(blob, outs, None)

        return serialize_all if name.startswith("serialize") else deserialize_all

    def op_bytes(self, name: str) -> int:
        """The unit of ``name``: K+V (V for V-only) in, the blobs out, as the codec's rows."""
        _, v_only = SERDE_CLASSES[name]
        if name.startswith("serialize"):
            return sum(
                layer.v.numel() * layer.v.element_size()
                + (0 if v_only else layer.k.numel() * layer.k.element_size())
                for layer in self.layers
            )
        return sum(dst.tensor.numel() for _, dst in self._serialized(v_only))
