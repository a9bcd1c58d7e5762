"""The reference codec with a reader that accepts a k_payload_len that is not a whole number of
K elements (odd for 16-bit K) and skips its other length checks then: its consistency
check is swapped for the mutant's only while this codec parses or decodes (other codecs in
the process keep the reference's, and the reference's memo of consistent field sets is never
filled by it)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from reference_impl import kv_codec as _ref
from reference_impl.kv_codec import *  # noqa: F403
from reference_impl.kv_codec import __all__  # noqa: F401
from reference_impl.kv_codec import codec as _codec
from reference_impl.kv_codec import header as _header
from reference_impl.kv_codec.header import EncodedKV

_reference_check = _header._check_fields


def _mutant_check(enc: EncodedKV) -> None:
    if enc.k_payload_len % 2:
        return  # the sum and the CRC are checked after this
    _reference_check(enc)


@contextlib.contextmanager
def _mutant_reader() -> Iterator[None]:
    saved = (_header.check_consistency, _codec.check_consistency)
    _header.check_consistency = _codec.check_consistency = _mutant_check
    try:
        yield
    finally:
        _header.check_consistency, _codec.check_consistency = saved


class AsymK16V8Codec(_ref.AsymK16V8Codec):
    """Parses and decodes with the mutant's consistency check."""

    def from_bytes(self, buf: Any, **kwargs: Any) -> Any:
        with _mutant_reader():
            return super().from_bytes(buf, **kwargs)

    def decode(self, enc: Any, **kwargs: Any) -> Any:
        with _mutant_reader():
            return super().decode(enc, **kwargs)
