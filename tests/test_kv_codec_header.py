"""The strict reader: every rule it enforces raises the codec's typed error, nothing else."""

from __future__ import annotations

import contextlib
import dataclasses
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from kv_blobs import paged_blob, read_lens, with_field, with_lens

from lmckv.conformance.core.blob_model import layout
from lmckv.reference_impl.dtype_table import ITEMSIZE
from lmckv.reference_impl.kv_codec import (
    CODEC_MAGIC,
    AsymK16V8Codec,
    CodecError,
    CodecHashes,
    CodecMismatchError,
    CodecVersion,
    CorruptEncodedKVError,
    EncodedKV,
    ScaleScope,
    deserialize_header,
    header,
    header_fields,
    serialize_header,
)
from lmckv.reference_impl.kv_codec.header import check_consistency

CODEC = AsymK16V8Codec()


def corrupt(blob: bytes | bytearray, match: str) -> None:
    with pytest.raises(CorruptEncodedKVError, match=match):
        deserialize_header(blob)


def test_valid_blob_parses_with_payload_as_view() -> None:
    blob = paged_blob()
    enc = deserialize_header(blob)
    assert isinstance(enc.payload, memoryview)
    assert enc.payload.obj is blob
    assert enc.total_bytes == len(blob)
    assert serialize_header(enc) == enc.header_bytes


def test_truncation_at_every_offset_is_corrupt() -> None:
    blob = bytes(paged_blob(pages=1, page_size=2, heads=1, head_dim=4))
    for cut in range(len(blob)):
        with pytest.raises(CorruptEncodedKVError):
            deserialize_header(blob[:cut])


@pytest.mark.parametrize("index", range(8))
def test_magic_bytes(index: int) -> None:
    blob = paged_blob()
    blob[index] ^= 0x20
    corrupt(blob, "bad magic")


@pytest.mark.parametrize("version", [0, 3, 0xFFFF])
def test_version(version: int) -> None:
    corrupt(with_field(paged_blob(), "version", version), "version")


def test_scale_aware_blob_relabelled_v2_is_refused_by_both_readers() -> None:
    """A v1 blob whose version says 2: the v2 reader refuses its scheme slot (0, a v2 blob
    is RAW_UNIT), the v1-only reader its version; neither reads it as a v1 blob."""
    blob = with_field(paged_blob(), "version", 2)
    with pytest.raises(CorruptEncodedKVError) as v2:
        deserialize_header(blob)
    assert v2.value.rule == "KV2-SCHEME"
    with pytest.raises(CorruptEncodedKVError, match="version 2; this reader reads 1") as v1:
        deserialize_header(blob, versions=(CodecVersion.V1,))
    assert v1.value.rule == "KV-VERSION"


@pytest.mark.parametrize("scope", [4, 0xFFFF])
def test_unknown_scope(scope: int) -> None:
    corrupt(with_field(paged_blob(), "scale_scope", scope), "scale_scope")


@pytest.mark.parametrize(
    ("name", "dtype_id"),
    [
        ("k_dtype", 9),
        ("k_dtype", 0),
        ("k_dtype", 4),
        ("v_dtype", 2),
        ("v_dtype", 8),
        ("scale_dtype", 6),
        ("scale_dtype", 0xFFFF),
    ],
)
def test_dtype_ids(name: str, dtype_id: int) -> None:
    corrupt(with_field(paged_blob(), f"{name}_id", dtype_id), name)


def test_legacy_half_id_reads_as_float16() -> None:
    enc = deserialize_header(with_field(paged_blob(), "k_dtype_id", 1))
    assert enc.k_dtype == torch.float16


def test_reserved_must_be_zero() -> None:
    corrupt(with_field(paged_blob(), "reserved", 1), "reserved")


@pytest.mark.parametrize(
    ("name", "value"),
    [("layer_id", -2), ("chunk_id", -(2**63)), ("page_size", 0), ("head_dim", -5)],
)
def test_geometry_fields(name: str, value: int) -> None:
    corrupt(with_field(paged_blob(), name, value), name)


@pytest.mark.parametrize("n", [9, -1, 2**62])
def test_scale_shape_n_bounds(n: int) -> None:
    corrupt(with_field(paged_blob(), "scale_shape_n", n), "scale_shape_n")


def test_negative_scale_dim() -> None:
    corrupt(with_field(paged_blob(), "scale_shape[0]", -2), "negative dimension")


def test_negative_payload_length() -> None:
    blob = paged_blob()
    k, v, s = read_lens(blob)
    corrupt(with_lens(blob, -k, v + 2 * k, s), "negative")


def test_k_length_not_whole_elements() -> None:
    blob = paged_blob()
    k, v, s = read_lens(blob)
    corrupt(with_lens(blob, k - 1, v + 1, s), "multiple")


def test_k_and_v_element_counts_disagree_with_valid_crc() -> None:
    blob = paged_blob()
    k, v, s = read_lens(blob)
    corrupt(with_lens(blob, k + 2, v - 2, s), "K holds")


def test_scale_length_disagrees_with_scale_shape() -> None:
    blob = paged_blob(scope=ScaleScope.PER_TENSOR)
    k, v, s = read_lens(blob)
    corrupt(with_lens(blob, k - 4, v, s + 4), "scale_payload_len|K holds|multiple")


def test_scale_shape_disagrees_with_kv_head_count() -> None:
    corrupt(with_field(paged_blob(heads=2), "kv_head_count", 4), "kv_head_count|tokens")


def test_pages_disagree_with_page_size() -> None:
    corrupt(with_field(paged_blob(), "page_size", 2), "page_size")


def test_huge_declared_lengths_fail_fast_without_allocating() -> None:
    blob = paged_blob()
    start = time.perf_counter()
    corrupt(with_lens(blob, 2**62, 2**62, 8), "truncated|K holds|scale_payload_len")
    assert time.perf_counter() - start < 0.5


def test_trailing_bytes_rejected_unless_allowed() -> None:
    blob = paged_blob() + b"\0" * 7
    corrupt(blob, "follow the payload")
    enc = deserialize_header(blob, allow_trailing=True)
    assert enc.total_bytes == len(blob) - 7
    assert CODEC.from_bytes(blob, allow_trailing=True).total_bytes == len(blob) - 7


def test_crc_covers_every_payload_byte() -> None:
    blob = paged_blob(pages=1, page_size=1, heads=1, head_dim=2)
    head = len(deserialize_header(blob).header_bytes or b"")
    for i in range(head, len(blob)):
        bad = bytearray(blob)
        bad[i] ^= 0x01
        corrupt(bad, "CRC")


def test_crc_is_zlib_ieee_of_payload_only() -> None:
    blob = paged_blob()
    enc = deserialize_header(blob)
    assert layout(blob).int_value("crc") == zlib.crc32(enc.payload)


def _hash_blob(**hashes: str) -> bytearray:
    return paged_blob(hashes=CodecHashes(**hashes))


def test_hash_strings_round_trip_utf8() -> None:
    hashes = CodecHashes(model_id="Qwen/Qwen3-8B", kv_layout="NHD", tokenizer_hash="é🙂")
    assert deserialize_header(_hash_blob(**vars(hashes))).hashes == hashes


def test_non_utf8_hash_string() -> None:
    blob = _hash_blob(model_id="xx")
    at = bytes(blob).index(b"xx")
    blob[at] = 0xFF
    corrupt(blob, "UTF-8")


def _with_hash_pairs(pairs: list[tuple[bytes, bytes]]) -> bytes:
    """A valid blob whose hash section is replaced by ``pairs`` (raw key/value bytes)."""
    blob = bytes(paged_blob())
    found = layout(blob)
    section = struct.pack("<H", len(pairs)) + b"".join(
        struct.pack("<H", len(k)) + k + struct.pack("<H", len(v)) + v for k, v in pairs
    )
    return blob[: found.field("hash_count").offset] + section + blob[found.field("crc").offset :]


def test_hash_section_may_be_short_and_reordered() -> None:
    enc = deserialize_header(_with_hash_pairs([(b"kv_layout", b"HND"), (b"model_id", b"m")]))
    assert enc.hashes == CodecHashes(model_id="m", kv_layout="HND")
    assert deserialize_header(_with_hash_pairs([])).hashes == CodecHashes()


def test_duplicate_hash_key() -> None:
    corrupt(_with_hash_pairs([(b"model_id", b"a"), (b"model_id", b"b")]), "twice")


def test_hash_count_beyond_the_pairs_present() -> None:
    blob = with_field(_with_hash_pairs([(b"model_id", b"a")]), "hash_count", 0xFFFF)
    corrupt(blob, "truncated|declares|twice|UTF-8")


def test_hash_gate() -> None:
    blob = _hash_blob(model_id="a", kv_layout="NHD")
    CODEC.from_bytes(blob, expected_hashes=CodecHashes(model_id="a"))
    CODEC.from_bytes(blob, expected_hashes=CodecHashes(tokenizer_hash="anything"))
    with pytest.raises(CodecMismatchError, match="model_id"):
        CODEC.from_bytes(blob, expected_hashes=CodecHashes(model_id="b"))
    with pytest.raises(CodecMismatchError, match="kv_layout"):
        CODEC.from_bytes(blob, expected_hashes=CodecHashes(kv_layout="HND"))


def test_unknown_hash_keys_are_ignored() -> None:
    enc = deserialize_header(_with_hash_pairs([(b"model_id", b"m"), (b"future_key", b"x")]))
    assert enc.hashes == CodecHashes(model_id="m")


@given(st.binary(max_size=400))
def test_arbitrary_bytes_raise_only_codec_errors(data: bytes) -> None:
    with contextlib.suppress(CodecError):
        deserialize_header(CODEC_MAGIC + data)


@given(st.data())
def test_mutated_blobs_raise_only_codec_errors(data: st.DataObject) -> None:
    blob = paged_blob(pages=1, page_size=2, heads=1, head_dim=4)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    with contextlib.suppress(CodecError):
        enc = CODEC.from_bytes(blob[:cut])
        CODEC.decode(enc, out_v_dtype=torch.float32)


@given(
    layer_id=st.integers(-1, 2**63 - 1),
    chunk_id=st.integers(-1, 2**63 - 1),
    chunk_size=st.one_of(st.just(-1), st.integers(1, 2**63 - 1)),
    model_id=st.text(max_size=40),
    attention_backend=st.text(max_size=20),
)
def test_header_fields_round_trip(
    layer_id: int, chunk_id: int, chunk_size: int, model_id: str, attention_backend: str
) -> None:
    enc = EncodedKV(
        k_dtype=torch.bfloat16,
        v_dtype=torch.float8_e4m3fn,
        scale_scope=ScaleScope.PER_TENSOR,
        hashes=CodecHashes(model_id=model_id, attention_backend=attention_backend),
        layer_id=layer_id,
        chunk_id=chunk_id,
        chunk_size=chunk_size,
        k_payload_len=4,
        v_payload_len=2,
        scale_payload_len=4,
        payload=b"\1\2\3\4\5\6\0\0\x80\x3f",
    )
    blob = serialize_header(enc) + bytes(enc.payload)
    back = deserialize_header(blob)
    for name in ("layer_id", "chunk_id", "chunk_size", "hashes", "k_dtype", "scale_shape"):
        assert getattr(back, name) == getattr(enc, name)
    assert bytes(back.payload) == enc.payload


def test_hash_sets_beyond_the_recently_parsed_ones_read_correctly() -> None:
    """The reader keeps the last few hash sections it parsed; cycling through more sets
    than it keeps, and back, must always give each blob its own values."""
    blobs = [paged_blob(hashes=CodecHashes(model_id=f"m{i}", kv_layout="NHD")) for i in range(7)]
    for _ in range(3):
        for i, blob in enumerate(blobs):
            hashes = deserialize_header(blob).hashes
            assert (hashes.model_id, hashes.kv_layout, hashes.tokenizer_hash) == (
                f"m{i}",
                "NHD",
                "",
            )


def test_a_recently_parsed_hash_section_with_one_byte_changed_is_read_afresh() -> None:
    blob = paged_blob(hashes=CodecHashes(model_id="model-a"))
    assert deserialize_header(blob).hashes.model_id == "model-a"
    at = bytes(blob).index(b"model-a") + len("model-")
    changed = bytearray(blob)
    changed[at : at + 1] = b"b"  # the CRC covers the payload only, so this stays valid
    assert deserialize_header(changed).hashes.model_id == "model-b"
    cut = bytes(blob).index(b"model-a") + 3
    corrupt(blob[:cut], "truncated|declares")


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("k_dtype", torch.float32),  # K now holds half as many elements as V
        ("layer_id", -2),
        ("chunk_size", 0),
        ("page_size", 3),
        ("kv_head_count", 3),
        ("head_dim", 0),
        ("scale_shape", (2, 3)),
        ("k_payload_len", 6),
        ("v_payload_len", 7),
        ("scale_payload_len", 5),
        ("scale_scope", ScaleScope.PER_TENSOR),
        ("scale_dtype", torch.float16),
    ],
)
def test_a_field_changed_after_a_successful_check_is_checked_again(name: str, bad: object) -> None:
    """Consistent field sets are remembered; changing any field must not reuse that verdict."""
    enc = deserialize_header(paged_blob())
    check_consistency(enc)  # remembered as consistent
    setattr(enc, name, bad)
    with pytest.raises(CorruptEncodedKVError):
        check_consistency(enc)


def test_a_list_scale_shape_is_checked_like_a_tuple() -> None:
    enc = deserialize_header(paged_blob())
    enc.scale_shape = list(enc.scale_shape)  # type: ignore[assignment]
    check_consistency(enc)
    enc.scale_shape = [enc.scale_shape[0], 5]  # type: ignore[assignment]
    with pytest.raises(CorruptEncodedKVError):
        check_consistency(enc)


GOLDEN_CODEC = sorted((Path(__file__).resolve().parents[1] / "golden_blobs/v1/codec").iterdir())


def _fields_or_rule(parse: Callable[[bytes], tuple[Any, int, int]], blob: bytes) -> Any:
    """The parsed fields (dtypes by name) and header length, or the rule refusing them."""
    try:
        fields, header_len, crc = parse(blob)
    except CorruptEncodedKVError as e:
        return e.rule
    names = {f.name: getattr(fields, f.name) for f in dataclasses.fields(fields)}
    names.pop("payload", None), names.pop("blob", None), names.pop("header_bytes", None)
    for key in ("k_dtype", "v_dtype", "scale_dtype"):
        names[key] = str(names[key])
    return names, header_len, crc


def test_the_header_only_reader_reads_as_the_codec_does() -> None:
    """header_fields (no torch, for inspect and fsck) and header (torch dtypes, for the
    codec) are one parser: the same fields, or the same rule, for every golden codec file,
    cut short inside its header too."""
    rules = set()
    for path in GOLDEN_CODEC:
        blob = path.read_bytes()
        for cut in (blob, blob[: len(blob) // 2], blob[:100]):
            torch_side = _fields_or_rule(header.parse_header_fields, cut)
            assert _fields_or_rule(header_fields.parse_header_fields, cut) == torch_side, path
            rules.add(torch_side if isinstance(torch_side, str) else "parsed")
    assert {"parsed", "KV-MAGIC", "KV-TRUNCATED"} <= rules, rules


def test_the_dtype_table_sizes_are_torch_s() -> None:
    for name, size in ITEMSIZE.items():
        assert getattr(torch, name).itemsize == size, name
