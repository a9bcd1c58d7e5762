"""Run the conformance suite in a subprocess and read its results file (used by the
suite's self-tests in tests/test_suite_*.py and handy in scripts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmckv.base.resources import package_path

from .conformance_command import PLUGINS_OFF

#: The folder that holds the conformance package (a checkout, or site-packages).
REPO = package_path("lmckv.conformance").parent


@dataclass
class SuiteRun:
    """Exit status, merged output and the parsed results file of one run."""

    returncode: int
    output: str
    results: dict[str, Any]

    def outcomes(self) -> dict[str, str]:
        """Node id -> outcome."""
        return {t["id"]: t["outcome"] for t in self.results.get("tests", [])}


def run_suite(
    impls: list[str],
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    cwd: Path | None = None,
) -> SuiteRun:
    """``python -m pytest conformance --impl ... ARGS`` from the repository root (or from
    ``cwd``, with the suite given by its absolute path and the repository on PYTHONPATH).
    A run past ``timeout`` seconds is killed and raises subprocess.TimeoutExpired."""
    with tempfile.TemporaryDirectory(prefix="lmckv-suite-") as tmp:
        results = Path(tmp) / "results.json"
        cmd = [sys.executable, "-m", "pytest", *PLUGINS_OFF, "-q"]
        if not any(a == "conformance" or a.startswith("conformance/") for a in args):
            cmd.append("conformance" if cwd is None else str(REPO / "conformance"))
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        for impl in impls:
            cmd += ["--impl", impl]
        cmd += ["--results-json", str(results), *args]
        proc = subprocess.run(
            cmd,
            cwd=cwd or REPO,
            env={**os.environ, "PYTHONPATH": path, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        data = json.loads(results.read_text()) if results.exists() else {}
    return SuiteRun(proc.returncode, proc.stdout + proc.stderr, data)
