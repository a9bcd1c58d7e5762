"""The GPU through NVML (nvidia-ml-py), found by torch's device UUID, and its telemetry.

NVML numbers devices in PCI order unless told otherwise, CUDA by speed unless
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and ``CUDA_VISIBLE_DEVICES`` renumbers CUDA's devices
only, so NVML's index 0 is often not torch's device 0. The device is therefore looked up
with ``nvmlDeviceGetHandleByUUID`` on the UUID torch reports
(``torch.cuda.get_device_properties(i).uuid``; NVML spells it ``GPU-<uuid>``, a MIG
instance ``MIG-<uuid>``).

``gpu_record`` describes the device for the machine record (``bench.common.machine``);
``RowSampler`` samples SM clock, temperature, power and clock-event ("throttle") reasons on
a thread while one group of benchmarks runs, and summarizes them for the rows of that group.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from statistics import median
from typing import Any

#: NVML clock event reason bits (nvml.h, ``nvmlClocksEventReason*``).
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
#: Reasons that lower the clock below what the workload asked for: a row measured while
#: one of them was active is flagged ``throttled``.
THROTTLING = frozenset(
    {
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    }
)


def load_nvml() -> Any | None:
    """The initialized ``pynvml`` module, or None when it or the driver is missing."""
    try:
        nvml = importlib.import_module("pynvml")
        nvml.nvmlInit()
    except Exception:  # no library, no driver, no device: all mean "no NVML facts"
        return None
    return nvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_uuid(torch_uuid: str) -> str:
    """NVML's spelling of a UUID torch reports (``GPU-`` prefixed unless already tagged)."""
    text = torch_uuid.strip()
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


@dataclass(frozen=True)
class TorchDevice:
    """What torch says of one CUDA device."""

    index: int
    uuid: str
    name: str
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    capability: str


def torch_device(index: int | None = None) -> TorchDevice | None:
    """torch's CUDA device ``index`` (default: the current one), or None without CUDA."""
    import torch

    if torch.version.cuda is None or not torch.cuda.is_available():
        return None
    i = torch.cuda.current_device() if index is None else index
    p = torch.cuda.get_device_properties(i)
    return TorchDevice(
        index=i,
        uuid=nvml_uuid(str(p.uuid)),
        name=str(p.name),
        sm_count=int(p.multi_processor_count),
        l2_bytes=int(p.L2_cache_size),
        memory_bytes=int(p.total_memory),
        capability=f"{p.major}.{p.minor}",
    )


def find_handle(nvml: Any, uuid: str) -> Any:
    """NVML's handle of the device with this UUID (raises NVML's error when absent)."""
    return nvml.nvmlDeviceGetHandleByUUID(uuid)


def _safe(read: Callable[[], Any]) -> Any:
    """One NVML query's value, or None where the device or driver does not support it."""
    try:
        return read()
    except Exception:  # NVMLError_NotSupported and kin: the field is unknown, not fatal
        return None


def nvml_facts(nvml: Any, handle: Any) -> dict[str, Any]:
    """Driver, power limit, PCIe link, MIG mode, memory bus and clocks of one device."""
    mig = _safe(lambda: nvml.nvmlDeviceGetMigMode(handle))
    power = _safe(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
    return {
        "driver": _safe(lambda: _text(nvml.nvmlSystemGetDriverVersion())),
        "power_limit_w": None if power is None else power / 1000.0,
        "pcie_gen": _safe(lambda: int(nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle))),
        "pcie_width": _safe(lambda: int(nvml.nvmlDeviceGetCurrPcieLinkWidth(handle))),
        "pcie_gen_max": _safe(lambda: int(nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle))),
        "pcie_width_max": _safe(lambda: int(nvml.nvmlDeviceGetMaxPcieLinkWidth(handle))),
        "mig_mode": None if mig is None else bool(mig[0]),
        "memory_bus_bits": _safe(lambda: int(nvml.nvmlDeviceGetMemoryBusWidth(handle))),
        "mem_clock_max_mhz": _safe(
            lambda: int(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM))
        ),
        "sm_clock_max_mhz": _safe(
            lambda: int(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))
        ),
    }


def gpu_record(
    index: int | None = None,
    *,
    device: TorchDevice | None = None,
    nvml: Any | None = None,
) -> dict[str, Any] | None:
    """The machine record's ``gpu``: torch's facts, and NVML's for the same UUID (null
    fields, and ``nvml_error``, where NVML is missing or does not know the UUID)."""
    device = device or torch_device(index)
    if device is None:
        return None
    record: dict[str, Any] = {
        "torch_index": device.index,
        "uuid": device.uuid,
        "name": device.name,
        "capability": device.capability,
        "sm_count": device.sm_count,
        "l2_bytes": device.l2_bytes,
        "memory_total_bytes": device.memory_bytes,
    }
    nvml = nvml or load_nvml()
    facts: dict[str, Any] = dict.fromkeys(nvml_facts_fields())
    if nvml is None:
        record["nvml_error"] = "pynvml not importable or NVML not initialized"
    else:
        try:
            facts = nvml_facts(nvml, find_handle(nvml, device.uuid))
        except Exception as exc:  # the UUID unknown to NVML: say so, keep torch's facts
            record["nvml_error"] = f"{type(exc).__name__}: {exc}"
    return {**record, **facts}


def nvml_facts_fields() -> tuple[str, ...]:
    """The keys ``nvml_facts`` returns."""
    return (
        "driver",
        "power_limit_w",
        "pcie_gen",
        "pcie_width",
        "pcie_gen_max",
        "pcie_width_max",
        "mig_mode",
        "memory_bus_bits",
        "mem_clock_max_mhz",
        "sm_clock_max_mhz",
    )


def reasons(mask: int) -> list[str]:
    """The names of the clock event reason bits set in ``mask``."""
    return [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]


class RowSampler:
    """Samples one device every ``interval_s`` on a daemon thread while a group runs.

    ``with RowSampler(nvml, handle): ...``; then ``summary()`` gives the ``telemetry`` object
    the group's rows carry: SM clock (min/median/max MHz), temperature (max C), power
    (median W), the clock event reasons seen, the sample count, and ``throttled`` (a
    THROTTLING reason seen); ``records()`` gives every sample as a ``telemetry`` record.
    Without NVML (``nvml`` None) it samples nothing.
    """

    def __init__(self, nvml: Any | None, handle: Any, interval_s: float = 0.05) -> None:
        self._nvml = nvml
        self._handle = handle
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()
        self.samples: list[dict[str, Any]] = []

    def _read(self) -> dict[str, Any]:
        nvml: Any = self._nvml
        h = self._handle
        event_reasons = getattr(
            nvml,
            "nvmlDeviceGetCurrentClocksEventReasons",
            getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None),
        )
        mask = _safe(lambda: int(event_reasons(h))) if event_reasons else None
        return {
            "t_s": round(time.monotonic() - self._t0, 3),
            "power_w": _safe(lambda: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0),
            "util_pct": _safe(lambda: float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)),
            "sm_clock_mhz": _safe(
                lambda: float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))
            ),
            "temp_c": _safe(
                lambda: float(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))
            ),
            "clock_event_reasons": reasons(mask or 0),
        }

    def _loop(self) -> None:
        while True:
            self.samples.append(self._read())
            if self._stop.wait(self._interval):
                return

    def __enter__(self) -> RowSampler:
        self._t0 = time.monotonic()
        if self._nvml is not None:
            self._thread = threading.Thread(target=self._loop, name="lmckv-nvml", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self.samples.append(self._read())  # at least one sample after the work

    def summary(self) -> dict[str, Any] | None:
        """The rows' ``telemetry`` object, or None when nothing was sampled."""
        if not self.samples:
            return None

        def values(name: str) -> list[float]:
            return [s[name] for s in self.samples if s[name] is not None]

        sm, temp, power = values("sm_clock_mhz"), values("temp_c"), values("power_w")
        seen = sorted({r for s in self.samples for r in s["clock_event_reasons"]})
        return {
            "samples": len(self.samples),
            "sm_clock_mhz_min": min(sm) if sm else None,
            "sm_clock_mhz_median": median(sm) if sm else None,
            "sm_clock_mhz_max": max(sm) if sm else None,
            "temp_c_max": max(temp) if temp else None,
            "power_w_median": median(power) if power else None,
            "clock_event_reasons": seen,
            "throttled": bool(THROTTLING.intersection(seen)),
        }

    def records(self, group: str, process: int) -> list[dict[str, Any]]:
        """Every sample as a ``telemetry`` record (power and utilization 0 where unread)."""
        return [
            {
                "kind": "telemetry",
                **s,
                "power_w": s["power_w"] or 0.0,
                "util_pct": s["util_pct"] or 0.0,
                "group": group,
                "process": process,
            }
            for s in self.samples
        ]
