"""The encoded-KV blob v1 and its AsymK16V8 codec; the names of ``lmcache.v1.kv_codec``."""

from lmckv.reference_impl.kv_codec.codec import AsymK16V8Codec
from lmckv.reference_impl.kv_codec.errors import (
    CodecError,
    CodecMismatchError,
    CorruptEncodedKVError,
    UnsupportedConfigError,
)
from lmckv.reference_impl.kv_codec.header import (
    CODEC_MAGIC,
    CodecHashes,
    CodecVersion,
    EncodedKV,
    ScaleScope,
    deserialize_header,
    serialize_header,
)
from lmckv.reference_impl.kv_codec.quant_fast import (
    compute_v_scales,
    dequantize_v_fp8,
    quantize_v_fp8,
)

__all__ = [
    "CODEC_MAGIC",
    "AsymK16V8Codec",
    "CodecError",
    "CodecHashes",
    "CodecMismatchError",
    "CodecVersion",
    "CorruptEncodedKVError",
    "EncodedKV",
    "ScaleScope",
    "UnsupportedConfigError",
    "compute_v_scales",
    "dequantize_v_fp8",
    "deserialize_header",
    "quantize_v_fp8",
    "serialize_header",
]
