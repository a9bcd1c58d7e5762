"""The output directory: every file the builder writes is recorded in ``manifest.json``.

On the next build into the same directory, the files the previous manifest lists are removed
first, so a figure that is no longer produced (say, no CUDA rows this time) cannot linger, and
nothing the builder did not write is ever touched.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

MANIFEST = "manifest.json"


def _strict(value: Any) -> Any:
    """``value`` with NaN and infinities (pandas' missing numbers) as null: strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


class Output:
    """Writes report files into one directory and remembers their names."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.written: list[str] = []
        directory.mkdir(parents=True, exist_ok=True)
        self._remove_previous()

    def _remove_previous(self) -> None:
        manifest = self.directory / MANIFEST
        try:
            previous = json.loads(manifest.read_text(encoding="utf-8"))["files"]
        except (OSError, ValueError, KeyError, TypeError):
            return
        if not isinstance(previous, list):
            return
        for name in previous:
            if isinstance(name, str) and Path(name).name == name and name not in ("", ".", ".."):
                target = self.directory / name
                if target.is_file():
                    target.unlink()

    def path(self, name: str) -> Path:
        """Where to write ``name`` (a plain file name); recorded as written."""
        self.written.append(name)
        return self.directory / name

    def csv(self, frame: pd.DataFrame, name: str) -> None:
        """A table behind a figure or an HTML table, as CSV."""
        frame.to_csv(self.path(name), index=False)

    def json(self, document: Any, name: str) -> None:
        """A document (summary, environment) as indented JSON; odd values as their str()."""
        text = json.dumps(_strict(document), indent=2, default=str, allow_nan=False)
        self.path(name).write_text(text + "\n")

    def finish(self) -> None:
        """Write the manifest of this build."""
        names = sorted(set(self.written))
        (self.directory / MANIFEST).write_text(json.dumps({"files": names}, indent=2) + "\n")
