"""Writing a store on disk as LMCache does: blobs of realistic chunk shapes, in both serde
modes, one file per ObjectKey (SPEC.md "A store").

Three writers, best first (:func:`writer`):

- ``upstream FS adapter``: upstream's serializer (``AsymK16V8MultiSerializer`` or, for a
  K-less chunk, ``AsymK16V8VOnlyMultiSerializer``) into an estimate-sized buffer, narrowed to
  the bytes written as upstream's serde processor does, then stored by upstream's
  ``FSL2Adapter`` (it imports ``lmcache.lmcache_native``; it runs on CPU here);
- ``upstream filename + serializer``: the same serializers, each file named by upstream's
  own FS filename function (public ``fs_key_codec`` or the adapter's private helper) and
  written here, for a release whose adapter does not run;
- ``reference``: the reference codec and filename; it writes full (K, V) blobs only: a
  K-less blob is not a blob the reference writes until its reader accepts one.
"""

from __future__ import annotations

import hashlib
import importlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol

import torch

from ...reference_impl.keys import ObjectKey, object_key_to_filename
from ...reference_impl.keys.kv_rank import compute_kv_rank
from .lmcache_close import close_bounded

#: Seconds the upstream adapter may take to store one batch.
STORE_TIMEOUT = 120.0
MODEL = "meta-llama/Llama-3.1-8B"


@dataclass(frozen=True)
class ChunkShape:
    """One chunk of one KV group: K and V each ``(layers, tokens, kv_heads, head_dim)``."""

    layers: int
    kv_heads: int
    head_dim: int
    tokens: int

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.layers, self.tokens, self.kv_heads, self.head_dim)


#: A small chunk layout (Llama-like axes), small enough for CI.
SMALL_CHUNK = ChunkShape(layers=2, kv_heads=2, head_dim=16, tokens=16)


@dataclass(frozen=True)
class Chunk:
    """One object to store: its key's fields, its dtype and whether K stays out (V-only)."""

    model_name: str
    kv_rank: int
    chunk_hash: bytes
    dtype: torch.dtype
    k_less: bool


def plan(
    count_per_rank: int = 1,
    *,
    world_size: int = 2,
    dtypes: Sequence[torch.dtype] = (torch.bfloat16, torch.float16),
    k_less: Sequence[bool] = (False, True),
    model_name: str = MODEL,
) -> list[Chunk]:
    """Chunks for every rank of a ``world_size`` tensor-parallel group on one node, every
    dtype and mode, ``count_per_rank`` of each; chunk hashes are derived from the index."""
    chunks = []
    for rank in range(world_size):
        kv_rank = compute_kv_rank(world_size, rank, world_size, rank)
        for dtype in dtypes:
            for mode in k_less:
                for i in range(count_per_rank):
                    seed = f"{model_name}/{rank}/{dtype}/{mode}/{i}".encode()
                    chunk_hash = hashlib.sha256(seed).digest()[:16]
                    chunks.append(Chunk(model_name, kv_rank, chunk_hash, dtype, mode))
    return chunks


def tensors(chunk: Chunk, shape: ChunkShape) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic K and V for ``chunk`` (seeded by its hash)."""
    gen = torch.Generator().manual_seed(int.from_bytes(chunk.chunk_hash[:8], "little"))
    k = torch.randn(shape.shape, generator=gen).to(chunk.dtype)
    v = torch.randn(shape.shape, generator=gen).to(chunk.dtype)
    return k, v


class StoreWriter(Protocol):
    """Writes chunks into a store directory."""

    name: str

    def supports(self, chunk: Chunk) -> bool: ...

    def write(self, directory: Path, chunks: Sequence[Chunk], shape: ChunkShape) -> None: ...


class ReferenceWriter:
    """The reference codec (PER_TENSOR) and the reference FS filename; full blobs only."""

    name = "reference"

    def supports(self, chunk: Chunk) -> bool:
        return not chunk.k_less

    def write(self, directory: Path, chunks: Sequence[Chunk], shape: ChunkShape) -> None:
        from ...reference_impl.kv_codec import AsymK16V8Codec, ScaleScope

        codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_TENSOR)
        for chunk in chunks:
            k, v = tensors(chunk, shape)
            key = ObjectKey(chunk.chunk_hash, chunk.model_name, chunk.kv_rank)
            blob = codec.to_bytes(codec.encode(k, v))
            (directory / object_key_to_filename(key)).write_bytes(blob)


class _Serialized:
    """What an L2 adapter reads of a MemoryObj: ``byte_array``, here the serialized bytes
    only (upstream's serde processor narrows its estimate-sized buffer the same way)."""

    def __init__(self, data: torch.Tensor) -> None:
        self.tensor = data

    @property
    def byte_array(self) -> memoryview:
        array: Any = self.tensor.numpy()
        return memoryview(array).cast("B")


class UpstreamFilenameWriter:
    """Upstream's serializers, files named by upstream's own FS filename function."""

    name = "upstream filename + serializer"

    def __init__(self) -> None:
        from ..drivers.upstream_driver import key_namespace, load_upstream

        load_upstream()  # quiets lmcache's logging, stubs awscrt; ImportError without lmcache
        self.keys = key_namespace()
        if not hasattr(self.keys, "object_key_to_filename"):
            raise ImportError("the installed lmcache has no FS filename function")
        self.serde = importlib.import_module("lmcache.v1.distributed.serde.asym_k16_v8")

    def supports(self, chunk: Chunk) -> bool:
        return True

    def upstream_key(self, chunk: Chunk) -> Any:
        return self.keys.ObjectKey(
            chunk_hash=chunk.chunk_hash, model_name=chunk.model_name, kv_rank=chunk.kv_rank
        )

    def serialize(self, chunk: Chunk, shape: ChunkShape) -> _Serialized:
        """One chunk through upstream's serializer into an estimate-sized buffer, narrowed
        to the bytes it wrote."""
        k, v = tensors(chunk, shape)
        layout = self.keys.MemoryLayoutDesc(shapes=[v.shape], dtypes=[v.dtype])
        if chunk.k_less:
            serializer = self.serde.AsymK16V8VOnlyMultiSerializer(k_dtype_tag=chunk.dtype)
            group: tuple[Any, Any] = (None, SimpleNamespace(tensor=v))
            layouts: tuple[Any, Any] = (None, layout)
        else:
            serializer = self.serde.AsymK16V8MultiSerializer()
            group = (SimpleNamespace(tensor=k), SimpleNamespace(tensor=v))
            layouts = (layout, layout)
        size = serializer.estimate_serialized_size(layouts)
        dst = SimpleNamespace(tensor=torch.zeros(size, dtype=torch.uint8))
        written = serializer.serialize(group, dst, self.upstream_key(chunk))
        return _Serialized(dst.tensor[:written])

    def write(self, directory: Path, chunks: Sequence[Chunk], shape: ChunkShape) -> None:
        for chunk in chunks:
            name = self.keys.object_key_to_filename(self.upstream_key(chunk))
            (directory / name).write_bytes(self.serialize(chunk, shape).byte_array)


class UpstreamAdapterWriter(UpstreamFilenameWriter):
    """Upstream's serializers, stored by upstream's ``FSL2Adapter``."""

    name = "upstream FS adapter"

    def __init__(self) -> None:
        super().__init__()
        self.fs = importlib.import_module("lmcache.v1.distributed.l2_adapters.fs_l2_adapter")

    def write(self, directory: Path, chunks: Sequence[Chunk], shape: ChunkShape) -> None:
        adapter = self.fs.FSL2Adapter(self.fs.FSL2AdapterConfig(base_path=str(directory)))
        try:
            for chunk in chunks:  # one at a time: one serialized chunk in memory
                task = adapter.submit_store_task(
                    [self.upstream_key(chunk)], [self.serialize(chunk, shape)]
                )
                deadline = time.monotonic() + STORE_TIMEOUT
                while time.monotonic() < deadline:
                    done = adapter.pop_completed_store_tasks()
                    if task in done:
                        if not done[task].is_successful():
                            raise OSError(f"FSL2Adapter failed to store {chunk}")
                        break
                    time.sleep(0.005)
                else:
                    raise TimeoutError(f"FSL2Adapter did not store {chunk} in {STORE_TIMEOUT}s")
        finally:
            close_bounded(adapter)


def writer(prefer: str | None = None) -> StoreWriter:
    """The best writer that loads here (see the module docstring), or the one named
    ``prefer``; the reference when lmcache is not installed."""
    kinds: dict[str, type[StoreWriter]] = {
        UpstreamAdapterWriter.name: UpstreamAdapterWriter,
        UpstreamFilenameWriter.name: UpstreamFilenameWriter,
        ReferenceWriter.name: ReferenceWriter,
    }
    if prefer is not None:
        return kinds[prefer]()
    for kind in kinds.values():
        try:
            return kind()
        except ImportError:
            continue
    return ReferenceWriter()


def write_store(
    directory: Path, chunks: Sequence[Chunk], shape: ChunkShape, store_writer: StoreWriter
) -> list[Chunk]:
    """Write the chunks ``store_writer`` supports into ``directory``; returns them."""
    directory.mkdir(parents=True, exist_ok=True)
    written = [c for c in chunks if store_writer.supports(c)]
    store_writer.write(directory, written, shape)
    return written
