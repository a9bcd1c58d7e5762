"""The reference codec with PER_TENSOR dequantization done in the output dtype."""

from __future__ import annotations

from typing import Any

from lmckv.reference_impl import kv_codec as _ref
from lmckv.reference_impl.kv_codec import *  # noqa: F403
from lmckv.reference_impl.kv_codec import __all__  # noqa: F401


class AsymK16V8Codec(_ref.AsymK16V8Codec):
    """decode(out_v_dtype=...) computes q.to(out) * scale.to(out) for PER_TENSOR."""

    def decode(self, enc: Any, *, out_v_dtype: Any = None, **kwargs: Any) -> Any:
        if out_v_dtype is None or enc.scale_scope != _ref.ScaleScope.PER_TENSOR:
            return super().decode(enc, out_v_dtype=out_v_dtype, **kwargs)
        k, q, scales = super().decode(enc, **kwargs)
        return k, q.to(out_v_dtype) * scales.to(out_v_dtype), scales
