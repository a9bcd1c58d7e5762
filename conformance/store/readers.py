"""Reading a store back as LMCache does: each file name through the installed release's FS
filename reader, each blob through its deserializer (``AsymK16V8MultiDeserializer``, or
``AsymK16V8VOnlyMultiDeserializer`` for a K-less blob) into destinations of the chunk's
shape and dtype, compared with the chunk's K and V (writers.py regenerates them from the
chunk hash): K bit for bit, V within what FP8 E4M3 can hold.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from .writers import Chunk, ChunkShape, tensors

#: E4M3 keeps 3 mantissa bits: a quantized value is within 2^-4 of it relatively, and
#: values below the smallest normal within 2^-9 of the scale (twice that, for rounding
#: of the scale itself and the output dtype).
FP8_RELATIVE = 2.0**-3
FP8_ABSOLUTE_IN_SCALES = 2.0**-8


def v_close(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Whether ``got`` is ``want`` after an FP8 E4M3 round trip with a per-tensor scale."""
    want32, got32 = want.float(), got.float()
    scale = float(want32.abs().max()) / 448.0
    bound = want32.abs() * FP8_RELATIVE + scale * FP8_ABSOLUTE_IN_SCALES
    return bool(((got32 - want32).abs() <= bound).all())


class UpstreamStoreReader:
    """The installed release's filename reader and deserializers."""

    def __init__(self) -> None:
        from ..drivers.upstream_driver import key_namespace, load_upstream

        load_upstream()
        self.keys = key_namespace()
        if not hasattr(self.keys, "filename_to_object_key"):
            raise ImportError("the installed lmcache has no FS filename reader")
        self.serde = importlib.import_module("lmcache.v1.distributed.serde.asym_k16_v8")

    def read_file(self, path: Path, chunks: dict[bytes, Chunk], shape: ChunkShape) -> str:
        """``pass``, or ``fail: why`` for one file of a store."""
        key = self.keys.filename_to_object_key(path.name)
        if key is None:
            return "fail: the release reads no key from the name"
        chunk = chunks.get(bytes(key.chunk_hash))
        if chunk is None or key.kv_rank != chunk.kv_rank or key.model_name != chunk.model_name:
            return f"fail: the name reads back to another key: {key}"
        data = torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8)
        k, v = tensors(chunk, shape)
        k_out, v_out = torch.empty_like(k), torch.empty_like(v)
        src = SimpleNamespace(tensor=data)
        try:
            if chunk.k_less:
                deserializer: Any = self.serde.AsymK16V8VOnlyMultiDeserializer()
                deserializer.deserialize(src, (None, SimpleNamespace(tensor=v_out)), key)
            else:
                deserializer = self.serde.AsymK16V8MultiDeserializer()
                dst = (SimpleNamespace(tensor=k_out), SimpleNamespace(tensor=v_out))
                deserializer.deserialize(src, dst, key)
        except Exception as exc:  # the release's refusal, whatever its class
            return f"fail: {type(exc).__name__}: {exc}"[:300]
        if not chunk.k_less and not torch.equal(k_out.view(torch.uint8), k.view(torch.uint8)):
            return "fail: K differs"
        return "pass" if v_close(v_out, v) else "fail: V is not the chunk's V within FP8"

    def read_store(
        self, directory: Path, chunks: Sequence[Chunk], shape: ChunkShape
    ) -> dict[str, str]:
        """File name -> verdict, for every file of ``directory``."""
        by_hash = {c.chunk_hash: c for c in chunks}
        return {p.name: self.read_file(p, by_hash, shape) for p in sorted(directory.iterdir())}
