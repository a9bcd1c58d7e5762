"""Throughput of the codec operations beside the limits measured on the same bytes.

For every device, case and dtype one group of benchmarks is timed together, interleaved
round by round (``bench.timing``): the limits, then each implementation x scale scope x
operation (``bench.impls``). Limits:

- CPU ``memcpy``: ``ctypes.memmove`` of every layer's K and V into preallocated buffers
  (the bytes ``encode`` reads); the limit of ``encode`` and ``decode_*``.
- CPU ``crc32``: ``zlib.crc32`` over the encoded blobs (reference, PER_TENSOR), the bytes
  ``parse`` reads; the limit of ``parse``.
- CPU ``alloc``: a fresh, zeroed ``bytearray`` of each of those blobs' sizes, all kept until
  the call returns, as ``encode``'s output is: the first-touch page faults any encoder that
  returns new buffers pays. Its ``bytes`` are K+V, encode's unit, so its GB/s is the encode
  throughput of an encoder that did nothing but allocate its output: a floor drawn beside
  encode, not a ratio's denominator.
- CUDA ``d2d``: device-to-device copy of V (the bytes ``quantize`` reads); limit of ``quantize``.
- CUDA ``h2d``: pinned host to device copy of K and V; limit of CUDA ``encode``/``decode_*``.

Each row's ``gbps`` is its ``bytes`` over its median time; ``ratio_to_limit`` divides it by
the named limit's GB/s from the same group, ``ratio_to_upstream`` by upstream's for the same
op, scope, dtype, case and device. An operation an implementation cannot do becomes a
``skip`` row with the error, and ratios against it are null.
"""

from __future__ import annotations

import ctypes
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from bench.impls import CodecImpl, CodecOps, LayerKV
from bench.progress import bar
from bench.results import SCOPES
from bench.stats import gbps, summarize
from bench.timing import Clock, CpuClock, CudaClock, Timed, run_interleaved

DTYPES: dict[str, torch.dtype] = {"float16": torch.float16, "bfloat16": torch.bfloat16}
CPU_OPS = ("encode", "parse", "decode_fp8", "decode_dequant")
CUDA_OPS = ("quantize", "encode", "decode_fp8", "decode_dequant")
CPU_LIMIT = {
    "encode": "memcpy",
    "parse": "crc32",
    "decode_fp8": "memcpy",
    "decode_dequant": "memcpy",
}
CUDA_LIMIT = {"quantize": "d2d", "encode": "h2d", "decode_fp8": "h2d", "decode_dequant": "h2d"}


@dataclass(frozen=True)
class Case:
    """``layers`` per-layer blobs of ``pages`` x ``page_size`` tokens x ``heads`` x ``head_dim``."""

    name: str
    layers: int
    pages: int
    page_size: int = 16
    heads: int = 8
    head_dim: int = 128


#: 7B-class geometry (Llama-2-7B with GQA / Mistral-7B): 32 layers, 8 KV heads, head_dim 128.
CASES: dict[str, Case] = {
    c.name: c
    for c in (
        Case("page16", layers=1, pages=1),
        Case("chunk64-layer", layers=1, pages=4),
        Case("chunk256-layer", layers=1, pages=16),
        Case("chunk256-7b", layers=32, pages=16),
        Case("64MiB", layers=1, pages=1024),
        Case("1GiB", layers=1, pages=16384),
    )
}


@dataclass(frozen=True)
class ThroughputPlan:
    """Which cases, dtypes and scopes to time, and how many rounds."""

    cpu_cases: tuple[Case, ...]
    cuda_cases: tuple[Case, ...]
    dtypes: tuple[str, ...] = tuple(DTYPES)
    scopes: tuple[str, ...] = SCOPES
    rounds: int = 5
    warmup: int = 1
    min_sample_s: float = 0.005
    devices: tuple[str, ...] = ("cpu", "cuda")
    cpu_ops: tuple[str, ...] = CPU_OPS
    cuda_ops: tuple[str, ...] = CUDA_OPS

    def describe(self) -> dict[str, Any]:
        """The plan as plain data, for the results header."""
        return {
            "cpu_cases": [c.name for c in self.cpu_cases],
            "cuda_cases": [c.name for c in self.cuda_cases],
            "dtypes": list(self.dtypes),
            "scopes": list(self.scopes),
            "rounds": self.rounds,
            "warmup": self.warmup,
            "min_sample_s": self.min_sample_s,
            "cpu_ops": list(self.cpu_ops),
            "cuda_ops": list(self.cuda_ops),
        }


QUICK = ThroughputPlan(
    cpu_cases=(CASES["page16"], CASES["chunk256-7b"], CASES["64MiB"]),
    cuda_cases=(CASES["chunk256-7b"], CASES["64MiB"]),
    rounds=5,
    warmup=0,
    min_sample_s=0.005,
)
FULL = ThroughputPlan(
    cpu_cases=tuple(
        CASES[n] for n in ("page16", "chunk64-layer", "chunk256-layer", "chunk256-7b", "64MiB")
    ),
    cuda_cases=tuple(
        CASES[n] for n in ("page16", "chunk256-layer", "chunk256-7b", "64MiB", "1GiB")
    ),
    rounds=15,
    warmup=2,
    min_sample_s=0.02,
)


def make_layers(case: Case, dtype: torch.dtype, device: str, seed: int = 0) -> list[LayerKV]:
    """Seeded N(0, 1) K and V per layer, token-major, generated on ``device``."""
    gen = torch.Generator(device).manual_seed(seed)
    shape = (case.pages, case.page_size, case.heads, case.head_dim)
    return [
        LayerKV(
            torch.randn(shape, generator=gen, device=device, dtype=dtype),
            torch.randn(shape, generator=gen, device=device, dtype=dtype),
        )
        for _ in range(case.layers)
    ]


@dataclass
class _Group:
    """The benchmarks of one (device, case, dtype) and what each row needs."""

    device: str
    case: Case
    dtype_name: str
    items: list[Timed] = field(default_factory=list)
    bytes_of: dict[tuple[Any, ...], Callable[[], int]] = field(default_factory=dict)

    def add(
        self,
        key: tuple[Any, ...],
        fn: Callable[[], object],
        clock: Clock,
        n_bytes: Callable[[], int],
        setup: Callable[[], object] | None = None,
    ) -> None:
        self.items.append(Timed(key, fn, clock, setup))
        self.bytes_of[key] = n_bytes


class _Memcpy:
    """``ctypes.memmove`` of every layer's K and V into preallocated buffers.

    Holds the tensors whose raw addresses it copies, so they live as long as it does.
    """

    def __init__(self, layers: list[LayerKV]) -> None:
        self._keep = (layers, [torch.empty(layer.kv_bytes, dtype=torch.uint8) for layer in layers])
        self._moves: list[tuple[int, int, int]] = []
        for layer, out in zip(layers, self._keep[1], strict=True):
            k_bytes = layer.k.numel() * layer.k.element_size()
            v_bytes = layer.v.numel() * layer.v.element_size()
            self._moves.append((out.data_ptr(), layer.k.data_ptr(), k_bytes))
            self._moves.append((out.data_ptr() + k_bytes, layer.v.data_ptr(), v_bytes))

    def __call__(self) -> None:
        for dst, src, n in self._moves:
            ctypes.memmove(dst, src, n)


def _cpu_limits(group: _Group, layers: list[LayerKV], crc_source: CodecOps | None) -> None:
    clock = CpuClock()
    kv = sum(layer.kv_bytes for layer in layers)
    group.add(("copy", "memcpy", None), _Memcpy(layers), clock, lambda: kv)
    if crc_source is not None:
        source = crc_source

        def crc32_all() -> None:
            for buf in source.buffers():
                zlib.crc32(buf)

        group.add(
            ("crc32", "crc32", None),
            crc32_all,
            clock,
            source.blob_bytes,
            setup=source.buffers,
        )
        sizes: list[int] = []

        def measure_sizes() -> None:
            sizes[:] = [len(buf) for buf in source.buffers()]

        group.add(
            ("alloc", "alloc", None),
            lambda: _alloc_all(sizes),
            clock,
            lambda: kv,
            setup=measure_sizes,
        )


def _alloc_all(sizes: list[int]) -> list[bytearray]:
    """The ``alloc`` limit: one fresh zeroed buffer per size, returned so all stay alive."""
    return [bytearray(n) for n in sizes]


def _cuda_limits(group: _Group, layers: list[LayerKV], clock: Clock) -> None:
    v_dst = [torch.empty_like(layer.v) for layer in layers]
    host = [torch.empty(layer.kv_bytes, dtype=torch.uint8).pin_memory() for layer in layers]
    dev = [torch.empty(layer.kv_bytes, dtype=torch.uint8, device="cuda") for layer in layers]
    v_bytes = sum(layer.v.numel() * layer.v.element_size() for layer in layers)
    kv = sum(layer.kv_bytes for layer in layers)

    def d2d() -> None:
        for out, layer in zip(v_dst, layers, strict=True):
            out.copy_(layer.v)

    def h2d() -> None:
        for d, h in zip(dev, host, strict=True):
            d.copy_(h, non_blocking=True)

    group.add(("copy", "d2d", None), d2d, clock, lambda: v_bytes)
    group.add(("copy", "h2d", None), h2d, clock, lambda: kv)


def _op_bytes(op: str, ops: CodecOps) -> Callable[[], int]:
    if op == "encode":
        return lambda: sum(layer.kv_bytes for layer in ops.layers)
    if op == "quantize":
        return lambda: sum(layer.v.numel() * layer.v.element_size() for layer in ops.layers)
    return ops.blob_bytes


def _build_group(
    device: str,
    case: Case,
    dtype_name: str,
    impls: dict[str, CodecImpl],
    plan: ThroughputPlan,
) -> _Group:
    dtype = DTYPES[dtype_name]
    group = _Group(device, case, dtype_name)
    layers = make_layers(case, dtype, device)
    per_impl = {
        (name, scope): CodecOps(impl, scope, layers)
        for name, impl in impls.items()
        for scope in plan.scopes
    }
    if device == "cpu":
        crc_impl = "reference" if "reference" in impls else next(iter(impls), None)
        _cpu_limits(group, layers, per_impl.get((crc_impl, "PER_TENSOR")) if crc_impl else None)
        clock: Clock = CpuClock()
        op_names = plan.cpu_ops
    else:
        clock = CudaClock(torch)
        _cuda_limits(group, layers, clock)
        op_names = plan.cuda_ops
    for (name, scope), ops in per_impl.items():
        for op in op_names:
            setup = None if op in ("encode", "quantize") else ops.buffers
            group.add(
                (op, name, scope), ops.op(op, dtype, device), clock, _op_bytes(op, ops), setup
            )
    return group


def _rows(group: _Group, live: list[Timed], rounds: int) -> Iterator[dict[str, Any]]:
    """Throughput rows with ratios, then skip rows for benchmarks that raised."""
    limits = CPU_LIMIT if group.device == "cpu" else CUDA_LIMIT
    measured: dict[tuple[Any, ...], tuple[int, Any, float]] = {}
    samples = {item.key: item.samples for item in live}
    for item in live:
        summary = summarize(item.samples)
        n_bytes = group.bytes_of[item.key]()
        measured[item.key] = (n_bytes, summary, gbps(n_bytes, summary.median))
    limit_gbps = {key[1]: value[2] for key, value in measured.items() if key[2] is None}
    for key, (n_bytes, summary, rate) in measured.items():
        op, impl, scope = key
        is_limit = scope is None
        limit = None if is_limit else limits[op]
        ratio_limit = rate / limit_gbps[limit] if limit in limit_gbps else None
        upstream = measured.get((op, "upstream", scope))
        ratio_up = rate / upstream[2] if impl == "reference" and upstream is not None else None
        yield {
            "kind": "throughput",
            "op": op,
            "impl": impl,
            "device": group.device,
            "scope": scope,
            "dtype": group.dtype_name,
            "case": group.case.name,
            "bytes": n_bytes,
            "rounds": rounds,
            "median_s": summary.median,
            "iqr_s": summary.iqr,
            "gbps": rate,
            "limit": limit,
            "ratio_to_limit": ratio_limit,
            "ratio_to_upstream": ratio_up,
            "q25_s": summary.q25,
            "q75_s": summary.q75,
            "samples_s": samples[key],
        }
    for item in group.items:
        if item.error is not None:
            op, impl, scope = item.key
            yield {
                "kind": "skip",
                "what": f"throughput {op} {impl} {group.device} {scope} {group.dtype_name} "
                f"{group.case.name}",
                "reason": item.error,
            }


def cuda_skip_reason() -> str | None:
    """Why CUDA benchmarks cannot run here, or None when they can."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is built without CUDA"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False (no CUDA device or driver visible)"
    return None


def run_throughput(
    plan: ThroughputPlan,
    impls: dict[str, CodecImpl],
    *,
    progress: bool = True,
) -> Iterator[dict[str, Any]]:
    """Every group of the plan, CPU first; yields throughput and skip records."""
    for device in plan.devices:
        if device == "cuda":
            reason = cuda_skip_reason()
            if reason is not None:
                yield {"kind": "skip", "what": "throughput cuda (all cases)", "reason": reason}
                continue
        cases = plan.cpu_cases if device == "cpu" else plan.cuda_cases
        for case in cases:
            for dtype_name in plan.dtypes:
                group = _build_group(device, case, dtype_name, impls, plan)
                pbar = bar(
                    len(group.items) * plan.rounds,
                    f"throughput {device} {case.name} {dtype_name}",
                    enabled=progress,
                    unit="sample",
                )
                live = run_interleaved(
                    group.items,
                    rounds=plan.rounds,
                    warmup=plan.warmup,
                    min_sample_s=plan.min_sample_s,
                    on_sample=pbar.update,
                )
                pbar.close()
                yield from _rows(group, live, plan.rounds)
                del group, live
                if device == "cuda":
                    torch.cuda.empty_cache()
