"""The short GPU check (< 5 minutes on one H200), one command where a GPU is lent::

    python3 -m lmckv bench gpu-check --out DIR

1. Harness: a device-to-device copy of 1 GiB, counted as 2 GiB moved (it reads and writes
   every byte), must reach ``D2D_FLOOR`` (0.8) of the device's peak memory bandwidth
   (``bench.throughput.cuda_limits.peak_bandwidth``: vendor figure by name, else NVML memory clock x
   bus width). Below it the timing harness, not the codec, is suspect: exit 4.
2. Byte identity: encode on CUDA gives the same bytes as encode on CPU, for float16 and
   bfloat16 and every scope (EXTERNAL both with FP8 V given and with static scales given),
   on V with quiet and loud pages, an all-zero head, values beyond e4m3's range and float16
   subnormals; decode to CUDA (FP8 kept and dequantized) gives bit-identical tensors.
3. Throughput on CUDA in three processes (``bench.throughput.workers``), each op beside the limit of
   what it moves (``bench.throughput.cuda_limits``), one cold call per sample after an L2 flush,
   NVML
   telemetry per group; target: reference ``quantize`` >= 0.5x d2d on 1 GiB.
4. Accuracy with the quantization on the device: the reference codec encoding on CUDA,
   decoded on CPU (``bench.accuracy.reconstruction`` metrics), rows tagged ``device: cuda``.

Writes to DIR a results file ``bench-*.jsonl`` (schema-valid; the header's ``gpu_check``
holds the harness and identity checks), ``gpu-check.json`` and ``gpu-check.md`` (a short
summary). Exit codes: 0 PASS, 1 FAIL (identity or target), 3 SKIP (no usable CUDA or no
reference codec, with the reason), 4 harness error.
"""

from __future__ import annotations

import json
import random
import sys
import time
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any

import torch

from ...reference_impl.kv_codec.header_fields import ScaleScope
from ..accuracy import data, reconstruction
from ..common.env import collect_env
from ..common.impls import STATIC_SCALE, CodecImpl, load_impls, static_fp8
from ..common.machine import machine_record
from ..common.rows import SCOPES, ResultsWriter, load
from ..throughput.cuda_limits import CUDA_LIMIT, PINNED_OF, peak_bandwidth
from ..throughput.measure import CASES, DTYPES, ThroughputPlan, cuda_skip_reason
from ..throughput.targets import TARGETS
from ..throughput.workers import run_processes

PAGES, PAGE_SIZE, HEADS, HEAD_DIM = 64, 16, 8, 128


def _tricky_v(dtype: torch.dtype, gen: torch.Generator, pages: int) -> torch.Tensor:
    """V with pages 1e-4..1e3 apart, one all-zero head, saturating and subnormal values."""
    v = torch.randn((pages, PAGE_SIZE, HEADS, HEAD_DIM), generator=gen)
    v *= torch.logspace(-4, 3, pages).view(pages, 1, 1, 1)
    v[:, :, 3] = 0.0
    v[5, 2, 1, :8] = torch.tensor([1e4, -1e4, 600.0, -600.0, 6e-8, -6e-8, 0.0, -0.0])
    return v.to(dtype)


def _encode_variants(scope: str) -> list[tuple[str, dict[str, Any]]]:
    if scope != ScaleScope.EXTERNAL.name:
        return [(scope, {})]
    return [("EXTERNAL+fp8", {"quant": True}), ("EXTERNAL+scales", {"quant": False})]


def _encode(impl: CodecImpl, scope: str, k: torch.Tensor, v: torch.Tensor, quant: bool) -> bytes:
    codec = impl.codec(scope)
    kwargs: dict[str, Any] = {
        "page_size": PAGE_SIZE,
        "kv_head_count": HEADS,
        "head_dim": HEAD_DIM,
        "page_axis": 0,
    }
    if scope == ScaleScope.EXTERNAL.name:
        kwargs["precomputed_v_scales"] = torch.tensor(STATIC_SCALE, device=v.device)
        if quant:
            kwargs["precomputed_v_quant"] = static_fp8(v)
    return bytes(codec.to_bytes(codec.encode(k, v, **kwargs)))


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-identical tensors (NaNs included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


def correctness(impl: CodecImpl, device: str = "cuda", pages: int = PAGES) -> list[dict[str, Any]]:
    """Checks 1 and 2 for every dtype and scope (``device`` other than CPU; "cpu" gives a
    dry run of the checks themselves)."""
    results = []
    gen = torch.Generator().manual_seed(7)
    for dtype_name, dtype in DTYPES.items():
        k = torch.randn((pages, PAGE_SIZE, HEADS, HEAD_DIM), generator=gen).to(dtype)
        v = _tricky_v(dtype, gen, pages)
        for scope in SCOPES:
            for label, opts in _encode_variants(scope):
                quant = bool(opts.get("quant", False))
                entry: dict[str, Any] = {"dtype": dtype_name, "scope": label}
                try:
                    cpu_blob = _encode(impl, scope, k, v, quant)
                    gpu_blob = _encode(impl, scope, k.to(device), v.to(device), quant)
                    entry["encode_bytes_equal"] = cpu_blob == gpu_blob
                    if len(cpu_blob) == len(gpu_blob) and cpu_blob != gpu_blob:
                        entry["bytes_differing"] = sum(
                            x != y for x, y in zip(cpu_blob, gpu_blob, strict=True)
                        )
                    codec = impl.codec(scope)
                    enc = codec.from_bytes(bytearray(cpu_blob))
                    same = True
                    for out_v in (None, dtype):
                        on_cpu = codec.decode(enc, out_v_dtype=out_v)
                        on_gpu = codec.decode(enc, out_v_dtype=out_v, device=device)
                        same &= all(
                            _same(c, g.cpu()) and g.device.type == device
                            for c, g in zip(on_cpu, on_gpu, strict=True)
                        )
                    entry["decode_equal"] = same
                except Exception as exc:  # a crash on CUDA is a failed check, with its reason
                    entry["error"] = f"{type(exc).__name__}: {exc}"
                entry["passed"] = bool(entry.get("encode_bytes_equal")) and bool(
                    entry.get("decode_equal")
                )
                results.append(entry)
    return results


#: Fraction of the peak memory bandwidth a 1 GiB device copy must reach (2x bytes moved).
D2D_FLOOR = 0.8
D2D_CHECK_BYTES = 1 << 30
ACCURACY_FAMILIES = ("gaussian", "page_scale", "large")
EXIT_PASS, EXIT_FAIL, EXIT_SKIP, EXIT_HARNESS = 0, 1, 3, 4


def plans(full: bool) -> list[ThroughputPlan]:
    """The CUDA plans: every op on two cases, then ``quantize`` alone on 1 GiB."""
    base = ThroughputPlan(
        cpu_cases=(),
        cuda_cases=(CASES["chunk256-7b"], CASES["64MiB"]),
        rounds=5 if full else 3,
        warmup=1,
        min_sample_s=0.0,
        devices=("cuda",),
        processes=3,
    )
    big = replace(base, cuda_cases=(CASES["1GiB"],), cuda_ops=("quantize",))
    return [base, big]


def d2d_check(
    seconds: float, size: int, peak: float | None, floor: float = D2D_FLOOR
) -> dict[str, Any]:
    """The harness check of a device copy of ``size`` bytes taking ``seconds``: bytes moved
    are 2x size (read and write) against ``floor`` x peak (bytes/s)."""
    moved = 2 * size / seconds
    return {
        "size_bytes": size,
        "median_s": seconds,
        "moved_bps": moved,
        "peak_bps": peak,
        "fraction_of_peak": None if peak is None else moved / peak,
        "floor": floor,
        "passed": peak is not None and moved >= floor * peak,
    }


def measure_d2d(size: int = D2D_CHECK_BYTES, repeats: int = 10) -> float:
    """Median seconds of a ``size``-byte device-to-device copy (CUDA events)."""
    cuda: Any = torch.cuda
    src = torch.empty(size, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    times: list[float] = []
    for _ in range(repeats):
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        cuda.synchronize()
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(float(start.elapsed_time(end)) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    return median(times)


def on_device(impl: CodecImpl, device: str) -> CodecImpl:
    """The same codec whose ``encode`` moves its tensors to ``device`` first (quantizing
    there); ``to_bytes``, ``from_bytes`` and ``decode`` are the codec's own."""
    base_cls = impl.module.AsymK16V8Codec

    class OnDevice(base_cls):  # type: ignore[misc, valid-type]
        def encode(self, k: torch.Tensor, v: torch.Tensor, **kwargs: Any) -> Any:
            moved = {
                name: value.to(device) if isinstance(value, torch.Tensor) else value
                for name, value in kwargs.items()
            }
            return super().encode(k.to(device), v.to(device), **moved)

    module = types.ModuleType(f"{impl.module.__name__}@{device}")
    module.AsymK16V8Codec = OnDevice  # type: ignore[attr-defined]
    module.ScaleScope = impl.module.ScaleScope  # type: ignore[attr-defined]
    return CodecImpl(impl.name, module, impl.version)


def device_accuracy(impl: CodecImpl, device: str) -> Iterator[dict[str, Any]]:
    """Accuracy rows (e4m3 through the codec) with the encode on ``device``."""
    wrapped = on_device(impl, device)
    for family in ACCURACY_FAMILIES:
        for row in reconstruction.evaluate(data.synthetic(family), wrapped, formats=("e4m3",)):
            yield {**row, "device": device}


def pairs(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each CUDA op row of the reference with its limit (and pinned limit): the pairing."""
    out = []
    for r in records:
        if r.get("kind") != "throughput" or r["impl"] != "reference" or r["device"] != "cuda":
            continue
        out.append(
            {
                "op": r["op"],
                "scope": r["scope"],
                "dtype": r["dtype"],
                "case": r["case"],
                "gbps": r["gbps"],
                "limit": r["limit"],
                "ratio_to_limit": r["ratio_to_limit"],
                "limit_pinned": r.get("limit_pinned"),
                "ratio_to_pinned": r.get("ratio_to_pinned"),
                "crc_share": r.get("crc_share"),
                "launch_bound": r.get("launch_bound"),
                "throttled": r.get("throttled"),
            }
        )
    return out


def summary_markdown(report: Mapping[str, Any]) -> str:
    """The short Markdown summary of a check."""
    lines = [f"# gpu-check: {report['verdict']}", ""]
    if report["verdict"] == "SKIP":
        return "\n".join([*lines, f"Skipped: {report['reason']}", ""])
    gpu = report["machine"]["gpu"]
    lines += [
        f"- GPU: {gpu['name']} ({gpu['uuid']}), driver {gpu.get('driver')}, "
        f"{gpu['sm_count']} SMs, L2 {gpu['l2_bytes'] / 2**20:.0f} MiB, "
        f"power limit {gpu.get('power_limit_w')} W, MIG {gpu.get('mig_mode')}",
        f"- machine_id {report['machine_id']}, wall {report.get('wall_s')} s",
    ]
    d2d = report["d2d"]
    frac = d2d["fraction_of_peak"]
    lines.append(
        f"- harness: 1 GiB d2d moves {d2d['moved_bps'] / 1e12:.2f} TB/s "
        f"(2x bytes), {'n/a' if frac is None else f'{frac:.2f}'} of peak "
        f"{(d2d['peak_bps'] or 0) / 1e12:.2f} TB/s ({report['peak_source']}); floor "
        f"{d2d['floor']}: {'PASS' if d2d['passed'] else 'HARNESS ERROR'}"
    )
    if "identity" not in report:
        return "\n".join([*lines, ""])
    failed = [c for c in report["identity"] if not c["passed"]]
    lines.append(
        f"- CPU/GPU byte identity: {len(report['identity']) - len(failed)}/"
        f"{len(report['identity'])} dtype x scope pass"
        + "".join(f"; FAIL {c['dtype']} {c['scope']}" for c in failed)
    )
    for case, stats in report.get("quantize_vs_d2d", {}).items():
        lines.append(f"- quantize/d2d {case}: worst {stats['worst']:.3f}, best {stats['best']:.3f}")
    lines += [
        "",
        "| op | case | dtype | scope | GB/s | limit | ratio | pinned | ratio | CRC share |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.3g}"

    for p in report.get("pairs", []):
        flags = (" (launch-bound)" if p["launch_bound"] else "") + (
            " (throttled)" if p["throttled"] else ""
        )
        lines.append(
            f"| {p['op']}{flags} | {p['case']} | {p['dtype']} | {p['scope']} | "
            f"{num(p['gbps'])} | {p['limit']} | {num(p['ratio_to_limit'])} | "
            f"{p['limit_pinned'] or '-'} | {num(p['ratio_to_pinned'])} | {num(p['crc_share'])} |"
        )
    return "\n".join([*lines, ""])


def _finish(out_dir: Path, report: dict[str, Any], code: int) -> int:
    (out_dir / "gpu-check.json").write_text(json.dumps(report, indent=1))
    (out_dir / "gpu-check.md").write_text(summary_markdown(report))
    print(f"{report['verdict']}: gpu-check, details in {out_dir}/gpu-check.md")
    return code


def run_check(out_dir: Path, *, full: bool = False) -> int:
    """Run the check; writes its files into ``out_dir``; returns the exit code."""
    t0 = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    reason = cuda_skip_reason()
    impls, missing = load_impls()
    if reason is None and "reference" not in impls:
        reason = missing["reference"]
    if reason is not None:
        print(f"SKIP: {reason}")
        return _finish(out_dir, {"verdict": "SKIP", "reason": reason}, EXIT_SKIP)
    machine = machine_record()
    report: dict[str, Any] = {"machine": machine}
    peak, report["peak_source"] = peak_bandwidth(machine["gpu"])
    report["d2d"] = d2d_check(measure_d2d(), D2D_CHECK_BYTES, peak)
    with ResultsWriter(
        out_dir,
        mode="full" if full else "quick",
        env=collect_env(machine["gpu"]),
        machine=machine,
        extra_header={"gpu_check": report},
    ) as out:
        report["machine_id"] = out.machine_id
        if not report["d2d"]["passed"]:
            report.update(verdict="HARNESS ERROR", wall_s=round(time.monotonic() - t0, 1))
            return _finish(out_dir, report, EXIT_HARNESS)
        ref = impls["reference"]
        report["identity"] = correctness(ref)
        for c in report["identity"]:
            print(f"{'PASS' if c['passed'] else 'FAIL'} identity {c['dtype']:8} {c['scope']}")
        seed = random.randrange(2**31)
        for plan in plans(full):
            out.write_all(run_processes(plan, tuple(impls), seed=seed, threads=1, progress=True))
        out.write_all(device_accuracy(ref, "cuda"))
        results_path = out.path
    report["results_file"] = results_path.name
    _, records = load(results_path)
    report["pairs"] = pairs(records)
    by_case: dict[str, list[float]] = {}
    for p in report["pairs"]:
        if p["op"] == "quantize" and p["ratio_to_limit"] is not None:
            by_case.setdefault(p["case"], []).append(p["ratio_to_limit"])
    goal = TARGETS["cuda_quantize_vs_d2d"]
    report["quantize_vs_d2d"] = {
        case: {"worst": min(v), "best": max(v), "rows": len(v)} for case, v in by_case.items()
    }
    target_ok = "1GiB" in by_case and min(by_case["1GiB"]) >= goal
    identity_ok = all(c["passed"] for c in report["identity"])
    ok = identity_ok and target_ok
    report.update(
        verdict="PASS" if ok else "FAIL",
        identity_passed=identity_ok,
        target_passed=target_ok,
        limits=dict(CUDA_LIMIT),
        pinned_limits=dict(PINNED_OF),
        wall_s=round(time.monotonic() - t0, 1),
    )
    return _finish(out_dir, report, EXIT_PASS if ok else EXIT_FAIL)


if __name__ == "__main__":
    sys.exit(run_check(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("gpu-check")))
