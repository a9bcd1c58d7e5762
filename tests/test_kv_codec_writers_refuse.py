"""KV-ENCODE-REFUSE for every writer: serialize_header and to_bytes of an assembled EncodedKV
refuse what the reader rejects (upstream's newer test_encoded_kv_lengths.py expects
UnsupportedConfigError for negative lengths), and K-less blobs (KV-K-ABSENT) round-trip."""

from __future__ import annotations

import pytest
import torch

from lmckv.reference_impl.kv_codec import (
    AsymK16V8Codec,
    EncodedKV,
    ScaleScope,
    UnsupportedConfigError,
    deserialize_header,
    serialize_header,
)

F32_ONE = torch.ones((), dtype=torch.float32).numpy().tobytes()


def _enc(**fields: object) -> EncodedKV:
    base: dict[str, object] = {
        "k_dtype": torch.float16,
        "v_dtype": torch.float8_e4m3fn,
        "scale_scope": ScaleScope.PER_TENSOR,
        "k_payload_len": 16,
        "v_payload_len": 8,
        "scale_payload_len": 4,
        "payload": bytes(24) + F32_ONE,
    }
    base.update(fields)
    return EncodedKV(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"k_payload_len": -8, "v_payload_len": 32}, "KV-ENCODE-REFUSE"),
        ({"v_payload_len": -8, "k_payload_len": 32}, "KV-ENCODE-REFUSE"),
        ({"scale_payload_len": -4, "v_payload_len": 16}, "KV-ENCODE-REFUSE"),
        ({"k_payload_len": 18, "v_payload_len": 6}, "KV-ENCODE-REFUSE"),
        ({"k_payload_len": 24, "v_payload_len": 0}, "KV-K-ABSENT"),
        ({"k_dtype": torch.float32}, "KV-K-DTYPE"),
        ({"layer_id": -2}, "KV-IDS"),
    ],
    ids=["k-negative", "v-negative", "scale-negative", "k-v-counts", "v-absent", "k-f32", "id"],
)
def test_writers_refuse_what_readers_reject(fields: dict[str, object], rule: str) -> None:
    enc = _enc(**fields)
    with pytest.raises(UnsupportedConfigError) as err:
        serialize_header(enc)
    assert err.value.rule == rule
    with pytest.raises(UnsupportedConfigError):
        AsymK16V8Codec().to_bytes(_enc(**fields))


def test_assembled_k_less_blob_round_trips() -> None:
    enc = _enc(k_payload_len=0, payload=bytes(8) + F32_ONE)
    blob = AsymK16V8Codec().to_bytes(enc)
    parsed = deserialize_header(blob)
    assert not parsed.has_k and parsed.element_count == 8
    k, v, _ = AsymK16V8Codec().decode(parsed, out_v_dtype=torch.float16)
    assert k.numel() == 0 and k.dtype == torch.float16 and v.shape == (8,)


def test_encode_without_k_equals_the_blob_without_k() -> None:
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_LAYER_HEAD)
    v = torch.randn(6, 2, 4, dtype=torch.bfloat16)
    full = codec.encode(v.clone(), v, kv_head_count=2, head_dim=4)
    k_less = codec.encode(None, v, k_dtype=torch.bfloat16, kv_head_count=2, head_dim=4)
    assert k_less.k_payload_len == 0 and k_less.v_payload_len == full.v_payload_len
    assert bytes(k_less.payload) == bytes(full.payload)[full.k_payload_len :]
    with pytest.raises(UnsupportedConfigError):
        codec.encode(None, v)  # a K-less blob records k_dtype
