"""The reference codec with the page and head axes of PER_PAGE_HEAD scales swapped when
quantizing V."""

from __future__ import annotations

from typing import Any

from lmckv.reference_impl import kv_codec as _ref
from lmckv.reference_impl.kv_codec import *  # noqa: F403
from lmckv.reference_impl.kv_codec import __all__  # noqa: F401


class AsymK16V8Codec(_ref.AsymK16V8Codec):
    """Quantizes PER_PAGE_HEAD V with scales.t(), then stores the right scales."""

    def encode(self, k: Any, v: Any, **kwargs: Any) -> Any:
        if (
            self.scale_scope != _ref.ScaleScope.PER_PAGE_HEAD
            or kwargs.get("precomputed_v_quant") is not None
        ):
            return super().encode(k, v, **kwargs)
        head_axis = kwargs.get("head_axis", -2)
        page_axis = kwargs.get("page_axis")
        scales = kwargs.get("precomputed_v_scales")
        if scales is None:
            scales = _ref.compute_v_scales(
                v, self.scale_scope, head_axis=head_axis, page_axis=page_axis
            )
        scales = scales.to(self.scale_dtype)
        swapped = scales.t().contiguous().reshape(scales.shape)
        quant = _ref.quantize_v_fp8(
            v, swapped, self.scale_scope, head_axis=head_axis, page_axis=page_axis
        )
        kwargs.update(precomputed_v_scales=scales, precomputed_v_quant=quant)
        return super().encode(k, v, **kwargs)
