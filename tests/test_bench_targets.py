"""Issue 23's targets in ``lmckv bench targets``: per-case goals for encode vs upstream,
the CPU memcpy ratios at 64 MiB only, the CUDA pinned-copy ratios."""

from __future__ import annotations

from typing import Any

from lmckv.bench.throughput.targets import check_targets, format_checks


def row(op: str, case: str, device: str = "cpu", **ratios: float | None) -> dict[str, Any]:
    return {
        "kind": "throughput",
        "op": op,
        "impl": "reference",
        "device": device,
        "scope": "PER_TENSOR",
        "dtype": "float16",
        "case": case,
        "gbps": 1.0,
        "ratio_to_limit": None,
        "ratio_to_upstream": None,
        **ratios,
    }


def test_encode_vs_upstream_asks_4x_at_64mib_and_2x_elsewhere() -> None:
    checks = {
        c.case: c
        for c in check_targets(
            [
                row("encode", "64MiB", ratio_to_upstream=3.0),
                row("encode", "page16", ratio_to_upstream=3.0),
            ]
        )
        if c.target == "encode_vs_upstream"
    }
    assert (checks["64MiB"].goal, checks["64MiB"].passed) == (4.0, False)
    assert (checks["page16"].goal, checks["page16"].passed) == (2.0, True)


def test_memcpy_ratios_are_checked_at_64mib_only() -> None:
    rows = [
        row("encode", "64MiB", ratio_to_limit=0.4),
        row("decode_dequant", "64MiB", ratio_to_limit=0.3),
        row("encode", "page16", ratio_to_limit=0.01),  # per-call cost, not a pace target
    ]
    checks = {c.target: c for c in check_targets(rows)}
    assert checks["cpu_encode_vs_memcpy"].case == "64MiB"
    assert checks["cpu_encode_vs_memcpy"].passed
    assert not checks["cpu_decode_dequant_vs_memcpy"].passed
    assert "0.35" in format_checks(list(checks.values()))


def test_cuda_pinned_ratios_read_ratio_to_pinned() -> None:
    rows = [
        row("encode", "64MiB", device="cuda", ratio_to_pinned=0.2),
        row("decode_fp8", "64MiB", device="cuda", ratio_to_pinned=0.6),
    ]
    checks = {c.target: c for c in check_targets(rows)}
    assert not checks["cuda_encode_vs_pinned_d2h"].passed
    assert checks["cuda_decode_fp8_vs_pinned_h2d"].passed
