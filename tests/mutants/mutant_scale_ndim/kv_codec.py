"""The reference codec with a reader that never checks the scale shape's dimension count
(see mutant_reader)."""

from __future__ import annotations

from mutant_reader import codec_with_check, reference_check

from lmckv.reference_impl import kv_codec as _ref
from lmckv.reference_impl.kv_codec import *  # noqa: F403
from lmckv.reference_impl.kv_codec import __all__  # noqa: F401
from lmckv.reference_impl.kv_codec.header import EncodedKV


def _mutant_check(enc: EncodedKV) -> None:
    import copy
    import math

    wanted = {_ref.ScaleScope.PER_LAYER_HEAD: 1, _ref.ScaleScope.PER_PAGE_HEAD: 2}.get(
        enc.scale_scope, 0
    )
    shape = tuple(enc.scale_shape)
    if wanted and len(shape) > wanted:
        folded = copy.copy(enc)
        folded.scale_shape = (*shape[: wanted - 1], math.prod(shape[wanted - 1 :]))
        enc = folded
    reference_check(enc)


AsymK16V8Codec = codec_with_check(_mutant_check)
