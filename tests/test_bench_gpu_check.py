"""gpu-check and the CUDA measurement without a device: the checks' CPU dry run, the clean
skip, L2 flush size, peak bandwidth, limit pairing, rows built from fake CUDA timings
(schema-valid), and NVML found by UUID through a fake pynvml."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from lmckv.bench.bench_command import main
from lmckv.bench.common.impls import load_impls
from lmckv.bench.common.machine import machine_id, machine_record
from lmckv.bench.common.nvml import RowSampler, TorchDevice, gpu_record, nvml_uuid
from lmckv.bench.common.rows import LIMIT_IMPLS, validate_record
from lmckv.bench.gpu.check import correctness, d2d_check, pairs, summary_markdown
from lmckv.bench.throughput.cuda_limits import (
    CUDA_LIMIT,
    LAUNCH_BOUND_S,
    PINNED_OF,
    cuda_limits,
    flush_bytes,
    nvml_peak,
    peak_bandwidth,
    spec_peak,
)
from lmckv.bench.throughput.measure import CUDA_OPS, rows


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():  # type: ignore[no-untyped-def]
    """One intra-op thread, as benchmark runs use: several stall on a busy shared machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_correctness_checks_dry_run_on_cpu() -> None:
    impls, missing = load_impls(("reference",))
    if "reference" not in impls:
        pytest.skip(f"reference codec not importable: {missing['reference']}")
    results = correctness(impls["reference"], device="cpu", pages=8)
    assert len(results) == 2 * 5  # two dtypes x (3 scopes + EXTERNAL two ways)
    assert all(r["passed"] and "error" not in r for r in results), results


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: no SKIP to check")
def test_gpu_check_skips_with_a_reason_without_cuda(tmp_path: Path) -> None:
    assert main(["gpu-check", "--out", str(tmp_path)]) == 3
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    assert report["verdict"] == "SKIP" and report["reason"]
    assert report["reason"] in (tmp_path / "gpu-check.md").read_text()


def test_l2_flush_and_peak_bandwidth() -> None:
    h200_l2 = 60 * 2**20
    assert flush_bytes(h200_l2) == 120 * 2**20 and flush_bytes(0) == 2**20
    assert spec_peak("NVIDIA H200") == 4.8e12
    assert spec_peak("NVIDIA H100 80GB HBM3") == 3.35e12
    assert spec_peak("NVIDIA H100 PCIe") == 2.0e12
    assert spec_peak("NVIDIA GeForce RTX 9999") is None
    assert nvml_peak(3201, 6144) == pytest.approx(4.917e12, rel=1e-3)
    assert nvml_peak(None, 6144) is None
    assert peak_bandwidth({"name": "NVIDIA H200"}) == (4.8e12, "spec table")
    other = {"name": "X", "mem_clock_max_mhz": 1000, "memory_bus_bits": 512}
    assert peak_bandwidth(other) == (1.28e11, "NVML max memory clock x bus width")
    assert peak_bandwidth({"name": "X"}) == (None, "unknown")


def test_d2d_harness_check_counts_read_and_write() -> None:
    gib = 2**30
    ok = d2d_check(2 * gib / 4.2e12, gib, 4.8e12)  # 4.2 TB/s moved: 0.875 of peak
    assert ok["passed"] and ok["fraction_of_peak"] == pytest.approx(0.875)
    assert not d2d_check(2 * gib / 3.0e12, gib, 4.8e12)["passed"]
    assert not d2d_check(1.0, gib, None)["passed"]  # no peak known: cannot vouch for it


def test_each_cuda_op_is_paired_with_what_it_moves() -> None:
    assert set(CUDA_LIMIT) == set(CUDA_OPS)
    assert CUDA_LIMIT == {
        "quantize": "d2d",
        "encode": "d2h_pageable",
        "decode_fp8": "h2d_pageable",
        "decode_dequant": "h2d_pageable",
    }
    made = {lim.impl for lim in cuda_limits(torch, [], list)}  # buffers are made in setup
    assert made >= set(CUDA_LIMIT.values()) | set(PINNED_OF.values()) | {"crc32"}
    assert made <= set(LIMIT_IMPLS)


def _fake_group(process: int, throttled: bool) -> dict[str, Any]:
    """One process's results for a CUDA group, with fake timings."""
    times = {
        ("quantize", "reference", "PER_TENSOR"): 2e-4,
        ("encode", "reference", "PER_TENSOR"): 8e-3,
        ("decode_fp8", "reference", "PER_TENSOR"): 6e-3,
        ("copy", "d2d", None): 1e-4,
        ("copy", "d2h_pinned", None): 2e-3,
        ("copy", "d2h_pageable", None): 4e-3,
        ("copy", "h2d_pinned", None): 2e-3,
        ("copy", "h2d_pageable", None): 4e-3,
        ("crc32", "crc32", None): 1e-3,
        ("encode", "reference", "EXTERNAL"): 1e-5,
    }
    telemetry = {"samples": 3, "throttled": throttled, "clock_event_reasons": []}
    return {
        "group": "cuda/64MiB/float16",
        "device": "cuda",
        "case": "64MiB",
        "dtype": "float16",
        "process": process,
        "started_utc": f"2026-01-01T00:00:0{process}.000+00:00",
        "ended_utc": f"2026-01-01T00:00:0{process + 1}.000+00:00",
        "telemetry": telemetry,
        "telemetry_records": [],
        "items": [
            {
                "key": list(key),
                "bytes": 1 << 26,
                "number": 1,
                "samples": [t, t * 1.01, t * 0.99],
                "error": None,
            }
            for key, t in times.items()
        ],
    }


def test_cuda_rows_from_fake_timings_are_schema_valid_and_paired() -> None:
    results = [_fake_group(p, throttled=(p == 2)) for p in range(3)]
    out = {(r["op"], r["impl"], r["scope"]): r for r in rows(results)}
    for row in out.values():
        validate_record({**row, "machine_id": "0123456789abcdef"})
        assert row["processes"] == 3 and row["rounds"] == 9 and row["throttled"]
    enc = out[("encode", "reference", "PER_TENSOR")]
    assert (enc["limit"], enc["limit_pinned"]) == ("d2h_pageable", "d2h_pinned")
    assert enc["ratio_to_limit"] == pytest.approx(0.5) and enc["ratio_to_pinned"] == 0.25
    assert enc["crc_share"] == pytest.approx(1e-3 / 8e-3) and not enc["launch_bound"]
    dec = out[("decode_fp8", "reference", "PER_TENSOR")]
    assert (dec["limit"], dec["limit_pinned"]) == ("h2d_pageable", "h2d_pinned")
    quant = out[("quantize", "reference", "PER_TENSOR")]
    assert (quant["limit"], quant["limit_pinned"], quant["crc_share"]) == ("d2d", None, None)
    assert quant["ratio_to_limit"] == pytest.approx(0.5)
    assert out[("encode", "reference", "EXTERNAL")]["launch_bound"]  # 10 us < LAUNCH_BOUND_S
    assert LAUNCH_BOUND_S > 1e-5
    paired = pairs(list(out.values()))
    assert {p["op"]: p["limit"] for p in paired} == {
        "quantize": "d2d",
        "encode": "d2h_pageable",
        "decode_fp8": "h2d_pageable",
    }


class FakeNvml(SimpleNamespace):
    """The pynvml calls bench.common.nvml makes; by-index lookup is an error (never used)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 2, 0

    def __init__(self, uuids: dict[str, str], reasons: int = 0) -> None:
        super().__init__()
        self.uuids, self.reasons, self.looked_up = uuids, reasons, []

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        raise AssertionError("NVML must be searched by UUID, not index")

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        self.looked_up.append(uuid)
        if uuid not in self.uuids:
            raise LookupError(f"NVML_ERROR_NOT_FOUND {uuid}")
        return self.uuids[uuid]

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"580.159.04"

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: str) -> int:
        return 700_000

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: str) -> int:
        return 5

    nvmlDeviceGetMaxPcieLinkGeneration = nvmlDeviceGetCurrPcieLinkGeneration

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: str) -> int:
        return 16

    nvmlDeviceGetMaxPcieLinkWidth = nvmlDeviceGetCurrPcieLinkWidth

    def nvmlDeviceGetMigMode(self, handle: str) -> tuple[int, int]:
        return (0, 0)

    def nvmlDeviceGetMemoryBusWidth(self, handle: str) -> int:
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    def nvmlDeviceGetMaxClockInfo(self, handle: str, clock: int) -> int:
        return 3201 if clock == self.NVML_CLOCK_MEM else 1980

    def nvmlDeviceGetClockInfo(self, handle: str, clock: int) -> int:
        return 1755

    def nvmlDeviceGetTemperature(self, handle: str, sensor: int) -> int:
        return 61

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        return 512_000

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> Any:
        return SimpleNamespace(gpu=99)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:
        return self.reasons


H200 = TorchDevice(
    index=1,
    uuid=nvml_uuid("32854893-e264-f552-d51e-1c550b01fd02"),
    name="NVIDIA H200",
    sm_count=132,
    l2_bytes=60 * 2**20,
    memory_bytes=150_754_820_096,
    capability="9.0",
)


def test_nvml_is_found_by_torch_uuid() -> None:
    assert nvml_uuid("abc") == "GPU-abc" and nvml_uuid("MIG-abc") == "MIG-abc"
    nvml = FakeNvml({"GPU-aaaa": "other", H200.uuid: "h200"})
    record = gpu_record(device=H200, nvml=nvml)
    assert record is not None and nvml.looked_up == [H200.uuid]
    assert record["torch_index"] == 1 and record["sm_count"] == 132
    assert record["driver"] == "580.159.04" and record["power_limit_w"] == 700.0
    assert (record["pcie_gen"], record["pcie_width"], record["mig_mode"]) == (5, 16, False)
    assert record["memory_bus_bits"] is None  # not supported: unknown, not fatal
    missing = gpu_record(device=H200, nvml=FakeNvml({}))
    assert missing is not None and missing["driver"] is None
    assert "NOT_FOUND" in missing["nvml_error"]
    machine = {**machine_record(), "gpu": record}
    validate_record(
        {
            "kind": "header",
            "schema_version": 2,
            "run_id": "bench-x",
            "mode": "quick",
            "started_utc": "2026-01-01T00:00:00+00:00",
            "env": {
                "cpu_model": "x",
                "cpu_count": 1,
                "python": "3",
                "torch": "2",
                "platform": "p",
                "git_commit": None,
                "lmcache": None,
                "gpu": {k: record[k] for k in ("name", "driver", "memory_total_bytes")},
            },
            "machine": machine,
            "machine_id": machine_id(machine),
        }
    )
    assert machine_id(machine) != machine_id({**machine, "gpu": {**record, "uuid": "GPU-b"}})


def test_row_sampler_flags_throttling() -> None:
    nvml = FakeNvml({H200.uuid: "h200"}, reasons=0x4 | 0x1)  # sw power cap, idle
    with RowSampler(nvml, "h200", interval_s=0.001) as sampler:
        pass
    summary = sampler.summary()
    assert summary is not None and summary["throttled"]
    assert summary["clock_event_reasons"] == ["gpu_idle", "sw_power_cap"]
    assert summary["sm_clock_mhz_median"] == 1755 and summary["temp_c_max"] == 61
    for record in sampler.records("cuda/64MiB/float16", 0):
        validate_record({**record, "machine_id": "0123456789abcdef"})
    with RowSampler(FakeNvml({}, reasons=0x1), "h200", interval_s=0.001) as idle:
        pass
    assert idle.summary() is not None and not idle.summary()["throttled"]  # type: ignore[index]
    with RowSampler(None, None) as nothing:
        pass
    assert nothing.summary() is None


def test_summary_markdown_of_a_fake_check() -> None:
    fake_rows = list(rows([_fake_group(p, throttled=False) for p in range(3)]))
    machine = {**machine_record(), "gpu": gpu_record(device=H200, nvml=FakeNvml({H200.uuid: "h"}))}
    report = {
        "verdict": "PASS",
        "machine": machine,
        "machine_id": machine_id(machine),
        "peak_source": "spec table",
        "d2d": d2d_check(2 * 2**30 / 4.2e12, 2**30, 4.8e12),
        "identity": [{"dtype": "float16", "scope": "PER_TENSOR", "passed": True}],
        "quantize_vs_d2d": {"64MiB": {"worst": 0.5, "best": 0.5, "rows": 1}},
        "pairs": pairs(fake_rows),
        "wall_s": 1.0,
    }
    text = summary_markdown(report)
    assert text.startswith("# gpu-check: PASS") and "1/1 dtype x scope pass" in text
    assert "| encode | 64MiB | float16 | PER_TENSOR |" in text and "d2h_pageable" in text
    assert "(launch-bound)" in text  # the 10 us EXTERNAL encode
