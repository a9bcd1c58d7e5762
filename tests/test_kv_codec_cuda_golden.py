"""The reference encodes every golden encode vector on a CUDA device to the golden bytes.

The golden set is generated on the CPU; the codec's device path (quantization on the GPU,
one copy to the host) must write the same blob, the vectors holding NaN or infinite values
included: a CUDA division gives Inf/Inf a positive NaN where x86 gives a negative one, and
the reference writes the sign SPEC.md fixes (Q-ROUND, Q-NONFINITE) on every device.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from lmckv.conformance.core.blob_model import HASH_KEYS
from lmckv.conformance.core.dtype_names import dtype_from_name
from lmckv.conformance.core.golden_vectors import golden_file, vectors
from lmckv.conformance.core.tensor_bytes import tensor_from_bytes
from lmckv.conformance.suite.codec_cases import encode_request
from lmckv.reference_impl.kv_codec import AsymK16V8Codec, CodecHashes, ScaleScope

ENCODE_VECTORS = [v for v in vectors("codec") if "encode" in v and v["result"] == "valid"]
META = ("layer_id", "chunk_id", "chunk_size", "page_size", "kv_head_count", "head_dim")


def encode_on(device: str, vector: dict[str, Any]) -> bytes:
    """The reference's blob for the vector's inputs, quantized on ``device``."""
    req = encode_request(vector)
    dtype = dtype_from_name(req["dtype"])
    assert dtype is not None
    k = tensor_from_bytes(req["k"], dtype, req["shape"]).to(device)
    v = tensor_from_bytes(req["v"], dtype, req["shape"]).to(device)
    codec = AsymK16V8Codec(
        scale_scope=ScaleScope(req["scale_scope"]),
        scale_dtype=dtype_from_name(req.get("scale_dtype")) or torch.float32,
    )
    kwargs: dict[str, Any] = {name: req[name] for name in META if req.get(name) is not None}
    kwargs["hashes"] = CodecHashes(**{h: req.get(h) or "" for h in HASH_KEYS})
    kwargs["head_axis"] = req.get("head_axis", -2)
    if req.get("page_axis") is not None:
        kwargs["page_axis"] = req["page_axis"]
    if "v_scales" in req:
        kwargs["precomputed_v_scales"] = tensor_from_bytes(
            req["v_scales"], torch.float32, req["scales_shape"]
        )
    return bytes(codec.to_bytes(codec.encode(k, v, **kwargs)))


def test_the_cpu_path_gives_the_golden_bytes() -> None:
    """The helper itself is right: on the CPU it reproduces every vector it selects."""
    assert len(ENCODE_VECTORS) > 50
    for vector in ENCODE_VECTORS:
        assert encode_on("cpu", vector) == golden_file(vector["blob"]), vector["id"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; none here")
@pytest.mark.parametrize("vector", ENCODE_VECTORS, ids=[v["id"] for v in ENCODE_VECTORS])
def test_cuda_encode_gives_the_golden_bytes(vector: dict[str, Any]) -> None:
    assert encode_on("cuda", vector) == golden_file(vector["blob"])
