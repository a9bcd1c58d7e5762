"""The dtype table shared by the encoded-KV header and the protocol messages.

Both formats write a dtype as a small integer id (SPEC.md, "Dtype table"). Upstream
lists ``torch.half`` (id 1) and ``torch.float16`` (id 2) separately, but they are the
same ``torch.dtype`` object, so writers always emit 2 for float16; readers accept 1 and
2 as float16. Id 0 stands for "no dtype" (``None``).
"""

from __future__ import annotations

import torch

#: id -> dtype, as read. Id 1 is the legacy alias of float16.
INT_TO_DTYPE: dict[int, torch.dtype | None] = {
    0: None,
    1: torch.float16,
    2: torch.float16,
    3: torch.bfloat16,
    4: torch.float32,
    5: torch.float64,
    6: torch.uint8,
    7: torch.float8_e4m3fn,
    8: torch.float8_e5m2,
}

#: dtype -> id, as written.
DTYPE_TO_INT: dict[torch.dtype | None, int] = {
    None: 0,
    torch.float16: 2,
    torch.bfloat16: 3,
    torch.float32: 4,
    torch.float64: 5,
    torch.uint8: 6,
    torch.float8_e4m3fn: 7,
    torch.float8_e5m2: 8,
}


def dtype_name(dtype: torch.dtype | None) -> str | None:
    """``torch.float16`` -> ``"float16"`` (the name without ``torch.``); None stays None."""
    return None if dtype is None else str(dtype).removeprefix("torch.")
