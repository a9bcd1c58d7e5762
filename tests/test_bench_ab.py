"""lmckv bench ab: two sides measured in alternating processes of one session, judged in
pairs; a real (tiny) session with an injected slowdown, and the sides' checks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from bench_files import tiny_plan

from lmckv.bench.bench_command import main
from lmckv.bench.common.impls import SLOWDOWN_ENV
from lmckv.bench.common.rows import load
from lmckv.bench.gate.ab import SideError, parse_env, resolve_side, run_ab
from lmckv.bench.gate.decision import EXIT_REGRESSION

TINY = tiny_plan(processes=1)


def test_sides_are_checked_before_any_measurement(tmp_path: Path) -> None:
    with pytest.raises(SideError, match="no Python interpreter"):
        resolve_side("base", str(tmp_path / "nowhere"), {})
    with pytest.raises(SideError, match="VAR=VALUE"):
        parse_env(["NOVALUE"])
    side = resolve_side("head", "current", {"X": "1"})
    assert side.python == sys.executable and side.version and side.env == {"X": "1"}
    code = main(["ab", "current", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")])
    assert code == 2 and not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["ab", "current", "current", "--pairs", "1"],  # the signed-rank test needs pairs
        ["ab", "current", "current", "--pairs", "two"],
        ["gate-check", "--pairs", "0"],
        ["gate-check", "--ab-pairs", "1"],
    ],
)
def test_too_few_pairs_is_a_usage_error_before_any_measurement(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--out", str(tmp_path / "o")])
    assert stop.value.code == 2 and not (tmp_path / "o").exists()
    assert "pairs" in capsys.readouterr().err


def test_an_interleaved_session_finds_an_injected_slowdown(tmp_path: Path) -> None:
    base = resolve_side("base", "current", {SLOWDOWN_ENV: ""})
    head = resolve_side("head", "current", {SLOWDOWN_ENV: "encode:3"})
    # 6 pairs: the signed-rank test's smallest p (2 ** -6) is under Holm's first threshold
    # over the plan's two operations (0.05 / 2).
    result = run_ab(tmp_path, base, head, plan=TINY, pairs=6)
    ops = {d.op: d for d in result.decision.ops}
    assert result.decision.paired and result.decision.exit_code == EXIT_REGRESSION
    assert ops["encode"].outcome == "regression" and ops["encode"].n_base == 6
    assert ops["encode"].ratio > 2.0
    assert ops["parse"].outcome != "regression"
    for side, path in (("base", result.base_file), ("head", result.head_file)):
        header, rows = load(path)
        assert header["config"]["ab"]["side"] == side and path.parent.name == side
        assert all(r["processes"] == 6 for r in rows if r["kind"] == "throughput")
    data = json.loads((tmp_path / "ab.json").read_text())
    assert data["paired"] is True and data["exit_code"] == EXIT_REGRESSION
    assert "Wilcoxon signed-rank" in (tmp_path / "ab.md").read_text()
