"""The fuzz targets: every decoder of the reference, each with its documented error classes,
its round-trip oracle and the testee operation that decodes the same input.

A target's input is bytes. Targets whose decoder takes options read them from a first flag
byte (documented per target); text decoders read UTF-8, invalid bytes surviving as lone
surrogates (``surrogateescape``), which the testee wire carries as their 3-byte form.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from lmckv.base import untrusted_json as uj

from ...bench.accuracy import model_folder
from ...reference_impl import keys as rk
from ...reference_impl import kv_codec as kc
from ...reference_impl import protocol as rp
from ..core import blob_model
from ..core.digests import crc32
from . import connection, seeds, store_replies


class RoundTripError(AssertionError):
    """A valid input did not survive write-after-read (or an oracle disagreed)."""


class InputRejected(Exception):
    """The input was refused before it reached the decoder (JSON syntax of a text that must
    hold a JSON object): a rejection, not a failure."""


@dataclass(frozen=True, kw_only=True)
class Target:
    """One decoder under fuzzing; built with keywords only."""

    name: str
    summary: str
    #: Decode one input with the reference; the value is handed to ``check``.
    run: Callable[[bytes], Any]
    #: The only exception classes the decoder may raise (its documented errors).
    allowed: tuple[type[BaseException], ...]
    #: Oracles on an accepted input (round trip, semantics); raise RoundTripError.
    check: Callable[[bytes, Any], None]
    #: The testee operation and fields that decode the same input, or None.
    request: Callable[[bytes], tuple[str, dict[str, Any]] | None]
    seeds: Callable[[], list[bytes]]
    max_len: int = 4096
    #: Byte strings that mutators insert (and libFuzzer's dictionary).
    tokens: tuple[bytes, ...] = ()
    #: (offset, width) of integer fields of a seed, for field-aware mutation.
    fields: Callable[[bytes], list[tuple[int, int]]] = field(default=lambda data: [])
    #: Repair applied to some mutants so that they get past a checksum.
    fixup: Callable[[bytes], bytes] | None = None


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _require(cond: bool, what: str) -> None:
    if not cond:
        raise RoundTripError(what)


# -- codec ------------------------------------------------------------------------------------

HASH_NAMES = blob_model.HASH_KEYS
#: Expected-hash sets for codec.from_bytes, chosen by the flag byte.
EXPECTED_HASH_SETS: tuple[dict[str, str], ...] = (
    {},
    {"model_id": "m"},
    {"model_id": "other-model"},
    {"kv_layout": "NHD"},
    {"kv_layout": "HND", "model_id": "m"},
    {"tokenizer_hash": "t", "rope_config_hash": "r", "attention_backend": "a"},
)


def _header_fields(enc: kc.EncodedKV) -> tuple[Any, ...]:
    return (
        enc.k_dtype,
        enc.v_dtype,
        enc.scale_dtype,
        int(enc.scale_scope),
        enc.layer_id,
        enc.chunk_id,
        enc.chunk_size,
        enc.page_size,
        enc.kv_head_count,
        enc.head_dim,
        tuple(enc.scale_shape),
        enc.k_payload_len,
        enc.v_payload_len,
        enc.scale_payload_len,
        dataclasses.astuple(enc.hashes),
        bytes(enc.payload),
    )


def _canonical_hash_section(blob: bytes) -> bool:
    """The hash section holds exactly the six known keys, in writing order, and no dtype
    uses the legacy float16 id (KV-DTYPE-ALIAS): then the writer reproduces the header byte
    for byte (SPEC.md, "Blob header": the canonical header)."""
    found = blob_model.layout(blob)
    if found.header_len is None:
        return False
    if found.int_value("k_dtype_id") == 1 or found.int_value("scale_dtype_id") == 1:
        return False
    keys = [f.value for f in found.fields if f.name.endswith(".key")]
    return found.int_value("hash_count") == len(HASH_NAMES) and keys == [
        name.encode() for name in HASH_NAMES
    ]


def _check_header(blob: bytes, enc: kc.EncodedKV) -> None:
    """Write-after-read: re-serializing the fields gives a blob that parses to the same
    fields, and gives the input's own bytes when the input is canonical."""
    copy = dataclasses.replace(enc, header_bytes=None, blob=None)
    header = kc.serialize_header(copy)
    rewritten = header + bytes(enc.payload)
    again = kc.deserialize_header(rewritten)
    _require(
        _header_fields(again) == _header_fields(enc), "re-serialized header reads back different"
    )
    end = len(enc.header_bytes or b"") + len(enc.payload)
    if _canonical_hash_section(blob):
        _require(rewritten == blob[:end], "canonical blob does not re-serialize to its own bytes")
    # KV-CRC: v1 covers the payload; KV2-CRC: v2 the header bytes before the CRC, then it.
    covered = bytes(enc.payload) if enc.version == 1 else header[:-4] + bytes(enc.payload)
    _require(
        crc32(covered) == blob_model.layout(rewritten).int_value("crc"),
        "CRC of what the version covers differs from the stored one",
    )


def _blob_offsets(blob: bytes) -> list[tuple[int, int]]:
    """Integer fields of a blob header (KV-LAYOUT), as far as the buffer holds them."""
    return [(f.offset, f.size) for f in blob_model.layout(blob).fields if isinstance(f.value, int)]


def _fix_crc(data: bytes) -> bytes:
    """Recompute the CRC of a (flag byte +) blob whose header is whole and whose payload
    lengths are not negative (over what its version's CRC covers), so that payload and
    length mutations reach the checks after KV-CRC's and KV2-CRC's."""
    flag, blob = data[:1], bytearray(data[1:])
    found = blob_model.layout(blob)
    if found.payload is None:
        return data
    covered = bytes(blob[found.payload])
    if found.int_value("version") == 2:  # KV2-CRC: the header bytes before the CRC too
        covered = bytes(blob[: found.field("crc").offset]) + covered
    found.field("crc").put(blob, crc32(covered))
    return flag + bytes(blob)


CODEC_TOKENS = (
    kc.CODEC_MAGIC,
    b"model_id",
    b"kv_layout",
    b"NHD",
    b"HND",
    b"tokenizer_hash",
    b"\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\x00\x00\x00\x00\x00\x00\x00\x80",
    b"\xff\xff\xff\xff\xff\xff\xff\x7f",
    b"\x06\x00",
    b"\x01\x00",
)


def _flagged_seeds(flags: tuple[int, ...]) -> Callable[[], list[bytes]]:
    def make() -> list[bytes]:
        return [bytes([f]) + blob for blob in seeds.codec_blobs() for f in flags]

    return make


def _flag_offsets(data: bytes) -> list[tuple[int, int]]:
    return [(o + 1, w) for o, w in _blob_offsets(data[1:])] + [(0, 1)]


def _run_header(data: bytes) -> kc.EncodedKV:
    return kc.deserialize_header(data[1:], allow_trailing=bool(data[:1] and data[0] & 1))


def _request_header(data: bytes) -> tuple[str, dict[str, Any]]:
    return "codec.parse", {"blob": data[1:], "allow_trailing": bool(data[:1] and data[0] & 1)}


def _expected(data: bytes) -> dict[str, str]:
    return EXPECTED_HASH_SETS[data[0] % len(EXPECTED_HASH_SETS)] if data else {}


_CODEC = kc.AsymK16V8Codec()


def _run_from_bytes(data: bytes) -> kc.EncodedKV:
    expected = _expected(data)
    hashes = kc.CodecHashes(**expected) if expected else None
    return _CODEC.from_bytes(data[1:], expected_hashes=hashes)


def _check_from_bytes(data: bytes, enc: kc.EncodedKV) -> None:
    """KV-HASH-GATE oracle: an accepted blob has no non-empty stored hash that differs from
    a non-empty expected one."""
    _check_header(data[1:], enc)
    for name, want in _expected(data).items():
        got = getattr(enc.hashes, name)
        _require(
            not (want and got and want != got), f"hash gate let {name} {got!r} != {want!r} pass"
        )


def _request_from_bytes(data: bytes) -> tuple[str, dict[str, Any]]:
    fields: dict[str, Any] = {"blob": data[1:]}
    fields.update({f"expect_{k}": v for k, v in _expected(data).items()})
    return "codec.parse", fields


def _run_decode(data: bytes) -> tuple[kc.EncodedKV, tuple[torch.Tensor, ...], Any]:
    enc = _CODEC.from_bytes(data[1:])
    plain = _CODEC.decode(enc)
    dequant = _CODEC.decode(enc, out_v_dtype=torch.float16)[1] if data[0] & 1 else None
    return enc, plain, dequant


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _raw(t: torch.Tensor) -> bytes:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _check_decode(data: bytes, value: Any) -> None:
    """KV-PAYLOAD: decode returns exactly the stored sections; the logical shape holds every
    element (K's too, unless the blob has no K: KV-K-ABSENT); no output tensor is larger
    than the input allows (torch allocation check)."""
    enc, (k, v, scales), dequant = value
    payload = bytes(enc.payload)
    kl, vl = enc.k_payload_len, enc.v_payload_len
    _require(_raw(k) == payload[:kl], "K bytes differ")
    _require(_raw(v) == payload[kl : kl + vl], "V bytes differ")
    _require(_raw(scales) == payload[kl + vl :], "scale bytes differ")
    if enc.has_k:
        _require(k.shape == v.shape, "K and V shapes differ")
    else:  # KV-K-ABSENT: no K section, K is an empty 1-D tensor of the recorded k_dtype
        _require(k.numel() == 0 and k.dim() == 1, "a K-less blob decoded to a non-empty K")
    outputs = [k, v, scales] + ([dequant] if dequant is not None else [])
    total = sum(_nbytes(t) for t in outputs)
    _require(total <= 4 * len(data) + 4096, f"decode returned {total} bytes for {len(data)}")
    if dequant is not None:
        _require(
            dequant.shape == v.shape and dequant.dtype == torch.float16,
            "dequantized V has another shape or dtype",
        )


def _request_decode(data: bytes) -> tuple[str, dict[str, Any]]:
    return "codec.decode", {"blob": data[1:], "out_v_dtype": None}


# -- protocol ---------------------------------------------------------------------------------


def _hash_has_leading_zero(key_field: bytes) -> bool:
    parts = key_field.rstrip(b" ").split(b"@")
    return len(parts) > 3 and len(parts[3]) > 1 and parts[3][:1] == b"0"


def _check_client(data: bytes, msg: rp.ClientMetaMessage) -> None:
    again = msg.serialize()
    _require(
        rp.ClientMetaMessage.deserialize(again) == msg, "re-serialized message reads back different"
    )
    canonical = struct.unpack_from("<i", data, 12)[0] != 1 and not _hash_has_leading_zero(data[36:])
    if canonical:
        _require(again == data, "canonical ClientMetaMessage does not re-serialize to its bytes")


def _check_server(data: bytes, msg: rp.ServerMetaMessage) -> None:
    again = msg.serialize()
    _require(
        rp.ServerMetaMessage.deserialize(again) == msg, "re-serialized message reads back different"
    )
    if struct.unpack_from("<i", data, 12)[0] != 1:
        _require(again == data, "canonical ServerMetaMessage does not re-serialize to its bytes")


def _groups(data: bytes) -> int:
    return 1 + (data[0] % 8) if data else 1


def _run_remote(data: bytes) -> rp.RemoteMetadata:
    rp.init_remote_metadata_info(_groups(data))
    return rp.RemoteMetadata.deserialize(data[1:])


def _check_remote(data: bytes, meta: rp.RemoteMetadata) -> None:
    n = _groups(data)
    again = meta.serialize()
    _require(
        rp.RemoteMetadata.deserialize(again, num_groups=n) == meta,
        "re-serialized RemoteMetadata reads back different",
    )
    ids = [struct.unpack_from("<i", data, 1 + 8 + 20 * g)[0] for g in range(n)]
    if 1 not in ids:
        _require(again == data[1 : 1 + 8 + 20 * n], "canonical RemoteMetadata changed its bytes")


def _int32_offsets(data: bytes) -> list[tuple[int, int]]:
    return [(o, 4) for o in range(0, min(len(data) - 3, 36), 4)]


def _remote_offsets(data: bytes) -> list[tuple[int, int]]:
    return [(0, 1)] + [(o, 4) for o in range(1, len(data) - 3, 4)]


PROTO_TOKENS = (
    b"@",
    b"%",
    b" ",
    b"\x00",
    b"half",
    b"bfloat16",
    b"\xc8\x00\x00\x00",
    b"\x90\x01\x00\x00",
    b"\xff\xff\xff\xff",
    b"\x00\x00\x00\x80",
    b"\xff\xff\xff\x7f",
    b"\x01\x00\x00\x00",
)


# -- keys -------------------------------------------------------------------------------------


def _check_cache_key(data: bytes, key: rp.CacheEngineKey) -> None:
    text = key.to_string()
    _require(rp.parse_cache_key(text) == key, "key string reads back as another key")
    if not _hash_has_leading_zero(data):
        _require(text == _text(data), "canonical key string does not re-serialize to itself")


def _check_s3(data: bytes, key: rk.ObjectKey) -> None:
    _require(rk.object_key_to_string(key) == _text(data), "object name is not one-to-one")


def _run_fs(data: bytes) -> rk.ObjectKey | None:
    """filename_to_object_key, checked against parse_object_key_filename: the first returns
    None exactly when the second raises (KEY-FS-FORM)."""
    text = _text(data)
    key = rk.filename_to_object_key(text)
    try:
        parsed: rk.ObjectKey | None = rk.parse_object_key_filename(text)
    except rk.KeyFormatError:
        parsed = None
    _require(parsed == key, "filename_to_object_key and parse_object_key_filename disagree")
    return key


def _check_fs(data: bytes, key: rk.ObjectKey | None) -> None:
    if key is None:
        return
    try:
        name = rk.object_key_to_filename(key)
    except rk.UnrepresentableObjectKeyError as exc:
        # KEY-FS-NAME-MAX binds writers only: a reader may accept a longer name
        if len(data) <= 255:
            what = "the writer refuses a filename the reader accepts"
            raise RoundTripError(f"{what}\n{exc}") from None
        return
    _require(name == _text(data), "filename is not one-to-one")


def _run_encoded(data: bytes) -> rk.ObjectKey:
    try:
        obj = json.loads(_text(data))
    except (ValueError, RecursionError) as exc:
        raise InputRejected(f"not JSON: {type(exc).__name__}") from None
    return rk.EncodedObjectKey.from_json_dict(obj).to_object_key()


def _check_encoded(data: bytes, key: rk.ObjectKey) -> None:
    again = rk.EncodedObjectKey.from_json_dict(key.to_encoded_object_key().to_json_dict())
    _require(again.to_object_key() == key, "EncodedObjectKey JSON does not round-trip")


KEY_TOKENS = (
    b"@",
    b"%",
    b"/",
    b"\\",
    b"\x00",
    b" ",
    b"-SEP-",
    b"0x",
    b".data",
    b"-",
    b"_",
    b"+",
    b"\xc3\xa9",
    b"\xed\xa0\x80",
    b"0123456789abcdef",
    b"ffffffff",
    b"00000000",
    b"half",
    b"fp8_e4m3fn",
    b"bfloat16",
    b"9223372036854775807",
    b"-9223372036854775808",
    b'"kv_rank": ',
    b'"object_group_id": ',
    b'"cache_salt": ',
    b'"chunk_hash_hex": ',
    b'"model_name": ',
    b"true",
    b"null",
    b"1.5",
    b"NaN",
    b"\\u0000",
    b"\\ud800",
)


def _text_seeds(op: str, fieldname: str) -> Callable[[], list[bytes]]:
    def make() -> list[bytes]:
        return [t.encode("utf-8", "surrogatepass") for t in seeds.key_texts(op, fieldname)]

    return make


def _text_request(op: str, fieldname: str) -> Callable[[bytes], tuple[str, dict[str, Any]]]:
    def make(data: bytes) -> tuple[str, dict[str, Any]]:
        return op, {fieldname: _text(data)}

    return make


#: Small limits, so that the fuzzer reaches every one of them within max_len.
FUZZ_JSON_LIMITS = uj.JSONLimits(
    max_bytes=2048, max_depth=8, max_number_chars=24, max_string_chars=256, max_items=128
)
JSON_TOKENS = (b"[", b"]", b"{", b"}", b'"', b"\\", b'\\"', b":", b",", b"-0.5e+308", b"NaN",
               b"Infinity", b"\\ud800", b"\\u0000", b"true", b"null", b"9" * 30)  # fmt: skip


def _check_json(data: bytes, value: Any) -> None:
    """An accepted document is one Python's json reads to the same value (the reader only
    refuses, it never reads otherwise)."""
    _require(json.loads(data) == value, "the bounded reader and json.loads disagree")


def _json_seeds() -> list[bytes]:
    return [
        b"{}", b'[1, 2.5, "x", null, true, false]', b'{"a": {"b": [1e10, -0.0, "\\u00e9"]}}',
        b'"\\ud800"', b"[[[[[[[1]]]]]]]", b'{"k": "' + b"v" * 200 + b'"}',
    ]  # fmt: skip


def _safetensors_seed(tensors: dict[str, tuple[str, list[int], int]]) -> bytes:
    """A safetensors file: header length, header JSON, then the tensors' bytes (zeros)."""
    header, offset = {}, 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps({"__metadata__": {"format": "pt"}, **header}).encode()
    return len(raw).to_bytes(8, "little") + raw + bytes(offset)


def _check_safetensors(data: bytes, tensors: dict[str, tuple[str, int]]) -> None:
    """An accepted header describes exactly the bytes after it: the elements of its tensors,
    at their dtypes' sizes, fill the rest of the file."""
    length = int.from_bytes(data[:8], "little")
    total = sum(n * model_folder.ST_ITEMSIZE[dtype] for dtype, n in tensors.values())
    _require(total == len(data) - 8 - length, "the tensors do not fill the data")


_PROTO_ERRORS: tuple[type[BaseException], ...] = (rp.ProtocolError,)
_KEY_ERRORS: tuple[type[BaseException], ...] = (rk.KeyFormatError,)

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            name="codec.deserialize_header",
            summary="kv_codec.deserialize_header; flag bit 0 = allow_trailing",
            run=_run_header,
            allowed=(kc.CorruptEncodedKVError,),
            check=lambda d, v: _check_header(d[1:], v),
            request=_request_header,
            seeds=_flagged_seeds((0, 1)),
            max_len=8192,
            tokens=CODEC_TOKENS,
            fields=_flag_offsets,
            fixup=_fix_crc,
        ),
        Target(
            name="codec.from_bytes",
            summary="AsymK16V8Codec.from_bytes with the expected hashes the flag byte selects",
            run=_run_from_bytes,
            allowed=(kc.CorruptEncodedKVError, kc.CodecMismatchError),
            check=_check_from_bytes,
            request=_request_from_bytes,
            seeds=_flagged_seeds((0, 1, 2, 3, 4, 5)),
            max_len=8192,
            tokens=CODEC_TOKENS,
            fields=_flag_offsets,
            fixup=_fix_crc,
        ),
        Target(
            name="codec.decode",
            summary="from_bytes + decode; flag bit 0 = also dequantize V to float16",
            run=_run_decode,
            allowed=(kc.CorruptEncodedKVError, kc.UnsupportedConfigError),
            check=_check_decode,
            request=_request_decode,
            seeds=_flagged_seeds((0, 1)),
            max_len=8192,
            tokens=CODEC_TOKENS,
            fields=_flag_offsets,
            fixup=_fix_crc,
        ),
        Target(
            name="proto.client",
            summary="ClientMetaMessage.deserialize (186 bytes)",
            run=rp.ClientMetaMessage.deserialize,
            allowed=_PROTO_ERRORS,
            check=_check_client,
            request=lambda d: ("proto.client.read", {"msg": d}),
            seeds=lambda: list(seeds.protocol_messages("client")),
            max_len=512,
            tokens=PROTO_TOKENS,
            fields=_int32_offsets,
        ),
        Target(
            name="proto.server",
            summary="ServerMetaMessage.deserialize (36 bytes)",
            run=rp.ServerMetaMessage.deserialize,
            allowed=_PROTO_ERRORS,
            check=_check_server,
            request=lambda d: ("proto.server.read", {"msg": d}),
            seeds=lambda: list(seeds.protocol_messages("server")),
            max_len=128,
            tokens=PROTO_TOKENS,
            fields=_int32_offsets,
        ),
        Target(
            name="proto.server.connection",
            summary="the server's connection handler under a budget; capacity = first byte % 4",
            run=connection.run,
            allowed=(),
            check=connection.check,
            request=lambda d: None,
            seeds=connection.seeds,
            max_len=8192,
            tokens=PROTO_TOKENS,
        ),
        Target(
            name="proto.remote",
            summary="RemoteMetadata.deserialize; num_groups = 1 + first byte % 8",
            run=_run_remote,
            allowed=_PROTO_ERRORS,
            check=_check_remote,
            request=lambda d: ("proto.remote.read", {"num_groups": _groups(d), "msg": d[1:]}),
            seeds=lambda: [bytes([(n - 1) % 8]) + m for n, m in seeds.remote_group_counts()],
            max_len=512,
            tokens=PROTO_TOKENS,
            fields=_remote_offsets,
        ),
        Target(
            name="key.cache",
            summary="parse_cache_key (CacheEngineKey / LayerCacheEngineKey strings)",
            run=lambda d: rp.parse_cache_key(_text(d)),
            allowed=(rp.CacheKeyError,),
            check=_check_cache_key,
            request=_text_request("key.cache.read", "key"),
            seeds=_text_seeds("key.cache.read", "key"),
            max_len=512,
            tokens=KEY_TOKENS,
        ),
        Target(
            name="key.s3",
            summary="string_to_object_key (S3 / native-connector object names)",
            run=lambda d: rk.string_to_object_key(_text(d)),
            allowed=_KEY_ERRORS,
            check=_check_s3,
            request=_text_request("key.s3.read", "object_name"),
            seeds=_text_seeds("key.s3.read", "object_name"),
            max_len=512,
            tokens=KEY_TOKENS,
        ),
        Target(
            name="key.fs",
            summary="filename_to_object_key (FS adapter filenames; None = not a key file)",
            run=_run_fs,
            allowed=_KEY_ERRORS,
            check=_check_fs,
            request=_text_request("key.fs.read", "filename"),
            seeds=_text_seeds("key.fs.read", "filename"),
            max_len=512,
            tokens=KEY_TOKENS,
        ),
        Target(
            name="key.encoded",
            summary="json.loads + EncodedObjectKey.from_json_dict + to_object_key",
            run=_run_encoded,
            allowed=_KEY_ERRORS,
            check=_check_encoded,
            request=_text_request("key.encoded.read", "json_text"),
            seeds=_text_seeds("key.encoded.read", "json_text"),
            max_len=1024,
            tokens=KEY_TOKENS,
        ),
        Target(
            name="json.untrusted",
            summary="untrusted_json.loads: the one JSON reader for peers and files (small limits)",
            run=lambda d: uj.loads(d, FUZZ_JSON_LIMITS, what="fuzz input"),
            allowed=(uj.UntrustedJSONError,),
            check=_check_json,
            request=lambda d: None,
            seeds=_json_seeds,
            max_len=2048,
            tokens=JSON_TOKENS,
        ),
        Target(
            name="model.safetensors-header",
            summary="model_folder.parse_header: a model folder's weights header, as loaded",
            run=lambda d: model_folder.parse_header(d, len(d), "fuzz.safetensors"),
            allowed=(model_folder.ModelUnusable,),
            check=_check_safetensors,
            request=lambda d: None,
            seeds=lambda: [
                _safetensors_seed({"w": ("F32", [2, 2], 16), "b": ("BF16", [3], 6)}),
                _safetensors_seed({"e": ("I8", [0], 0)}),
            ],
            max_len=2048,
            tokens=(*JSON_TOKENS, b'"dtype"', b'"shape"', b'"data_offsets"', b'"F16"'),
        ),
        Target(
            name="store.resp-replies",
            summary="fsck's RESP listing and reads (redis-py's parse) of a server's replies",
            run=store_replies.run_resp,
            allowed=store_replies.ALLOWED,
            check=lambda data, value: None,
            request=lambda d: None,
            seeds=lambda: list(store_replies.RESP_SEEDS),
            max_len=2048,
            tokens=store_replies.RESP_TOKENS,
        ),
        Target(
            name="store.s3-listing",
            summary="fsck's S3 listing (botocore's parse) of a ListObjectsV2 body",
            run=store_replies.run_s3,
            allowed=store_replies.ALLOWED,
            check=lambda data, value: None,
            request=lambda d: None,
            seeds=lambda: list(store_replies.S3_SEEDS),
            max_len=2048,
            tokens=store_replies.S3_TOKENS,
        ),
    )
}
