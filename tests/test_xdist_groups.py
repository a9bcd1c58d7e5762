"""The store tests of one adapter share one fault run per process, so ``--dist loadgroup``
must send every test of an ``xdist_group`` to one worker (pytest 9.2 with pytest-xdist 3.8 does
not: pyproject.toml pins pytest below 9.2). A suite of six tests of one group, run as the
store tests are, records the worker of each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SUITE = """
import os, pytest

ONE = pytest.mark.xdist_group("one")


@pytest.mark.parametrize("i", [pytest.param(i, marks=ONE) for i in range(6)])
def test_grouped(i):
    out = os.environ["LMCKV_GROUP_LOG"]
    with open(out, "a", encoding="utf-8") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")


def test_alone():
    pass
"""


def test_one_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(SUITE, encoding="utf-8")
    log = tmp_path / "workers.txt"
    env = {**os.environ, "LMCKV_GROUP_LOG": str(log)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
    argv += ["--dist", "loadgroup", "test_grouped.py"]
    run = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-2000:]
    workers = log.read_text(encoding="utf-8").split()
    assert len(workers) == 6
    assert len(set(workers)) == 1, f"one group spread over workers {sorted(set(workers))}"
