"""Progress bars for long work (tqdm on stderr; a silent counter where tqdm is absent)."""

from __future__ import annotations

import sys
from typing import Any


class _Silent:
    """The part of tqdm's interface the benchmarks use, doing nothing."""

    def __init__(self, total: int | None = None, desc: str = "") -> None:
        self.total = total
        self.desc = desc
        self.n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def reset(self, total: int | None = None) -> None:
        self.total = total
        self.n = 0

    def set_description_str(self, desc: str) -> None:
        self.desc = desc

    def close(self) -> None:
        return None


def bar(total: int | None, desc: str, *, enabled: bool = True, unit: str = "it") -> Any:
    """A progress bar on stderr (``update``, ``reset``, ``set_description_str``, ``close``)."""
    if not enabled:
        return _Silent(total, desc)
    try:
        from tqdm import tqdm
    except ImportError:
        return _Silent(total, desc)
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True)
