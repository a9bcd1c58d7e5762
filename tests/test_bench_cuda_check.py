"""cuda-check: its checks run (as a CPU dry run here) and it skips cleanly without CUDA."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench.cli import main
from bench.cuda_check import correctness
from bench.impls import load_impls


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
def test_cuda_check_skips_with_a_reason_without_cuda(tmp_path: Path) -> None:
    assert main(["cuda-check", "--out", str(tmp_path)]) == 3
    report = json.loads((tmp_path / "cuda-check.json").read_text())
    assert report["verdict"] == "SKIP" and report["reason"]
