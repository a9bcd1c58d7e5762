"""The reference keys with '0x' dropped from FS filenames."""

from __future__ import annotations

from typing import Any

from lmckv.reference_impl import keys as _ref
from lmckv.reference_impl.keys import *  # noqa: F403
from lmckv.reference_impl.keys import __all__  # noqa: F401


def object_key_to_filename(key: Any) -> str:
    model, _, rest = _ref.object_key_to_filename(key).partition("@0x")
    return f"{model}@{rest}"


def filename_to_object_key(filename: str) -> Any:
    model, sep, rest = filename.partition("@")
    return _ref.filename_to_object_key(f"{model}{sep}0x{rest}" if sep else filename)
