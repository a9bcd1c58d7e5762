"""The environment recorded with each run, and GPU power/utilization sampling.

CPU model and usable cores, Python, torch, platform, the lmckv git commit and the lmcache
version; through nvidia-ml-py (``pynvml``) the GPU's name, driver, memory and current SM and
memory clocks. ``GpuSampler`` polls power and utilization on a thread while CUDA
benchmarks run and returns ``telemetry`` records.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from conformance.core.resources import checkout_root

#: The lmckv source checkout (None when lmckv runs from an installed wheel).
REPO_ROOT = checkout_root()


def cpu_model() -> str:
    """``model name`` from /proc/cpuinfo, else ``platform.processor()``, else "unknown"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_count() -> int:
    """Cores this process may run on (its affinity mask), else ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def git_commit(repo: Path | None = REPO_ROOT) -> str | None:
    """HEAD's full hash for the lmckv checkout, or None outside git / before a commit /
    for an installed wheel."""
    if repo is None:
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--verify", "-q", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


def package_version(name: str) -> str | None:
    """The installed distribution's version, or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _nvml() -> Any | None:
    """The initialized pynvml module, or None when it or the driver is missing."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver, no device: all mean "no GPU facts"
        return None
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_info(index: int = 0) -> dict[str, Any] | None:
    """Name, driver, total memory and current SM/memory clocks of GPU ``index`` via NVML."""
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        return {
            "name": _text(nvml.nvmlDeviceGetName(handle)),
            "driver": _text(nvml.nvmlSystemGetDriverVersion()),
            "memory_total_bytes": int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
            "sm_clock_mhz": int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            "mem_clock_mhz": int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
        }
    except Exception:  # a device NVML cannot describe is reported as absent
        return None


def collect_env() -> dict[str, Any]:
    """The header's ``env`` object (bench/RESULTS.md), plus torch's thread count and CUDA."""
    return {
        "cpu_model": cpu_model(),
        "cpu_count": cpu_count(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
        "git_commit": git_commit(),
        "lmcache": package_version("lmcache"),
        "gpu": gpu_info(),
        "torch_threads": torch.get_num_threads(),
        "cuda_runtime": torch.version.cuda,
    }


class GpuSampler:
    """Samples GPU power (W) and utilization (%) every ``interval_s`` on a daemon thread.

    ``start()`` then ``stop()`` returns ``telemetry`` records with ``t_s`` measured from
    ``t0`` (the run's start on ``time.monotonic``). Without NVML it samples nothing.
    """

    def __init__(self, t0: float, interval_s: float = 0.1, index: int = 0) -> None:
        self._t0 = t0
        self._interval = interval_s
        self._index = index
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.records: list[dict[str, Any]] = []

    def start(self) -> None:
        """Begin sampling (no-op without NVML)."""
        nvml = _nvml()
        if nvml is None:
            return
        handle = nvml.nvmlDeviceGetHandleByIndex(self._index)

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    power_w = nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
                    util = nvml.nvmlDeviceGetUtilizationRates(handle).gpu
                except Exception:  # a failed read ends sampling, never the run
                    return
                self.records.append(
                    {
                        "kind": "telemetry",
                        "t_s": round(time.monotonic() - self._t0, 3),
                        "power_w": float(power_w),
                        "util_pct": float(util),
                    }
                )
                self._stop.wait(self._interval)

        self._thread = threading.Thread(target=loop, name="lmckv-gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> list[dict[str, Any]]:
        """Stop sampling and return the telemetry records taken."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return self.records
