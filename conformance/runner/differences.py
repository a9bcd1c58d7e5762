"""The entry of SPEC.md's "Differences from upstream" that a known failure is about, so a
message about a fixed finding can name it beside the line to delete."""

from __future__ import annotations

import functools
import importlib.resources
import re
from dataclasses import dataclass

SECTION = "## Differences from upstream"
_ITEM = re.compile(r"^ {0,3}(\d+)\. \*\*(.+?)\*\*", re.MULTILINE)
_CITED = re.compile(r"differences item (\d+)")
_RULE = re.compile(r"^([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+):")


@dataclass(frozen=True)
class Entry:
    """One numbered item of the section: its number, its bold title and its text."""

    number: int
    title: str
    text: str

    def __str__(self) -> str:
        return (
            f'reference_impl/SPEC.md "Differences from upstream" item {self.number} ({self.title})'
        )


@functools.cache
def entries() -> tuple[Entry, ...]:
    """The numbered items of SPEC.md's differences section (empty if SPEC.md is missing)."""
    try:
        spec = importlib.resources.files("lmckv.reference_impl").joinpath("SPEC.md").read_text()
    except (FileNotFoundError, ModuleNotFoundError):
        return ()
    start = spec.find(SECTION)
    if start < 0:
        return ()
    section = spec[start:]
    found = list(_ITEM.finditer(section))
    ends = [m.start() for m in found[1:]] + [len(section)]
    return tuple(
        Entry(int(m.group(1)), m.group(2).rstrip("."), section[m.start() : end])
        for m, end in zip(found, ends, strict=True)
    )


def entry_for(reason: str | None) -> Entry | None:
    """The entry a known-failure reason is about: the item it cites ("differences item
    N"), else the first item that names the reason's rule (``**RULE**``), else None."""
    if not reason:
        return None
    cited = _CITED.search(reason)
    if cited is not None:
        return next((e for e in entries() if e.number == int(cited.group(1))), None)
    rule = _RULE.match(reason)
    if rule is None:
        return None
    bold = f"**{rule.group(1)}**"
    return next((e for e in entries() if bold in e.text), None)
