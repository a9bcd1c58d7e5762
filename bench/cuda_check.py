"""One short GPU check (< 3 minutes on one H200): CUDA correctness and the CUDA target.

Run where a GPU is lent, from the repository root::

    python3 -m lmckv bench cuda-check --out DIR

1. Encode on CUDA gives the same bytes as encode on CPU, for float16/bfloat16, every scope
   (EXTERNAL both with FP8 V given and with static scales given), on V with quiet and loud
   pages, an all-zero head, values beyond e4m3's range and float16 subnormals.
2. Decode to CUDA (FP8 kept and dequantized) gives bit-identical tensors to decode on CPU.
3. Throughput on CUDA (``bench.throughput``, CUDA events) with GPU telemetry, written as a
   normal results file in DIR; target: reference ``quantize`` >= 0.5x device-to-device copy
   on the largest case (1 GiB of K+V, bandwidth-bound), reported for every case.

Writes ``DIR/cuda-check.json`` and prints PASS/FAIL per check and overall. Exit code 0 on
PASS, 1 on FAIL, 3 when no CUDA device is usable (SKIP, with the reason).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from bench.env import GpuSampler, collect_env
from bench.impls import STATIC_SCALE, CodecImpl, load_impls, static_fp8
from bench.results import SCOPES, ResultsWriter, load
from bench.targets import TARGETS
from bench.throughput import CASES, DTYPES, ThroughputPlan, cuda_skip_reason, run_throughput

PAGES, PAGE_SIZE, HEADS, HEAD_DIM = 64, 16, 8, 128


def _tricky_v(dtype: torch.dtype, gen: torch.Generator, pages: int) -> torch.Tensor:
    """V with pages 1e-4..1e3 apart, one all-zero head, saturating and subnormal values."""
    v = torch.randn((pages, PAGE_SIZE, HEADS, HEAD_DIM), generator=gen)
    v *= torch.logspace(-4, 3, pages).view(pages, 1, 1, 1)
    v[:, :, 3] = 0.0
    v[5, 2, 1, :8] = torch.tensor([1e4, -1e4, 600.0, -600.0, 6e-8, -6e-8, 0.0, -0.0])
    return v.to(dtype)


def _encode_variants(scope: str) -> list[tuple[str, dict[str, Any]]]:
    if scope != "EXTERNAL":
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
    if scope == "EXTERNAL":
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


def _plans(full: bool) -> list[ThroughputPlan]:
    base = ThroughputPlan(
        cpu_cases=(),
        cuda_cases=(CASES["chunk256-7b"], CASES["64MiB"]),
        rounds=15 if full else 7,
        warmup=2,
        min_sample_s=0.01,
        devices=("cuda",),
    )
    big = replace(base, cuda_cases=(CASES["1GiB"],), cuda_ops=("quantize",))
    return [base, big]


def run_check(out_dir: Path, *, quick: bool = True) -> int:
    """Run the check; writes ``out_dir/cuda-check.json``; returns the exit code."""
    t0 = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"env": collect_env(), "torch_cuda": torch.version.cuda}
    reason = cuda_skip_reason()
    impls, missing = load_impls()
    if reason is None and "reference" not in impls:
        reason = missing["reference"]
    if reason is not None:
        report.update(verdict="SKIP", reason=reason)
        (out_dir / "cuda-check.json").write_text(json.dumps(report, indent=1))
        print(f"SKIP: {reason}")
        return 3
    ref = impls["reference"]
    checks = correctness(ref)
    report["correctness"] = checks
    for c in checks:
        status = "PASS" if c["passed"] else "FAIL"
        print(f"{status} correctness {c['dtype']:8} {c['scope']:16} " + json.dumps(c))
    sampler = GpuSampler(t0)
    sampler.start()
    with ResultsWriter(out_dir, mode="full" if not quick else "quick", env=report["env"]) as out:
        for plan in _plans(not quick):
            out.write_all(run_throughput(plan, impls))
        out.write_all(sampler.stop())
        results_path = out.path
    report["results_file"] = results_path.name
    _, records = load(results_path)
    quant_rows = [
        r
        for r in records
        if r["kind"] == "throughput" and r["op"] == "quantize" and r["impl"] == "reference"
    ]
    by_case: dict[str, list[float]] = {}
    for r in quant_rows:
        by_case.setdefault(r["case"], []).append(r["ratio_to_limit"] or 0.0)
    goal = TARGETS["cuda_quantize_vs_d2d"]
    report["quantize_vs_d2d"] = {
        case: {"worst": min(v), "best": max(v), "rows": len(v)} for case, v in by_case.items()
    }
    for case, stats in report["quantize_vs_d2d"].items():
        print(
            f"quantize/d2d {case:12} worst {stats['worst']:.3f} best {stats['best']:.3f} "
            f"(goal {goal})"
        )
    largest = "1GiB"
    target_ok = largest in by_case and min(by_case[largest]) >= goal
    print(f"{'PASS' if target_ok else 'FAIL'} cuda target: quantize >= {goal} x d2d on {largest}")
    ok = all(c["passed"] for c in checks) and target_ok
    report.update(
        verdict="PASS" if ok else "FAIL",
        correctness_passed=all(c["passed"] for c in checks),
        target_passed=target_ok,
        wall_s=round(time.monotonic() - t0, 1),
    )
    (out_dir / "cuda-check.json").write_text(json.dumps(report, indent=1))
    print(f"{report['verdict']}: cuda-check ({report['wall_s']} s), details in {out_dir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_check(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("cuda-check")))
