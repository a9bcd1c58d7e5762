"""The reference codec with a reader that accepts a k_payload_len that is not a whole number of
K elements (odd for 16-bit K) and skips its other length checks then (see mutant_reader)."""

from __future__ import annotations

from mutant_reader import codec_with_check, reference_check

from lmckv.reference_impl.kv_codec import *  # noqa: F403
from lmckv.reference_impl.kv_codec import __all__  # noqa: F401
from lmckv.reference_impl.kv_codec.header import EncodedKV


def _mutant_check(enc: EncodedKV) -> None:
    if enc.k_payload_len % 2:
        return  # the sum and the CRC are checked after this
    reference_check(enc)


AsymK16V8Codec = codec_with_check(_mutant_check)
