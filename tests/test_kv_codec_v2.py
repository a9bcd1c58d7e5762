"""The reference's v2 (RAW_UNIT) writer and reader, checked against the golden v2 blobs,
which the generator builds byte by byte without the reference (SPEC.md, "Encoded KV blob v2
(draft)"), and against zlib for the CRC of each version."""

from __future__ import annotations

import struct
import zlib

import pytest
import torch
from kv_blobs import paged_blob

from lmckv.conformance.core.golden_vectors import golden_file
from lmckv.reference_impl.kv_codec import (
    AsymK16V8Codec,
    CodecHashes,
    CodecVersion,
    CorruptEncodedKVError,
    EncodedKV,
    ScaleScheme,
    ScaleScope,
    UnsupportedConfigError,
    deserialize_header,
    serialize_header,
)

P_V = bytes.fromhex("38b8007e")
Q_K = struct.pack("<4H", 0x3F80, 0xC000, 0x3F00, 0x4040)


def _golden(name: str) -> bytes:
    return golden_file(f"v2/codec/{name}.bin")


def _raw_unit(k: bytes, v: bytes, **fields: object) -> EncodedKV:
    return EncodedKV(
        k_dtype=torch.bfloat16,
        v_dtype=torch.float8_e4m3fn,
        scale_scope=ScaleScope.NONE,
        scale_scheme=ScaleScheme.RAW_UNIT,
        k_payload_len=len(k),
        v_payload_len=len(v),
        payload=k + v,
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("name", "k", "v", "fields"),
    [
        ("kv2-raw_unit-none-v_only", b"", P_V, {}),
        ("kv2-raw_unit-none-kv-bf16", Q_K, P_V, {}),
        (
            "kv2-raw_unit-none-hashes",
            b"",
            P_V,
            {"hashes": CodecHashes(model_id="m", kv_layout="NHD")},
        ),
    ],
)
def test_raw_unit_writes_the_golden_v2_bytes(
    name: str, k: bytes, v: bytes, fields: dict[str, object]
) -> None:
    """KV2-SCHEME, KV2-CRC: asked for RAW_UNIT, the writer writes v2, byte for byte."""
    enc = _raw_unit(k, v, **fields)
    blob = serialize_header(enc) + enc.payload
    assert blob == _golden(name)
    assert bytes(AsymK16V8Codec().to_bytes(_raw_unit(k, v, **fields))) == blob


def test_v2_crc_covers_the_header_and_v1_crc_the_payload_only() -> None:
    v2 = _golden("kv2-raw_unit-none-v_only")
    assert struct.unpack_from("<I", v2, 209)[0] == zlib.crc32(v2[:209] + v2[213:])
    v1 = bytes(paged_blob())
    head = len(deserialize_header(v1).header_bytes or b"")
    assert struct.unpack_from("<HH", v1, 8)[0] == 1
    assert struct.unpack_from("<H", v1, 18)[0] == 0
    assert struct.unpack_from("<I", v1, head - 4)[0] == zlib.crc32(v1[head:])


def test_scale_aware_encode_stays_v1() -> None:
    """The codec quantizes: whatever its scope, it writes version 1 with slot 18 = 0."""
    k = torch.randn(2, 4, 2, 8, dtype=torch.float16)
    for scope in (ScaleScope.PER_TENSOR, ScaleScope.PER_LAYER_HEAD):
        blob = AsymK16V8Codec(scale_scope=scope).encode(k, k, kv_head_count=2, head_dim=8).blob
        assert blob is not None
        assert struct.unpack_from("<HHHHHH", blob, 8)[::5] == (1, 0)


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"scale_scope": ScaleScope.PER_PAGE_HEAD}, "KV-ENCODE-REFUSE"),
        ({"scale_scheme": ScaleScheme.COMPUTED_PER_TENSOR}, "KV-ENCODE-REFUSE"),
        ({"scale_shape": (1,)}, "KV-ENCODE-REFUSE"),
        ({"v_dtype": torch.float8_e5m2}, "KV-V-DTYPE"),
        ({"scale_scheme": 7}, "KV2-SCHEME"),
    ],
)
def test_writer_refuses_what_a_v2_reader_refuses(fields: dict[str, object], rule: str) -> None:
    """KV-ENCODE-REFUSE: RAW_UNIT goes with NONE and no scales, NONE with RAW_UNIT only."""
    enc = _raw_unit(b"", P_V)
    for name, value in fields.items():
        setattr(enc, name, value)
    with pytest.raises(UnsupportedConfigError) as err:
        serialize_header(enc)
    assert err.value.rule == rule


def test_the_quantizing_codec_refuses_scope_none() -> None:
    with pytest.raises(UnsupportedConfigError) as err:
        AsymK16V8Codec(scale_scope=ScaleScope.NONE)
    assert err.value.rule == "KV-SCOPE"


def test_every_single_bit_flip_of_a_v2_blob_is_refused() -> None:
    """KV2-CRC: no bit of a v2 blob can change unseen. Flips that leave every field valid
    (ids, geometry, dtypes, hash bytes, payload) are refused by the header CRC itself."""
    blob = _golden("kv2-raw_unit-none-geometry")
    head = len(deserialize_header(blob).header_bytes or b"")
    crc_rules = 0
    for offset in range(len(blob)):
        for bit in range(8):
            flipped = bytearray(blob)
            flipped[offset] ^= 1 << bit
            with pytest.raises(CorruptEncodedKVError) as err:
                deserialize_header(flipped)
            crc_rules += err.value.rule == "KV2-CRC"
    # Every payload bit, and more (ids, geometry, hash bytes), only the CRC can see.
    assert crc_rules > 8 * (len(blob) - head)


def test_v1_only_reader_refuses_every_v2_blob() -> None:
    with pytest.raises(CorruptEncodedKVError) as err:
        deserialize_header(_golden("kv2-raw_unit-none-v_only"), versions=(CodecVersion.V1,))
    assert err.value.rule == "KV-VERSION"
    assert deserialize_header(bytes(paged_blob()), versions=(CodecVersion.V1,)).version == 1


def test_raw_unit_decode_returns_the_codes_and_refuses_to_widen() -> None:
    """KV2-RAW-BYTES: NaN and -0 codes come back bit for bit; no scale, no widening."""
    codec = AsymK16V8Codec()
    enc = codec.from_bytes(bytearray(_golden("kv2-raw_unit-none-nan-codes")))
    assert (enc.version, enc.scale_scheme) == (CodecVersion.V2, ScaleScheme.RAW_UNIT)
    k, v, scales = codec.decode(enc)
    assert v.view(torch.uint8).tolist() == [0x7F, 0xFF, 0x80, 0x00]
    assert (k.numel(), scales.shape, scales.dtype) == (0, (0,), torch.float32)
    with pytest.raises(UnsupportedConfigError) as err:
        codec.decode(enc, out_v_dtype=torch.float16)
    assert err.value.rule == "KV2-RAW-BYTES"
