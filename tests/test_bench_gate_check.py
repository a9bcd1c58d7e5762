"""gate-check: the thresholds of its verdict, its input check, how it pairs the files of a
measurement (also of several, ``--judge``), and its stated background load. A real series
(one pair of each kind) runs in tests/test_bench_compare.py."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from bench_files import synthetic_run, write_results

from lmckv.base.process_groups import group_alive
from lmckv.bench.bench_command import main
from lmckv.bench.gate import gate_check
from lmckv.bench.gate.background import COPY_BYTES, KINDS, background_load, work
from lmckv.bench.gate.background import main as background_main
from lmckv.bench.gate.compare import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION
from lmckv.bench.gate.gate_check import (
    PLAIN,
    SLOWED,
    Outcome,
    judge_folders,
    measure,
    run_gate_check,
    session_folder,
    summarize,
)


def outcomes(codes: list[int], encode: float = 1.0) -> list[Outcome]:
    return [Outcome("base", "head", code, {"encode": encode}) for code in codes]


def test_compare_is_held_to_false_alarms_only() -> None:
    """Separate runs cannot promise power under drift: a compare series that catches few
    slowdowns still holds when its A/A pairs hold; ab must catch 19 of 20."""
    aa = outcomes([EXIT_OK] * 20)
    weak = outcomes([EXIT_INCONCLUSIVE] * 15 + [EXIT_REGRESSION] * 5, 1.2)
    assert summarize({"compare": (aa, weak)}, "encode:1.2")[0] is True
    assert summarize({"ab": (aa, weak)}, "encode:1.2")[0] is False


@pytest.mark.parametrize(
    ("false_alarms", "detected", "holds"),
    [(0, 20, True), (1, 19, True), (2, 20, False), (0, 18, False)],
)
def test_the_gate_holds_at_one_false_alarm_and_nineteen_detections_of_twenty(
    false_alarms: int, detected: int, holds: bool
) -> None:
    aa = outcomes([EXIT_REGRESSION] * false_alarms + [EXIT_OK] * (20 - false_alarms))
    slow = outcomes([EXIT_REGRESSION] * detected + [EXIT_INCONCLUSIVE] * (20 - detected), 1.2)
    verdict, text = summarize({"ab": (aa, slow)}, "encode:1.2")
    assert verdict is holds
    assert text.startswith("# gate check: " + ("HOLDS" if holds else "DOES NOT HOLD"))
    assert (
        f"| ab | 20 | {false_alarms} (<= 1) | {20 - false_alarms} / {false_alarms} / 0 | "
        f"1.000-1.000 | {detected} (>= 19) | 0 / {detected} / {20 - detected} | 1.200-1.200 |"
    ) in text


def test_a_bad_slowdown_fails_before_any_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="OP:FACTOR"):
        measure(tmp_path, 1, "encode")
    assert not any(tmp_path.iterdir())


# ---- judging measurement folders (gate-check --judge) on constructed runs


def _measurement(root: Path, seed: int, *, ab: bool = True) -> dict[str, list[str]]:
    """A folder as gate-check leaves it, of synthetic runs shaped like the quick plan:
    compare's runs made plain, slowed, plain, slowed, plain (encode 1.2x when slowed), ab's
    sessions 00-aa and 01-slowed (``session_folder``; 8 process pairs on a machine whose
    processes differ by up to 1.5x) unless ``ab`` is false. Returns compare's file names of
    each kind in the order they were made."""
    made: dict[str, list[str]] = {PLAIN: [], SLOWED: []}
    for index in range(5):
        kind = SLOWED if index % 2 else PLAIN
        slowdown = {"encode": 1.2} if index % 2 else None
        rows = synthetic_run(seed + index, slowdown=slowdown)
        made[kind].append(write_results(root / "compare" / kind, rows).name)
    machine = [random.Random(seed).uniform(1.0, 1.5) for _ in range(8)]
    for index, slowdown in enumerate((None, {"encode": 1.2}) if ab else ()):
        for side, side_slowdown in (("base", None), ("head", slowdown)):
            rows = synthetic_run(seed + 10, processes=8, machine=machine, slowdown=side_slowdown)
            write_results(session_folder(root / "ab", index) / side, rows)
    return made


def test_folders_are_judged_as_gate_check_pairs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain runs each against the next, each against the slowed run made after it (in
    the order made, also when several start within one second), sessions by their kind;
    each file is read once, though a plain run is in up to three pairs."""
    made = _measurement(tmp_path / "m", seed=1)
    reads: Counter[Path] = Counter()
    measured = gate_check._measured

    def counted(path: Path) -> list[dict[str, Any]]:
        reads[path] += 1
        return measured(path)

    monkeypatch.setattr(gate_check, "_measured", counted)
    results = judge_folders([tmp_path / "m"])
    compare_files = {tmp_path / "m" / "compare" / k / name for k in made for name in made[k]}
    assert compare_files <= set(reads)
    assert len(reads) == len(compare_files) + 4  # and both sides of the two ab sessions
    assert set(reads.values()) == {1}
    aa, slow = results["compare"]
    plain, slowed = made[PLAIN], made[SLOWED]
    assert [(o.base, o.head) for o in aa] == [(plain[0], plain[1]), (plain[1], plain[2])]
    assert [(o.base, o.head) for o in slow] == [(plain[0], slowed[0]), (plain[1], slowed[1])]
    assert all(o.exit_code != EXIT_REGRESSION for o in aa)
    assert all(o.exit_code == EXIT_REGRESSION for o in slow)
    assert all(o.ratios["encode"] == pytest.approx(1.2, rel=0.05) for o in slow)
    ab_aa, ab_slow = results["ab"]
    assert [o.exit_code != EXIT_REGRESSION for o in ab_aa] == [True]
    assert [o.exit_code for o in ab_slow] == [EXIT_REGRESSION]


def test_judge_combines_folders_without_pairing_across_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for index in range(2):
        _measurement(tmp_path / f"m{index}", seed=100 * index)
    folders = [str(tmp_path / "m0"), str(tmp_path / "m1")]
    assert main(["gate-check", "--judge", folders[0], "--judge", folders[1]]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# gate check: HOLDS")
    assert f"Judged again from: {folders[0]}, {folders[1]}." in out
    assert "| compare | 4 | 0 (<= 0.2) |" in out  # 2 + 2 A/A pairs, not 5
    assert "| ab | 2 | 0 (<= 0.1) |" in out
    assert "| 2 (>= 1.9) | 0 / 2 / 0 |" in out
    assert not (tmp_path / "m0" / "gate-check.md").exists()  # --judge writes nothing


def test_judge_refuses_an_unfinished_session_or_run_and_an_empty_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _measurement(tmp_path / "m", seed=2)
    cut = write_results(tmp_path / "m" / "compare" / PLAIN, [])  # stopped before its rows
    assert main(["gate-check", "--judge", str(tmp_path / "m")]) == 2
    assert f"{cut}: no throughput rows (a run left unfinished)" in capsys.readouterr().err
    cut.unlink()
    for path in (tmp_path / "m" / "ab" / "01-slowed" / "head").iterdir():
        path.unlink()  # the session stopped before its head side was written
    assert main(["gate-check", "--judge", str(tmp_path / "m")]) == 2
    assert "01-slowed/head: expected one results file, found 0" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["gate-check", "--judge", str(tmp_path / "empty")]) == 2
    assert "no compare runs or ab sessions" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["gate-check", "--out", "x", "--judge", "y"],
        ["gate-check"],
        ["gate-check", "--judge", "y", "--slowdown", "encode"],
        ["gate-check", "--out", "x", "--load", "spin,disk"],
    ],
)
def test_usage_errors(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--pairs", "5"], "--pairs"),
        (["--only", "ab", "--load", "spin"], "--only, --load"),
        (["--ab-pairs", "4"], "--ab-pairs"),
    ],
)
def test_judge_refuses_the_options_that_say_how_to_measure(
    options: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--judge measures nothing: an option for measuring is an error, not ignored."""
    _measurement(tmp_path / "m", seed=3, ab=False)
    assert main(["gate-check", "--judge", str(tmp_path / "m"), *options]) == 2
    captured = capsys.readouterr()
    assert f"--judge measures nothing; {named} apply to --out only" in captured.err
    assert captured.out == ""


# ---- the stated background load


def test_the_load_runs_while_the_measurement_does_and_is_stated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[int] = []
    real_load = gate_check.background_load

    @contextmanager
    def spied(kinds: tuple[str, ...], *, max_seconds: float) -> Iterator[list[int]]:
        with real_load(kinds, max_seconds=max_seconds) as pids:
            started.extend(pids)
            yield pids

    measured: list[Path] = []

    def fake_measure(out: Path, pairs: int, slowdown: str, **kw: object) -> None:
        assert len(started) == 2 and all(group_alive(pid) for pid in started)
        measured.append(out)
        _measurement(out.parent, seed=3, ab=False)

    monkeypatch.setattr(gate_check, "background_load", spied)
    monkeypatch.setattr(gate_check, "measure", fake_measure)
    code = run_gate_check(
        tmp_path, pairs=2, slowdown="encode:1.2", methods=("compare",), load=("spin", "copy")
    )
    assert code == 0
    assert started and not any(group_alive(pid) for pid in started)
    summary = (tmp_path / "gate-check.md").read_text()
    assert "Background load throughout: spin, copy (bench.gate.background)." in summary
    # measuring into the same folder again would pair old runs with new ones: refused
    code = run_gate_check(
        tmp_path, pairs=2, slowdown="encode:1.2", methods=("compare",), load=("spin",)
    )
    assert code == 2
    assert len(measured) == 1 and len(started) == 2  # nothing measured or started again


def test_the_load_is_stopped_when_the_measurement_fails(tmp_path: Path) -> None:
    pids: list[int] = []
    with (
        pytest.raises(RuntimeError, match="measurement failed"),
        background_load(("spin",), max_seconds=60) as started,
    ):
        pids.extend(started)
        raise RuntimeError("measurement failed")
    assert pids and not any(group_alive(pid) for pid in pids)


def test_each_kind_loads_the_machine_and_stops_by_itself() -> None:
    """spin takes CPU time, copy holds its two 64 MiB buffers; both end after their
    seconds without being stopped; anything else is a usage error."""
    with background_load(("spin", "copy"), max_seconds=60) as (spin, copy):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (
            _cpu_ticks(spin) == 0 or _rss_bytes(copy) < 2 * COPY_BYTES
        ):
            time.sleep(0.1)
        assert _cpu_ticks(spin) > 0
        assert _rss_bytes(copy) >= 2 * COPY_BYTES
    for kind in KINDS:
        done = subprocess.run(
            [sys.executable, "-m", "lmckv.bench.gate.background", kind, "0.2"],
            timeout=60,
            check=False,
        )
        assert done.returncode == 0
    assert background_main(["disk", "1"]) == 2
    assert background_main(["spin", "soon"]) == 2
    assert background_main(["spin", "inf"]) == 2  # a load always ends by itself
    with pytest.raises(ValueError, match="load kind 'disk'"):
        work("disk", 0.05)
    assert work("spin", 0.05) > 0


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0
