"""The dtype table shared by the encoded-KV header and the protocol messages, as
``torch.dtype`` objects: ``reference_impl.dtype_table`` (SPEC.md, "Dtype table") with each
name looked up in torch. Ids 1 and 2 both read as float16; writers emit 2. Id 0 stands for
"no dtype" (``None``).
"""

from __future__ import annotations

import torch

from .dtype_table import NAME_OF_ID

#: id -> dtype, as read. Id 1 is the legacy alias of float16.
INT_TO_DTYPE: dict[int, torch.dtype | None] = {
    i: None if name is None else getattr(torch, name) for i, name in NAME_OF_ID.items()
}

#: dtype -> id, as written: the highest id of each dtype (float16 is 2, not its alias 1).
DTYPE_TO_INT: dict[torch.dtype | None, int] = {d: i for i, d in sorted(INT_TO_DTYPE.items())}


def dtype_name(dtype: torch.dtype | None) -> str | None:
    """``torch.float16`` -> ``"float16"`` (the name without ``torch.``); None stays None."""
    return None if dtype is None else str(dtype).removeprefix("torch.")
