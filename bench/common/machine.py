"""The machine record of a run, and the ``machine_id`` every record of the run carries.

Two results files can only be compared when they come from one machine; the record says
which machine that was, beyond the software ``env``:

- ``host_id``: SHA-256 of ``/etc/machine-id`` (else of ``/var/lib/dbus/machine-id``, else
  of the host name), first 16 hex digits: identifies the host without publishing the id;
- CPU model, the cores this process may use and the host's logical CPUs, the cpufreq
  governor of CPU 0 where readable, and RAM (psutil's total, Linux's ``MemTotal``);
- the GPU torch uses (``bench.common.nvml.gpu_record``: found in NVML by torch's device UUID,
  never by index), or null.

``machine_id`` is the first 16 hex digits of the SHA-256 of the record's canonical JSON
without volatile fields (clocks, temperatures, the governor may change between runs and do
not make another machine): host, CPU model and counts, RAM, and the GPU's UUID, name,
driver, MIG mode and power limit.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Any

import psutil

from .env import cpu_count, cpu_model
from .nvml import gpu_record

MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
GOVERNOR_FILE = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
#: GPU fields that identify the device and its configuration (the rest are measurements).
GPU_IDENTITY = ("uuid", "name", "driver", "mig_mode", "power_limit_w")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def host_id(files: tuple[Path, ...] = MACHINE_ID_FILES) -> str:
    """A stable, non-reversible id of this host (see the module docstring)."""
    for path in files:
        try:
            text = path.read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text:
            return _digest(text)
    return _digest("hostname:" + socket.gethostname())


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def ram_bytes() -> int | None:
    """Total RAM, bytes: psutil's ``virtual_memory().total`` (Linux's ``MemTotal``), or None
    where unreadable."""
    try:
        return int(psutil.virtual_memory().total)
    except (OSError, RuntimeError):
        return None


def machine_record(device_index: int | None = None) -> dict[str, Any]:
    """The header's ``machine`` object; ``device_index`` is torch's CUDA device (None: the
    current one when CUDA is usable, else no GPU)."""
    return {
        "host_id": host_id(),
        "cpu_model": cpu_model(),
        "cpu_usable": cpu_count(),
        "cpu_logical": os.cpu_count(),
        "governor": _read(GOVERNOR_FILE),
        "ram_bytes": ram_bytes(),
        "gpu": gpu_record(device_index),
    }


def machine_id(record: dict[str, Any]) -> str:
    """The short id of a machine record (its identifying fields only)."""
    gpu = record.get("gpu")
    identity = {
        "host_id": record["host_id"],
        "cpu_model": record["cpu_model"],
        "cpu_logical": record["cpu_logical"],
        "ram_bytes": record["ram_bytes"],
        "gpu": None if gpu is None else {k: gpu.get(k) for k in GPU_IDENTITY},
    }
    return _digest(json.dumps(identity, sort_keys=True))
