"""The results file of one suite run (``--results-json``): every test's outcome, the
implementations, the rule registry, the per-level summary and the producer x consumer matrix.
Its layout is described by ``lmckv/base/schemas/results.schema.json``."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmckv.base.resources import checkout_root
from lmckv.base.schemas import RESULTS_VERSION, validate

from ..core.rules import RULES
from ..drivers.base import ImplInfo

#: What one test of one implementation (or pair) can come to.
OUTCOMES = ("pass", "fail", "known_failure", "unexpected_pass", "skip")


def git_commit() -> str | None:
    """The commit of the checkout the suite runs from, if it is one."""
    root = checkout_root()
    if root is None:
        return None
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def utc_now() -> str:
    """The current time, ISO 8601 in UTC, to the second."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def write_results(
    path: Path,
    *,
    started_utc: str,
    wall_s: float,
    impls: Sequence[ImplInfo],
    tests: Sequence[dict[str, Any]],
    summary: list[dict[str, Any]],
    matrix: list[dict[str, Any]],
    versions: list[dict[str, Any]] | None = None,
    known_failures: dict[str, str | None] | None = None,
    known_failures_choice: dict[str, str | None] | None = None,
) -> None:
    """Write the results document to ``path`` (parents created). ``known_failures``: the
    known-failure list used for each implementation (None: none); ``known_failures_choice``:
    why, when it is not the implementation's own list (None: it is); ``versions``: the
    reader x golden vector set rows of the compatibility matrix."""
    data = {
        "schema_version": RESULTS_VERSION,
        "started_utc": started_utc,
        "wall_s": round(wall_s, 3),
        "git_commit": git_commit(),
        "impls": [
            {
                "name": info.name,
                "kind": info.kind,
                "version": info.version,
                "capabilities": list(info.capabilities),
                "known_failures": (known_failures or {}).get(info.name),
                "known_failures_choice": (known_failures_choice or {}).get(info.name),
            }
            for info in impls
        ],
        "rules": [
            {"id": r.id, "level": r.level, "spec_anchor": r.spec_anchor, "summary": r.summary}
            for r in RULES.values()
        ],
        "tests": sorted(tests, key=lambda r: r["id"]),
        "summary": summary,
        "matrix": matrix,
        "versions": versions or [],
    }
    validate(data, "results")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
