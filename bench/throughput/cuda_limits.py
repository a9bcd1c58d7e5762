"""CUDA limits: what each CUDA operation really moves, timed on the same bytes, and the
method that keeps the comparison fair (cold L2, launch-bound labels, the device's peak).

Each CUDA operation is compared with the copy of the bytes it really moves:

- ``quantize`` (reads V, writes FP8 V and scales, on the device): limit ``d2d`` (copy V);
- ``encode`` (quantize, then ``to_bytes``: the blob into *pageable* host memory and a CRC
  on the host): limit ``d2h_pageable``, drawn beside ``d2h_pinned`` (``limit_pinned``);
- ``decode_*`` (CRC on the host, then the blob from a host ``bytearray``, pageable, to the
  device): limit ``h2d_pageable``, drawn beside ``h2d_pinned``.

The copies move the blob bytes (reference, PER_TENSOR) per layer, one copy per blob, into
or from buffers allocated before timing; pinned copies are ``non_blocking``, pageable ones
are synchronous (as CUDA makes any pageable copy). The host CRC-32 over the same blobs is
its own row (``crc32``, host clock) so the CRC's share of ``encode``/``decode_*`` is seen
apart (``crc_share`` on those rows).

L2: every CUDA sample is one call after a write of ``flush_bytes(L2)`` = 2x the device's L2
(``torch.cuda.get_device_properties(i).L2_cache_size``), outside the timed events, so no
operation or limit reads its input from L2 (a 16 MiB d2d copy would otherwise run inside an
H200's 60 MiB L2 while ``quantize``'s larger traffic would not). A row whose median is below
``LAUNCH_BOUND_S`` is labelled ``launch_bound``: its time is kernel launches and Python,
not bytes.

Peak memory bandwidth: the vendor's figure by device name (``SPEC_PEAK_BPS``), else NVML's
maximum memory clock x bus width x 2 (double data rate) / 8.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The limit each CUDA operation is divided by (what it really moves).
CUDA_LIMIT = {
    "quantize": "d2d",
    "encode": "d2h_pageable",
    "decode_fp8": "h2d_pageable",
    "decode_dequant": "h2d_pageable",
}
#: The pinned-memory copy drawn beside a pageable limit (the transfer at its best).
PINNED_OF = {"d2h_pageable": "d2h_pinned", "h2d_pageable": "h2d_pinned"}
#: Rows faster than this are launch-bound (a few kernel launches of ~5 us and Python).
LAUNCH_BOUND_S = 50e-6
#: Vendor peak memory bandwidth, bytes/s, by a substring of the device name (longest wins).
SPEC_PEAK_BPS = {
    "H200": 4.8e12,
    "H100 NVL": 3.9e12,
    "H100 PCIe": 2.0e12,
    "H100": 3.35e12,
    "GH200": 4.0e12,
    "B200": 8.0e12,
    "A100-SXM4-80GB": 2.039e12,
    "A100 80GB PCIe": 1.935e12,
    "A100": 1.555e12,
    "L40S": 0.864e12,
    "L4": 0.3e12,
}


def flush_bytes(l2_bytes: int) -> int:
    """Bytes written before each sample to evict L2: twice its size (at least 1 MiB)."""
    return max(2 * int(l2_bytes), 1 << 20)


def spec_peak(name: str) -> float | None:
    """The vendor peak bandwidth of a device name, or None when the table lacks it."""
    matches = [key for key in SPEC_PEAK_BPS if key in name]
    return SPEC_PEAK_BPS[max(matches, key=len)] if matches else None


def nvml_peak(mem_clock_max_mhz: int | None, bus_bits: int | None) -> float | None:
    """Peak bandwidth from NVML's max memory clock and bus width (double data rate)."""
    if not mem_clock_max_mhz or not bus_bits:
        return None
    return mem_clock_max_mhz * 1e6 * 2 * bus_bits / 8


def peak_bandwidth(gpu: dict[str, Any]) -> tuple[float | None, str]:
    """(peak bytes/s, where it came from) for a machine record's ``gpu``."""
    spec = spec_peak(str(gpu.get("name", "")))
    if spec is not None:
        return spec, "spec table"
    computed = nvml_peak(gpu.get("mem_clock_max_mhz"), gpu.get("memory_bus_bits"))
    if computed is not None:
        return computed, "NVML max memory clock x bus width"
    return None, "unknown"


class L2Flush:
    """Writes a device buffer of ``flush_bytes(l2_bytes)`` (call it before each sample)."""

    def __init__(self, torch_module: Any, l2_bytes: int, device: str = "cuda") -> None:
        self.nbytes = flush_bytes(l2_bytes)
        self._buf = torch_module.empty(self.nbytes, dtype=torch_module.uint8, device=device)
        self._value = 0

    def __call__(self) -> None:
        self._value ^= 1
        self._buf.fill_(self._value)


@dataclass
class Limit:
    """One limit benchmark: key (op, impl), callable, its bytes, setup, host-timed or not."""

    op: str
    impl: str
    fn: Callable[[], object]
    n_bytes: Callable[[], int]
    setup: Callable[[], object]
    host: bool = False


def cuda_limits(
    torch_module: Any, v: list[Any], blobs: Callable[[], list[bytearray]]
) -> list[Limit]:
    """The CUDA limits over V tensors ``v`` (on the device) and the blobs ``blobs()``
    returns (reference PER_TENSOR, host ``bytearray``s); buffers are made in setup."""
    torch = torch_module
    state: dict[str, list[Any]] = {}

    def prepare() -> None:
        if state:
            return
        sizes = [len(b) for b in blobs()]
        state["v_out"] = [torch.empty_like(t) for t in v]
        state["dev"] = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in sizes]
        state["pinned"] = [torch.empty(n, dtype=torch.uint8).pin_memory() for n in sizes]
        state["pageable"] = [torch.empty(n, dtype=torch.uint8) for n in sizes]
        state["src"] = [torch.frombuffer(b, dtype=torch.uint8) for b in blobs()]

    def d2d() -> None:
        for out, t in zip(state["v_out"], v, strict=True):
            out.copy_(t)

    def copier(dst: str, src: str, non_blocking: bool) -> Callable[[], None]:
        def copy() -> None:
            for d, s in zip(state[dst], state[src], strict=True):
                d.copy_(s, non_blocking=non_blocking)

        return copy

    def crc32() -> None:
        for b in blobs():
            zlib.crc32(b)

    def v_bytes() -> int:
        return sum(t.numel() * t.element_size() for t in v)

    def blob_bytes() -> int:
        return sum(len(b) for b in blobs())

    return [
        Limit("copy", "d2d", d2d, v_bytes, prepare),
        Limit("copy", "d2h_pinned", copier("pinned", "dev", True), blob_bytes, prepare),
        Limit("copy", "d2h_pageable", copier("pageable", "dev", False), blob_bytes, prepare),
        Limit("copy", "h2d_pinned", copier("dev", "pinned", True), blob_bytes, prepare),
        Limit("copy", "h2d_pageable", copier("dev", "src", False), blob_bytes, prepare),
        Limit("crc32", "crc32", crc32, blob_bytes, prepare, host=True),
    ]
