"""The codec implementations under test and the operations benchmarked on them.

Both ``lmckv.reference_impl.kv_codec`` and upstream's ``lmcache.v1.kv_codec`` expose
``AsymK16V8Codec`` with ``encode``/``to_bytes``/``from_bytes``/``decode`` and the quantization
primitives ``compute_v_scales``/``quantize_v_fp8``; ``CodecOps`` builds the timed callables
from those public names only, so any module with that API can be benchmarked.

Operations (each over every per-layer blob of a case):

- ``encode``: ``encode`` then ``to_bytes`` (tensors to the bytes a backend writes);
- ``parse``: ``from_bytes`` (header parse and payload CRC-32 check);
- ``decode_fp8``: ``from_bytes`` then ``decode`` keeping V in FP8;
- ``decode_dequant``: ``from_bytes`` then ``decode(out_v_dtype=<K's dtype>)``;
- ``quantize`` (CUDA): ``compute_v_scales`` then ``quantize_v_fp8`` on the device.

Destinations: an implementation whose ``encode`` takes ``out=`` (a caller's buffer) and whose
``decode`` takes ``out_v=`` (a caller's tensor) encodes into one preallocated ``bytearray``
per layer and dequantizes into one preallocated V tensor per layer, made before timing, as
the ``memcpy`` limit copies into preallocated buffers and as a serde writes into the
caller's ``MemoryObj`` (the reference does; upstream 0.5.6 has neither keyword and
allocates its outputs in every call, which the ``alloc`` floor shows the cost of).

Blobs are parsed from ``bytearray`` copies, as a reader that fills a preallocated buffer with
``readinto`` has them; the reference then returns K and V as views over that buffer.
EXTERNAL stores V already in FP8 (``precomputed_v_quant``, made before timing) with the
static scale 1.0 (vLLM's uncalibrated default), so its encode copies and never quantizes;
its static scale tensor is made once, on V's device, before timing.

A deliberate slowdown can be injected to test the regression gate: the environment variable
``LMCKV_BENCH_SLOWDOWN=encode:1.2[,parse:1.5]`` makes the *reference* implementation's
operations last that factor longer (the call, then a busy wait of ``(factor - 1)`` times
its shortest duration, after synchronizing the device on CUDA). Upstream and the limits,
which measure the machine, are never slowed.
"""

from __future__ import annotations

import importlib
import inspect
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from lmckv.base.lmcache_release import distribution_version, installed_version

from ...reference_impl.kv_codec.header_fields import ScaleScope

IMPL_MODULES = {"reference": "lmckv.reference_impl.kv_codec", "upstream": "lmcache.v1.kv_codec"}
FP8 = torch.float8_e4m3fn
STATIC_SCALE = 1.0
SLOWDOWN_ENV = "LMCKV_BENCH_SLOWDOWN"
#: The implementation a slowdown applies to (the code under test).
SLOWED_IMPL = "reference"


def parse_slowdown(spec: str | None) -> dict[str, float]:
    """``"encode:1.2,parse:1.5"`` -> {op: factor}; empty or None -> {} (factors >= 1)."""
    out: dict[str, float] = {}
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        op, sep, factor = part.partition(":")
        try:
            value = float(factor)
        except ValueError:
            raise ValueError(f"{SLOWDOWN_ENV}: {part!r} is not OP:FACTOR") from None
        if not sep or value < 1.0:
            raise ValueError(f"{SLOWDOWN_ENV}: {part!r} is not OP:FACTOR with FACTOR >= 1")
        out[op.strip()] = value
    return out


def slowed(fn: Callable[[], object], factor: float, device: str) -> Callable[[], object]:
    """``fn`` taking ``factor`` times as long: the call, then a busy wait of ``factor - 1``
    times the shortest duration of the call seen so far (``time.perf_counter``, after a
    device synchronization on CUDA).

    The shortest duration is the undisturbed one: a call the scheduler interrupted does not
    lengthen the wait, so the injected work stays ``factor - 1`` of the call's own."""
    shortest = [math.inf]

    def call() -> object:
        start = time.perf_counter()
        result = fn()
        if device != "cpu":
            torch.cuda.synchronize()
        end = time.perf_counter()
        shortest[0] = min(shortest[0], end - start)
        until = end + shortest[0] * (factor - 1.0)
        while time.perf_counter() < until:
            pass
        return result

    return call


@dataclass(frozen=True)
class CodecImpl:
    """A kv_codec module under a short name."""

    name: str
    module: ModuleType
    version: str | None

    def scope(self, scope_name: str) -> Any:
        """The module's ``ScaleScope`` member called ``scope_name``."""
        return getattr(self.module.ScaleScope, scope_name)

    def codec(self, scope_name: str) -> Any:
        """``AsymK16V8Codec(scale_scope=...)`` of this module."""
        return self.module.AsymK16V8Codec(scale_scope=self.scope(scope_name))


def load_impls(
    names: tuple[str, ...] = tuple(IMPL_MODULES),
) -> tuple[dict[str, CodecImpl], dict[str, str]]:
    """(importable implementations by name, reason each missing one could not be loaded)."""
    found: dict[str, CodecImpl] = {}
    missing: dict[str, str] = {}
    for name in names:
        module_name = IMPL_MODULES[name]
        try:
            module = importlib.import_module(module_name)
            module.AsymK16V8Codec  # noqa: B018 (the API this benchmark needs)
        except Exception as exc:  # any import failure means "not installed here"
            missing[name] = f"{module_name} not importable: {type(exc).__name__}: {exc}"
            continue
        version = installed_version() if name == "upstream" else distribution_version("lmckv")
        found[name] = CodecImpl(name, module, version)
    return found, missing


@dataclass
class LayerKV:
    """One layer's K and V in canonical token-major shape [n_pages, page_size, heads, dim]."""

    k: torch.Tensor
    v: torch.Tensor

    @property
    def kv_bytes(self) -> int:
        """Bytes of K plus V."""
        return self.k.numel() * self.k.element_size() + self.v.numel() * self.v.element_size()


def static_fp8(v: torch.Tensor) -> torch.Tensor:
    """V in e4m3 with the static scale 1.0, saturated: what an FP8 KV cache already holds."""
    limit = float(torch.finfo(FP8).max)
    return (v.to(torch.float32) / STATIC_SCALE).clamp_(-limit, limit).to(FP8)


class CodecOps:
    """Timed callables for one implementation and scale scope over a list of layers."""

    def __init__(self, impl: CodecImpl, scope_name: str, layers: list[LayerKV]) -> None:
        self.impl = impl
        self.scope_name = scope_name
        self.layers = layers
        self.codec = impl.codec(scope_name)
        self._external = scope_name == ScaleScope.EXTERNAL.name
        self._pre = [static_fp8(layer.v) for layer in layers] if self._external else []
        self._static = (
            torch.tensor(STATIC_SCALE, device=layers[0].v.device)
            if self._external and layers
            else None
        )
        self._buffers: list[bytearray] | None = None
        self._into = {
            "encode": "out" in inspect.signature(self.codec.encode).parameters,
            "decode": "out_v" in inspect.signature(self.codec.decode).parameters,
        }
        #: The preallocated destinations (``prepare``): per layer, encode's buffer and the
        #: dequantized V's tensor.
        self._outs: list[bytearray] = []
        self._v_outs: dict[torch.dtype, list[torch.Tensor]] = {}

    def _encode_kwargs(self, index: int) -> dict[str, Any]:
        layer = self.layers[index]
        n_pages, page_size, heads, dim = layer.k.shape
        kwargs: dict[str, Any] = {
            "layer_id": index,
            "chunk_id": 0,
            "chunk_size": n_pages * page_size,
            "page_size": page_size,
            "kv_head_count": heads,
            "head_dim": dim,
            "head_axis": -2,
            "page_axis": 0,
        }
        if self._external:
            kwargs["precomputed_v_quant"] = self._pre[index]
            kwargs["precomputed_v_scales"] = self._static
        return kwargs

    def encode(self) -> list[Any]:
        """Encode every layer to bytes (into the preallocated buffers, once ``prepare``d)."""
        codec = self.codec
        outs = self._outs
        return [
            codec.to_bytes(
                codec.encode(
                    layer.k,
                    layer.v,
                    **self._encode_kwargs(i),
                    **({"out": outs[i]} if outs else {}),
                )
            )
            for i, layer in enumerate(self.layers)
        ]

    def prepare(self, op: str, dtype: torch.dtype) -> None:
        """Untimed: the encoded blobs (to read), and the preallocated destinations of the
        operations that write into the caller's buffers (see the module's docstring)."""
        buffers = self.buffers()
        if op == "encode" and self._into["encode"] and not self._outs:
            self._outs = [bytearray(len(buf)) for buf in buffers]
        if op == "decode_dequant" and self._into["decode"] and dtype not in self._v_outs:
            self._v_outs[dtype] = [
                torch.empty(layer.v.numel(), dtype=dtype, device=layer.v.device)
                for layer in self.layers
            ]

    def buffers(self) -> list[bytearray]:
        """The encoded blobs as writable buffers (encoded once, on first use)."""
        if self._buffers is None:
            self._buffers = [bytearray(blob) for blob in self.encode()]
        return self._buffers

    def blob_bytes(self) -> int:
        """Total encoded size of the layers."""
        return sum(len(b) for b in self.buffers())

    def parse(self) -> None:
        """from_bytes over every blob."""
        for buf in self.buffers():
            self.codec.from_bytes(buf)

    def decode(self, out_v_dtype: torch.dtype | None, device: str | None = None) -> None:
        """from_bytes then decode over every blob (dequantizing into the preallocated V
        tensors, once ``prepare``d, on the CPU)."""
        codec = self.codec
        kwargs: dict[str, Any] = {"out_v_dtype": out_v_dtype}
        if device is not None:
            kwargs["device"] = torch.device(device)
        v_outs = (
            self._v_outs.get(out_v_dtype) if out_v_dtype is not None and device is None else None
        )
        for i, buf in enumerate(self.buffers()):
            if v_outs:
                kwargs["out_v"] = v_outs[i]
            codec.decode(codec.from_bytes(buf), **kwargs)

    def quantize(self) -> None:
        """compute_v_scales then quantize_v_fp8 over every layer's V, where V lives."""
        m = self.impl.module
        scope = self.impl.scope(self.scope_name)
        for layer in self.layers:
            if self._static is not None:
                scales = self._static
            else:
                scales = m.compute_v_scales(layer.v, scope, head_axis=-2, page_axis=0)
            m.quantize_v_fp8(layer.v, scales, scope, head_axis=-2, page_axis=0)

    def op(
        self,
        name: str,
        dtype: torch.dtype,
        device: str = "cpu",
        slowdown: Mapping[str, float] | None = None,
    ) -> Callable[[], object]:
        """The callable timed for operation ``name``; ``slowdown`` (default: read from
        ``LMCKV_BENCH_SLOWDOWN``) slows the reference's operations it names."""
        target = None if device == "cpu" else device
        table: dict[str, Callable[[], object]] = {
            "encode": self.encode,
            "parse": self.parse,
            "decode_fp8": lambda: self.decode(None, target),
            "decode_dequant": lambda: self.decode(dtype, target),
            "quantize": self.quantize,
        }
        if slowdown is None:
            slowdown = parse_slowdown(os.environ.get(SLOWDOWN_ENV))
        factor = slowdown.get(name, 1.0) if self.impl.name == SLOWED_IMPL else 1.0
        return table[name] if factor == 1.0 else slowed(table[name], factor, device)
