"""What the reader mutants share: the reference codec with its consistency check swapped for a
mutant's, only while that codec parses or decodes. Other codecs in the process keep the
reference's check, and the reference's memo of consistent field sets is never filled by a
mutant's answer."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from lmckv.reference_impl import kv_codec as _ref
from lmckv.reference_impl.kv_codec import codec as _codec
from lmckv.reference_impl.kv_codec import header_fields as _fields
from lmckv.reference_impl.kv_codec.header import EncodedKV

#: The reference's field checks, which a mutant's check calls for what it does not skip.
reference_check = _fields._check_fields

Check = Callable[[EncodedKV], None]


@contextlib.contextmanager
def _reading_with(check: Check) -> Iterator[None]:
    saved = (_fields.check_consistency, _codec.check_consistency)
    _fields.check_consistency = _codec.check_consistency = check
    try:
        yield
    finally:
        _fields.check_consistency, _codec.check_consistency = saved


def codec_with_check(check: Check) -> type[_ref.AsymK16V8Codec]:
    """An AsymK16V8Codec that parses and decodes with ``check``."""

    class AsymK16V8Codec(_ref.AsymK16V8Codec):
        def from_bytes(self, buf: Any, **kwargs: Any) -> Any:
            with _reading_with(check):
                return super().from_bytes(buf, **kwargs)

        def decode(self, enc: Any, **kwargs: Any) -> Any:
            with _reading_with(check):
                return super().decode(enc, **kwargs)

    return AsymK16V8Codec
