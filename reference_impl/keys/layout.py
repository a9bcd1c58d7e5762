"""MemoryLayoutDesc: per-group shapes and dtypes of a memory object
(rule KEY-LAYOUT-LENGTHS)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import DescriptorError


@dataclass(frozen=True)
class MemoryLayoutDesc:
    """Shapes and dtypes of a memory object, one entry per group; the lists have equal
    length."""

    shapes: list[torch.Size]
    dtypes: list[torch.dtype]

    def __post_init__(self) -> None:
        if len(self.shapes) != len(self.dtypes):
            raise DescriptorError(
                "MemoryLayoutDesc: shapes and dtype must have the same length "
                f"({len(self.shapes)} != {len(self.dtypes)})",
                rule="KEY-LAYOUT-LENGTHS",
            )
