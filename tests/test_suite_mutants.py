"""The conformance suite catches deliberately broken implementations (tests/mutants/).

Each mutant wraps reference_impl with one defect. One suite run drives all of them, targeted
with -k at the vectors that exercise the defects; every mutant must fail at least one MUST
test of its own (matrix checks, which involve two implementations, are not counted). A
control run of the reference on the same selection must pass, so the failures are the
mutants'.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lmckv.conformance.runner.subprocess_suite import SuiteRun, run_suite

MUTANTS_DIR = Path(__file__).resolve().parent / "mutants"

#: mutant package -> -k expression selecting the tests that exercise its defect.
MUTANTS = {
    "mutant_crc32c": "kv-crc",
    "mutant_layer_id_big_endian": "enc-per_tensor-f16-nhd-2x4x2x8",
    "mutant_scale_axis": "enc-per_page_head-f16-nhd-2x4x2x8",
    "mutant_fs_no_0x": "key-fs",
    "mutant_dequant_fp16": "test_decode_dequant and per_tensor",
    # Pass the suite as it was at fee67a5, where each vector below also failed another
    # check (its CRC, or a length): caught only since each vector breaks one rule.
    "mutant_k_len_sign": "kv-len-k-negative",
    "mutant_k_len_odd": "kv-len-k-odd",
    "mutant_v_len_sign": "kv-len-v-negative",
    "mutant_scale_len_sign": "kv-len-scale-negative",
    "mutant_scale_ndim": "kv-scale-shape-3-dims",
}
#: mutant -> the test that must catch it (among its MUST failures).
MUST_CATCH = {
    "mutant_k_len_sign": "test_codec_read.py::test_parse[mutant_k_len_sign-kv-len-k-negative]",
    "mutant_k_len_odd": "test_codec_read.py::test_parse[mutant_k_len_odd-kv-len-k-odd]",
    "mutant_v_len_sign": "test_codec_read.py::test_parse[mutant_v_len_sign-kv-len-v-negative]",
    "mutant_scale_len_sign": (
        "test_codec_read.py::test_parse[mutant_scale_len_sign-kv-len-scale-negative]"
    ),
    "mutant_scale_ndim": "test_codec_read.py::test_parse[mutant_scale_ndim-kv-scale-shape-3-dims]",
}
SELECTION = " or ".join(f"({k})" for k in MUTANTS.values())


@pytest.fixture(scope="module")
def mutant_run() -> SuiteRun:
    path = os.environ.get("PYTHONPATH", "")
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(MUTANTS_DIR), path) if p)}
    return run_suite([f"python:{m}" for m in MUTANTS], "-k", SELECTION, env=env)


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_suite_catches_mutant(mutant_run: SuiteRun, mutant: str) -> None:
    assert mutant_run.returncode == 1, mutant_run.output[-2000:]
    own = [
        t["id"]
        for t in mutant_run.results["tests"]
        if t["impl"] == mutant
        and t["producer"] is None
        and t["outcome"] == "fail"
        and t["level"] == "MUST"
    ]
    assert own, f"{mutant}: no MUST test failed\n{mutant_run.output[-2000:]}"
    if mutant in MUST_CATCH:
        assert f"conformance/suite/{MUST_CATCH[mutant]}" in own, own


def test_reference_passes_the_mutant_selection() -> None:
    run = run_suite(["reference"], "-k", SELECTION)
    assert run.returncode == 0, run.output[-3000:]
    outcomes = run.outcomes()
    assert outcomes and set(outcomes.values()) == {"pass"}
