"""The software environment recorded with each run.

CPU model and usable cores, Python, torch, platform, the lmckv git commit and the lmcache
version, and the short form of the GPU (name, driver, memory) from the machine record
(``bench.common.machine``, where the GPU is found by torch's device UUID).

Process and machine figures come from psutil (the usable cores: this process's CPU
affinity). psutil does not give the CPU's model name, so that one alone is still read from
Linux's ``/proc/cpuinfo`` (its ``model name`` line), else ``platform.processor()``.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import torch

from lmckv.base.lmcache_release import installed_version
from lmckv.base.resources import checkout_root

#: The lmckv source checkout (None when lmckv runs from an installed wheel).
REPO_ROOT = checkout_root()


def cpu_model() -> str:
    """``model name`` from /proc/cpuinfo (psutil has no model name), else
    ``platform.processor()``, else "unknown"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_count() -> int:
    """Cores this process may run on (its affinity, psutil's ``Process().cpu_affinity()``),
    else the logical CPUs (where affinity is unknown: macOS), else 1."""
    try:
        return len(psutil.Process().cpu_affinity()) or psutil.cpu_count() or 1
    except (AttributeError, psutil.Error, OSError):  # AttributeError: no affinity here
        return psutil.cpu_count() or 1


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


def collect_env(gpu: dict[str, Any] | None = None) -> dict[str, Any]:
    """The header's ``env`` object (bench/RESULTS.md), plus torch's thread count and CUDA;
    ``gpu`` is the machine record's GPU (``bench.common.machine``), shortened here."""
    return {
        "cpu_model": cpu_model(),
        "cpu_count": cpu_count(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
        "git_commit": git_commit(),
        "lmcache": installed_version(),
        "gpu": None
        if gpu is None
        else {k: gpu[k] for k in ("name", "driver", "memory_total_bytes", "uuid")},
        "torch_threads": torch.get_num_threads(),
        "cuda_runtime": torch.version.cuda,
    }
