"""The tensor statistics ``lmckv inspect --decode`` reports of a valid blob."""

from __future__ import annotations

from typing import Any

import torch

from .codec import AsymK16V8Codec
from .header import EncodedKV, ScaleScope
from .layout import logical_shape


def _nonfinite(t: torch.Tensor) -> tuple[int, int]:
    f = t.float()
    return int(torch.isnan(f).sum()), int(torch.isinf(f).sum())


def _decode_stats(enc: EncodedKV) -> dict[str, Any]:
    """Shapes, V abs-max per scale group (dequantized), and NaN/Inf counts of K and V."""
    codec = AsymK16V8Codec(scale_scope=enc.scale_scope)
    k, v, scales = codec.decode(enc, out_v_dtype=torch.float32)
    ls = logical_shape(enc)
    keep: tuple[int, ...] = ()
    if ls is not None and enc.scale_scope == ScaleScope.PER_LAYER_HEAD:
        keep = (ls.head_axis,)
    elif ls is not None and enc.scale_scope == ScaleScope.PER_PAGE_HEAD:
        keep = tuple(a for a in (ls.page_axis, ls.head_axis) if a is not None)
    reduce = tuple(d for d in range(v.ndim) if d not in keep)
    absmax = v.abs().amax(dim=reduce) if v.numel() else torch.zeros(())
    k_nan, k_inf = _nonfinite(k)
    v_nan, v_inf = _nonfinite(v)
    return {
        "k_shape": list(k.shape),
        "v_shape": list(v.shape),
        "scale_shape": list(scales.shape),
        "v_absmax_per_group": absmax.tolist(),
        "k_nan": k_nan,
        "k_inf": k_inf,
        "v_nan": v_nan,
        "v_inf": v_inf,
    }


def blob_stats(blob: bytes) -> dict[str, Any]:
    """The statistics of the blob ``blob`` holds (CodecError when it does not parse or
    its layout cannot be shaped)."""
    return _decode_stats(AsymK16V8Codec().from_bytes(blob))
