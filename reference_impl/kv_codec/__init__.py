"""The encoded-KV blob (v1, and the v2 draft's RAW_UNIT blob) and its AsymK16V8 codec; the
names of ``lmcache.v1.kv_codec``.

The names that need torch (the codec, ``EncodedKV``, the quantizers) are imported on first
use, so that a header-only reader (``header_fields``, ``blob_file``) imports none of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    CodecError,
    CodecMismatchError,
    CorruptEncodedKVError,
    UnsupportedConfigError,
)
from .header_fields import (
    CODEC_MAGIC,
    CodecHashes,
    CodecVersion,
    ScaleScheme,
    ScaleScope,
)

if TYPE_CHECKING:
    from .codec import AsymK16V8Codec
    from .header import (
        EncodedKV,
        deserialize_header,
        serialize_header,
    )
    from .quant_fast import (
        compute_v_scales,
        dequantize_v_fp8,
        quantize_v_fp8,
    )

#: name -> the submodule that defines it, for the names imported on first use.
_LAZY = {
    "AsymK16V8Codec": "codec",
    "EncodedKV": "header",
    "deserialize_header": "header",
    "serialize_header": "header",
    "compute_v_scales": "quant_fast",
    "dequantize_v_fp8": "quant_fast",
    "quantize_v_fp8": "quant_fast",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CODEC_MAGIC",
    "AsymK16V8Codec",
    "CodecError",
    "CodecHashes",
    "CodecMismatchError",
    "CodecVersion",
    "CorruptEncodedKVError",
    "EncodedKV",
    "ScaleScheme",
    "ScaleScope",
    "UnsupportedConfigError",
    "compute_v_scales",
    "dequantize_v_fp8",
    "deserialize_header",
    "quantize_v_fp8",
    "serialize_header",
]
