"""The L2 serdes the end-to-end measurement compares, and what each stores in L2.

LMCache's L2 adapters take an optional ``"serde"`` object (``{"type": NAME, ...kwargs}``,
``lmcache.v1.distributed.l2_adapters.config``), built by the serde factory
(``lmcache.v1.distributed.serde.factory``). The serdes compared, by factory name:

- ``none``: no serde; L2 holds K and V in the cache dtype.
- ``fp8``: ``Fp8QuantizationSerializer``, a plain cast of every element (K and V) to e4m3fn,
  no scales. Through upstream's class where ``lmcache`` is importable, else the reference's
  (``lmckv.reference_impl.serde.fp8``; tests hold the two byte-equal).
- ``asym_k16_v8``: storage-only K16/V8, K in the cache dtype and V in e4m3 with the scope's
  scales (the codec's blob of (K, V)).
- ``asym_k16_v8_v_only``: the same V, K not stored (kept in L1): the K-less blob.
- ``aesgcm``, ``turboquant`` and any other name the installed release registers: measured
  through its own factory (``bench.accuracy.lmcache_serdes``).

No release registers the two K16/V8 serdes: they are what a release that does would allow.
Bytes in L2 are measured from the serialized bytes of one window's cache, one blob (or cast
object) per layer, divided by the window's context tokens.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import torch

from ...conformance.store import catalogue
from ...conformance.store.lmcache_serde_calls import LMCacheObj
from ...reference_impl.kv_codec.header_fields import ScaleScope
from ..common.impls import CodecImpl
from .data import KVSample
from .reconstruction import codec_for

NONE, FP8 = catalogue.NONE.name, catalogue.FP8.name
K16V8, K16V8_V_ONLY = catalogue.K16V8.name, catalogue.K16V8_V_ONLY.name
#: The serdes this measurement scores itself (others through LMCache's own factory).
SERDES = (NONE, FP8, K16V8, K16V8_V_ONLY)
#: The scope name of the plain cast: it stores no scale.
NO_SCALE = "NO_SCALE"
UPSTREAM_FP8 = "lmcache.v1.distributed.serde.fp8"
#: The ``aesgcm`` serde's master key: a placeholder the operator replaces.
KEY_PLACEHOLDER = "/path/to/master.key"


def fp8_classes() -> tuple[Any, Any, str]:
    """(serializer class, deserializer class, where from) of the ``fp8`` serde: upstream's
    where ``lmcache`` imports, else the reference's."""
    try:
        module = importlib.import_module(UPSTREAM_FP8)
        return (
            module.Fp8QuantizationSerializer,
            module.Fp8QuantizationDeserializer,
            "upstream",
        )
    except Exception:  # lmcache absent or not importable here
        from ...reference_impl.serde import (
            Fp8QuantizationDeserializer,
            Fp8QuantizationSerializer,
        )

        return Fp8QuantizationSerializer, Fp8QuantizationDeserializer, "reference"


class Fp8Serde:
    """The ``fp8`` serde's round trip of one (K, V) pair in the cache dtype."""

    def __init__(self) -> None:
        serializer, deserializer, self.source = fp8_classes()
        self._ser, self._de = serializer(), deserializer()

    def roundtrip(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(K, V) as read back from L2, and the bytes stored: K and V are one object."""
        kv = torch.stack([k, v])
        dst = LMCacheObj(torch.empty(kv.numel(), dtype=torch.uint8))
        n = int(self._ser.serialize(LMCacheObj(kv), dst, None))
        out = LMCacheObj(torch.empty_like(kv))
        self._de.deserialize(LMCacheObj(dst.tensor[:n]), out, None)
        return out.tensor[0], out.tensor[1], n


def k16v8_bytes(impl: CodecImpl, sample: KVSample, scope: str) -> tuple[int, int]:
    """(storage-only blob bytes, V-only blob bytes) of one layer; raises ``AssertionError``
    when the two blobs' V differ (the V-only serde must store the same V)."""
    codec, kwargs = codec_for(impl, sample, scope)
    full = bytearray(codec.to_bytes(codec.encode(sample.k, sample.v, **kwargs)))
    part = bytearray(codec.to_bytes(codec.encode(None, sample.v, k_dtype=sample.k.dtype, **kwargs)))
    v_full = codec.decode(codec.from_bytes(bytearray(full)), out_v_dtype=sample.v.dtype)[1]
    v_part = codec.decode(codec.from_bytes(bytearray(part)), out_v_dtype=sample.v.dtype)[1]
    if not torch.equal(v_full, v_part):
        raise AssertionError(f"{scope}: the V-only blob's V differs from the (K, V) blob's")
    return len(full), len(part)


def l2_config(
    serde: str, scope: str | None = None, head_dim: int | None = None
) -> dict[str, Any] | None:
    """The L2 adapter's ``"serde"`` object that selects ``serde`` (None: leave it out), from
    its catalogue row: a key file as the placeholder the operator replaces, the K16/V8
    serdes' ``scale_scope``, ``head_dim`` (the model's) for a serde that must be told it. A
    name the catalogue lacks (a release's own serde) is selected by its name alone."""
    row = catalogue.SERDES.get(serde)
    if row is None:
        return {"type": serde}
    config: dict[str, Any] | None = row.l2_object(Path(KEY_PLACEHOLDER), head_dim)
    if config is not None and serde in (K16V8, K16V8_V_ONLY):
        config["scale_scope"] = scope or ScaleScope.PER_TENSOR.name
    return config
