"""Throughput of the codec operations beside the limits measured on the same bytes.

For every device, case and dtype one group of benchmarks is timed together, interleaved
round by round (``bench.throughput.timing``): the limits, then each implementation x scale scope x
operation (``bench.common.impls``). CPU limits:

- ``memcpy``: ``ctypes.memmove`` of every layer's K and V into preallocated buffers
  (the bytes ``encode`` reads); the limit of ``encode`` and ``decode_*``.
- ``crc32``: ``zlib.crc32`` over the encoded blobs (reference, PER_TENSOR), the bytes
  ``parse`` reads; the limit of ``parse``.
- ``alloc``: a fresh, zeroed ``bytearray`` of each of those blobs' sizes, all kept until
  the call returns, as ``encode``'s output is: the first-touch page faults any encoder that
  returns new buffers pays. Its ``bytes`` are K+V, encode's unit, so its GB/s is the encode
  throughput of an encoder that did nothing but allocate its output: a floor drawn beside
  encode, not a ratio's denominator.

CUDA limits and method: ``bench.throughput.cuda_limits``.

``measure`` times the groups of a plan in one process, in an order shuffled by its seed,
and returns one result per group (plain data, so a worker process can hand it back:
``bench.throughput.workers``); ``rows`` merges the results of one group from several processes into
the rows of the results file. Each row's ``gbps`` is its ``bytes`` over its median time
(over every sample of every process); ``ratio_to_limit`` divides it by the named limit's
GB/s from the same group, ``ratio_to_upstream`` by upstream's for the same op, scope, dtype,
case and device. An operation an implementation cannot do becomes a ``skip`` row with the
error, and ratios against it are null.
"""

from __future__ import annotations

import ctypes
import functools
import random
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import torch

from ...reference_impl.kv_codec.header_fields import ScaleScope
from ..common.impls import CodecImpl, CodecOps, LayerKV
from ..common.nvml import RowSampler, find_handle, load_nvml, nvml_uuid
from ..common.progress import bar
from ..common.rows import SCOPES
from .cuda_limits import CUDA_LIMIT, LAUNCH_BOUND_S, PINNED_OF, L2Flush, cuda_limits
from .serde_calls import SERDE_MODULES, SERDE_OPS, SERDE_SCOPES, SerdeOps
from .stats import gbps, summarize
from .timing import Clock, CpuClock, CudaClock, Timed, run_interleaved

DTYPES: dict[str, torch.dtype] = {"float16": torch.float16, "bfloat16": torch.bfloat16}
CPU_OPS = ("encode", "parse", "decode_fp8", "decode_dequant")
CUDA_OPS = ("quantize", "encode", "decode_fp8", "decode_dequant")
CPU_LIMIT = {
    "encode": "memcpy",
    "parse": "crc32",
    "decode_fp8": "memcpy",
    "decode_dequant": "memcpy",
    **dict.fromkeys(SERDE_OPS, "memcpy"),
}
#: CUDA operations that compute a CRC-32 on the host (their ``crc_share``).
CUDA_CRC_OPS = ("encode", "decode_fp8", "decode_dequant")


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
    """Which cases, dtypes and scopes to time; how many processes, and rounds in each."""

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
    processes: int = 3
    cpu_timer: str = "process_time"
    #: The serde operations (``bench.throughput.serde_calls``), timed on CPU for the cases named
    #: here, in
    #: the scopes of ``scopes`` a serde writes.
    serde_ops: tuple[str, ...] = SERDE_OPS
    serde_cases: tuple[str, ...] = ()

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
            "processes": self.processes,
            "cpu_timer": self.cpu_timer,
            "serde_ops": list(self.serde_ops),
            "serde_cases": list(self.serde_cases),
        }

    def to_json(self) -> dict[str, Any]:
        """The whole plan as plain data (cases in full), for a worker process."""
        data = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ThroughputPlan:
        """The plan ``to_json`` wrote."""
        fields = dict(data)
        for name in ("cpu_cases", "cuda_cases"):
            fields[name] = tuple(Case(**c) for c in fields[name])
        for name in (
            "dtypes",
            "scopes",
            "devices",
            "cpu_ops",
            "cuda_ops",
            "serde_ops",
            "serde_cases",
        ):
            fields[name] = tuple(fields[name])
        return replace(cls((), ()), **fields)


#: Five processes of two rounds (ten samples a row, as nine were with 3 x 3): the process is
#: the unit a comparison replicates on (``bench.gate.decision``), and Mann-Whitney U on 5 against
#: 5 processes can reach Holm's first threshold over four operations (1/252 < 0.05/4).
QUICK = ThroughputPlan(
    cpu_cases=(CASES["page16"], CASES["chunk256-7b"], CASES["64MiB"]),
    cuda_cases=(CASES["chunk256-7b"], CASES["64MiB"]),
    rounds=2,
    warmup=1,
    min_sample_s=0.002,
    processes=5,
    # The serde where its per-call cost shows (one page) and where LMCache's L2 offload
    # writes (one chunk of a 7B model); at 64 MiB it would double upstream's share of the run.
    serde_cases=("page16", "chunk256-7b"),
)
FULL = ThroughputPlan(
    cpu_cases=tuple(
        CASES[n] for n in ("page16", "chunk64-layer", "chunk256-layer", "chunk256-7b", "64MiB")
    ),
    cuda_cases=tuple(
        CASES[n] for n in ("page16", "chunk256-layer", "chunk256-7b", "64MiB", "1GiB")
    ),
    rounds=5,
    warmup=2,
    min_sample_s=0.02,
    processes=5,
    serde_cases=("page16", "chunk64-layer", "chunk256-layer", "chunk256-7b", "64MiB"),
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
        max_number: int = 100_000,
    ) -> None:
        self.items.append(Timed(key, fn, clock, setup, max_number=max_number))
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


def _cpu_limits(
    group: _Group, layers: list[LayerKV], crc_source: CodecOps | None, clock: CpuClock
) -> None:
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
    crc_impl = "reference" if "reference" in impls else next(iter(impls), None)
    crc_source = per_impl.get((crc_impl, ScaleScope.PER_TENSOR.name)) if crc_impl else None
    max_number = 100_000
    host_clock = CpuClock(plan.cpu_timer)
    if device == "cpu":
        _cpu_limits(group, layers, crc_source, host_clock)
        clock: Clock = host_clock
        op_names = plan.cpu_ops
    else:
        # one cold call per sample, after an L2 flush (bench.throughput.cuda_limits)
        l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        clock = CudaClock(torch, flush=L2Flush(torch, l2))
        max_number = 1
        if crc_source is not None:
            for lim in cuda_limits(torch, [layer.v for layer in layers], crc_source.buffers):
                group.add(
                    (lim.op, lim.impl, None),
                    lim.fn,
                    host_clock if lim.host else clock,
                    lim.n_bytes,
                    lim.setup,
                    max_number=max_number,
                )
        op_names = plan.cuda_ops
    for (name, scope), ops in per_impl.items():
        for op in op_names:
            if device == "cpu":
                setup: Callable[[], object] | None = functools.partial(ops.prepare, op, dtype)
            else:
                setup = None if op in ("encode", "quantize") else ops.buffers
            group.add(
                (op, name, scope),
                ops.op(op, dtype, device),
                clock,
                _op_bytes(op, ops),
                setup,
                max_number=max_number,
            )
    if device == "cpu" and case.name in plan.serde_cases:
        _serde_items(group, layers, impls, plan, host_clock)
    return group


def _serde_items(
    group: _Group,
    layers: list[LayerKV],
    impls: dict[str, CodecImpl],
    plan: ThroughputPlan,
    clock: CpuClock,
) -> None:
    """The serde operations of every implementation that has a serde, in its scopes."""
    for name, impl in impls.items():
        if name not in SERDE_MODULES:
            continue
        for scope in (s for s in plan.scopes if s in SERDE_SCOPES):
            serde = SerdeOps(name, impl.module.ScaleScope, scope, layers)
            for op in plan.serde_ops:
                group.add(
                    (op, name, scope),
                    serde.op(op),
                    clock,
                    functools.partial(serde.op_bytes, op),
                    setup=functools.partial(serde.prepare, op),
                )


def _key_id(key: tuple[Any, ...]) -> str:
    """``op/impl/scope`` (``-`` for no scope): a benchmark's name within its group."""
    return "/".join("-" if part is None else str(part) for part in key)


def group_id(device: str, case: str, dtype: str) -> str:
    """``device/case/dtype``: a group's name across processes."""
    return f"{device}/{case}/{dtype}"


def cuda_skip_reason() -> str | None:
    """Why CUDA benchmarks cannot run here, or None when they can."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is built without CUDA"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False (no CUDA device or driver visible)"
    return None


def _utc() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _measure_group(
    group: _Group,
    plan: ThroughputPlan,
    rng: random.Random,
    numbers: dict[str, int],
    process: int,
    progress: bool,
) -> dict[str, Any]:
    """Time one group (items in a shuffled order) and return its result as plain data."""
    gid = group_id(group.device, group.case.name, group.dtype_name)
    rng.shuffle(group.items)
    for item in group.items:
        item.number = numbers.get(f"{gid}/{_key_id(item.key)}", 0)
    pbar = bar(
        len(group.items) * plan.rounds,
        f"throughput {gid} (process {process + 1}/{plan.processes})",
        enabled=progress,
        unit="sample",
    )
    nvml = load_nvml() if group.device == "cuda" else None
    handle = None
    if nvml is not None:
        try:
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            handle = find_handle(nvml, nvml_uuid(str(props.uuid)))
        except Exception:  # NVML without this device: rows carry no telemetry
            nvml = None
    started = _utc()
    with RowSampler(nvml, handle) as sampler:
        live = run_interleaved(
            group.items,
            rounds=plan.rounds,
            warmup=plan.warmup,
            min_sample_s=plan.min_sample_s,
            on_planned=pbar.reset,
            on_sample=pbar.update,
        )
    pbar.close()
    live_keys = {id(item) for item in live}
    return {
        "group": gid,
        "device": group.device,
        "case": group.case.name,
        "dtype": group.dtype_name,
        "process": process,
        "started_utc": started,
        "ended_utc": _utc(),
        "telemetry": sampler.summary(),
        "telemetry_records": sampler.records(gid, process),
        "items": [
            {
                "key": list(item.key),
                "bytes": group.bytes_of[item.key]() if id(item) in live_keys else None,
                "number": item.number,
                "samples": item.samples,
                "error": item.error,
            }
            for item in group.items
        ],
    }


def measure(
    plan: ThroughputPlan,
    impls: dict[str, CodecImpl],
    *,
    process: int = 0,
    seed: int = 0,
    numbers: dict[str, int] | None = None,
    progress: bool = True,
) -> Iterator[dict[str, Any]]:
    """Time every group of the plan in this process, groups and benchmarks in an order
    shuffled by ``seed``; yields each group's result, or a ``skip`` record for CUDA when it
    cannot run. ``numbers`` (``group/op/impl/scope`` -> calls per sample) skips calibration.
    """
    rng = random.Random(seed)
    groups: list[tuple[str, Case, str]] = []
    for device in plan.devices:
        if device == "cuda":
            reason = cuda_skip_reason()
            if reason is not None:
                yield {"kind": "skip", "what": "throughput cuda (all cases)", "reason": reason}
                continue
        cases = plan.cpu_cases if device == "cpu" else plan.cuda_cases
        groups += [(device, case, dtype) for case in cases for dtype in plan.dtypes]
    rng.shuffle(groups)
    for device, case, dtype_name in groups:
        group = _build_group(device, case, dtype_name, impls, plan)
        yield _measure_group(group, plan, rng, numbers or {}, process, progress)
        del group
        if device == "cuda":
            torch.cuda.empty_cache()


def calibrated_numbers(results: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``group/op/impl/scope`` -> calls per sample, from one process's group results."""
    return {
        f"{r['group']}/{_key_id(tuple(item['key']))}": item["number"]
        for r in results
        if "group" in r
        for item in r["items"]
        if item["error"] is None
    }


def rows(results: Sequence[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """Throughput rows of one group from its results in every process, then skip rows.

    A benchmark is a row when it ran in every process (its samples are kept per process,
    in round order, so a row can be set against its limit process by process:
    ``samples_by_process``); one that raised in any process is a skip row with the error.
    """
    first = results[0]
    device, case, dtype_name = first["device"], first["case"], first["dtype"]
    limits = CPU_LIMIT if device == "cpu" else CUDA_LIMIT
    per_key: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for result in results:
        for item in result["items"]:
            per_key.setdefault(tuple(item["key"]), []).append(item)
    measured: dict[tuple[Any, ...], tuple[int, Any, float, list[list[float]]]] = {}
    errors: dict[tuple[Any, ...], str] = {}
    for key, items in per_key.items():
        failed = [i["error"] for i in items if i["error"] is not None]
        if failed or len(items) != len(results):
            errors[key] = failed[0] if failed else "not measured in every process"
            continue
        by_process = [list(i["samples"]) for i in items]
        summary = summarize([s for samples in by_process for s in samples])
        n_bytes = int(items[0]["bytes"])
        measured[key] = (n_bytes, summary, gbps(n_bytes, summary.median), by_process)
    limit_gbps = {key[1]: value[2] for key, value in measured.items() if key[2] is None}
    limit_median = {key[1]: value[1].median for key, value in measured.items() if key[2] is None}
    telemetry = [r["telemetry"] for r in results if r["telemetry"] is not None]
    span = {
        "started_utc": min(r["started_utc"] for r in results),
        "ended_utc": max(r["ended_utc"] for r in results),
    }
    for key, (n_bytes, summary, rate, by_process) in measured.items():
        op, impl, scope = key
        is_limit = scope is None
        limit = None if is_limit else limits[op]
        ratio_limit = rate / limit_gbps[limit] if limit in limit_gbps else None
        upstream = measured.get((op, "upstream", scope))
        ratio_up = rate / upstream[2] if impl == "reference" and upstream is not None else None
        row: dict[str, Any] = {
            "kind": "throughput",
            "op": op,
            "impl": impl,
            "device": device,
            "scope": scope,
            "dtype": dtype_name,
            "case": case,
            "bytes": n_bytes,
            "rounds": sum(len(s) for s in by_process),
            "median_s": summary.median,
            "iqr_s": summary.iqr,
            "gbps": rate,
            "limit": limit,
            "ratio_to_limit": ratio_limit,
            "ratio_to_upstream": ratio_up,
            "q25_s": summary.q25,
            "q75_s": summary.q75,
            "samples_s": [s for samples in by_process for s in samples],
            "samples_by_process": by_process,
            "processes": len(by_process),
            **span,
        }
        if device == "cuda":
            pinned = PINNED_OF.get(limit or "")
            row["limit_pinned"] = pinned
            row["ratio_to_pinned"] = rate / limit_gbps[pinned] if pinned in limit_gbps else None
            crc = limit_median.get("crc32")
            row["crc_share"] = (
                crc / summary.median if crc is not None and op in CUDA_CRC_OPS else None
            )
            row["launch_bound"] = summary.median < LAUNCH_BOUND_S
            row["telemetry"] = telemetry
            row["throttled"] = any(t["throttled"] for t in telemetry)
        yield row
    for key, error in errors.items():
        op, impl, scope = key
        yield {
            "kind": "skip",
            "what": f"throughput {op} {impl} {device} {scope} {dtype_name} {case}",
            "reason": error,
        }
