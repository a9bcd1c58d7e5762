"""The dtype table of both formats, by name (SPEC.md, "Dtype table"): what each id means,
without torch, so that a reader of headers alone (``lmckv inspect``, ``lmckv fsck``) runs
in the memory of a small process. ``reference_impl.dtypes`` maps the same table onto
``torch.dtype`` objects.

Upstream lists ``torch.half`` (id 1) and ``torch.float16`` (id 2) separately; they are one
dtype, so readers take 1 and 2 as float16 and writers emit 2. Id 0 stands for "no dtype".
"""

from __future__ import annotations

from typing import NamedTuple

#: id -> dtype name (torch's, without ``torch.``), as read; 0 is "no dtype".
NAME_OF_ID: dict[int, str | None] = {
    0: None,
    1: "float16",
    2: "float16",
    3: "bfloat16",
    4: "float32",
    5: "float64",
    6: "uint8",
    7: "float8_e4m3fn",
    8: "float8_e5m2",
}

#: Bytes per element of each dtype of the table.
ITEMSIZE: dict[str, int] = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "uint8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}


class WireDType(NamedTuple):
    """A dtype of the table as a header reader without torch holds it; ``str()`` spells it
    as torch does (``torch.float16``), so messages read the same either way."""

    name: str
    itemsize: int

    def __str__(self) -> str:
        return f"torch.{self.name}"
