"""The codec's memos stay within their bounds and never give a stale answer."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from unittest import mock

import pytest
import torch

from lmckv.reference_impl.kv_codec import (
    AsymK16V8Codec,
    CodecHashes,
    CorruptEncodedKVError,
    EncodedKV,
    ScaleScheme,
    ScaleScope,
    header,
    header_fields,
)
from lmckv.reference_impl.kv_codec.memo import BoundedMemo


def test_bounded_memo_drops_the_oldest_entry_past_its_limit() -> None:
    memo: BoundedMemo[int, str] = BoundedMemo(3)
    for i in range(10):
        memo.put(i, str(i))
        assert len(memo) <= 3
    assert [k for k, _ in memo.items()] == [7, 8, 9]
    assert memo.get(9) == "9" and memo.get(6) is None
    memo.put(8, "eight")  # replacing a key keeps the others
    assert dict(memo.items()) == {7: "7", 8: "eight", 9: "9"}


def test_bounded_memo_refuses_a_zero_limit() -> None:
    with pytest.raises(ValueError):
        BoundedMemo(0)


def test_bounded_memo_shared_by_threads_keeps_its_bound() -> None:
    memo: BoundedMemo[int, int] = BoundedMemo(16)

    def fill(start: int) -> None:
        for i in range(start, start + 2000):
            memo.put(i, i)
            assert memo.get(i) in (i, None)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(fill, range(0, 8000, 2000)))
    assert len(memo) == 16
    assert all(k == v for k, v in memo.items())


def consistent_blob() -> EncodedKV:
    """A PER_PAGE_HEAD header that passes check_consistency: 3 pages x 2 tokens x 2 heads
    x head_dim 4."""
    return EncodedKV(
        k_dtype=torch.float16,
        v_dtype=torch.float8_e4m3fn,
        scale_dtype=torch.float32,
        scale_scope=ScaleScope.PER_PAGE_HEAD,
        page_size=2,
        kv_head_count=2,
        head_dim=4,
        scale_shape=(3, 2),
        k_payload_len=96,
        v_payload_len=48,
        scale_payload_len=24,
    )


# For every field check_consistency reads, a value that breaks the blob.
BAD_FIELDS: dict[str, Any] = {
    "k_dtype": torch.float32,
    "v_dtype": torch.float16,
    "scale_dtype": torch.float16,
    "scale_scope": ScaleScope.PER_TENSOR,
    "scale_scheme": ScaleScheme.RAW_UNIT,  # v2's scheme with a v1 scope (KV2-SCOPE)
    "layer_id": -2,
    "chunk_id": -2,
    "chunk_size": 0,
    "page_size": 3,
    "kv_head_count": 3,
    "head_dim": 8,
    "scale_shape": (2, 2),
    "k_payload_len": 94,
    "v_payload_len": 47,
    "scale_payload_len": 20,
}


def test_the_memo_key_holds_every_field_the_check_reads() -> None:
    """The key has one entry per field of BAD_FIELDS, and changing any of them changes it."""
    base = consistent_blob()
    assert len(header_fields.fields_key(base)) == len(BAD_FIELDS)
    for name, bad in BAD_FIELDS.items():
        changed = dataclasses.replace(base, **{name: bad})
        assert header_fields.fields_key(changed) != header_fields.fields_key(base), name


@pytest.mark.parametrize("name", sorted(BAD_FIELDS))
def test_a_field_changed_after_a_remembered_check_still_raises(name: str) -> None:
    enc = consistent_blob()
    header_fields.check_consistency(enc)
    header_fields.check_consistency(enc)  # the answer now comes from the memo
    assert header_fields.fields_key(enc) in header_fields._CONSISTENT
    setattr(enc, name, BAD_FIELDS[name])
    with pytest.raises(CorruptEncodedKVError):
        header_fields.check_consistency(enc)


def test_consistency_memo_keeps_its_bound() -> None:
    limit = header_fields._CONSISTENT.limit
    for layer in range(3 * limit):
        header_fields.check_consistency(dataclasses.replace(consistent_blob(), layer_id=layer))
        assert len(header_fields._CONSISTENT) <= limit


def test_packed_hash_sections_keep_their_bound_and_follow_the_hashes() -> None:
    limit = header._PACKED_SECTIONS.limit
    hashes = CodecHashes()
    for i in range(3 * limit):
        hashes.model_id = f"model-{i}"  # the same object, changed in place
        values = tuple(getattr(hashes, name) for name in header.HASH_FIELDS)
        assert header.hash_section(hashes) == header._pack_hash_section(values)
        assert len(header._PACKED_SECTIONS) <= limit


def test_parsed_hash_sections_keep_their_bound_and_each_blob_reads_its_own() -> None:
    codec = AsymK16V8Codec()
    k = torch.ones(2, 2, 4, dtype=torch.float16)
    names = [f"m{i}" for i in range(header_fields._PARSED_SECTIONS.limit + 3)]
    blobs = {n: codec.to_bytes(codec.encode(k, k, hashes=CodecHashes(model_id=n))) for n in names}
    for _ in range(3):  # more hash sets than the memo holds, read round robin
        for name, blob in blobs.items():
            assert codec.from_bytes(blob).hashes.model_id == name
            assert len(header_fields._PARSED_SECTIONS) <= header_fields._PARSED_SECTIONS.limit


def _page_blob(codec: AsymK16V8Codec, model_id: str = "m") -> bytearray:
    k = torch.randn(1, 16, 2, 8, dtype=torch.float16)
    return bytearray(codec.to_bytes(codec.encode(k, k, hashes=CodecHashes(model_id=model_id))))


def test_a_header_read_again_gives_a_record_of_its_own() -> None:
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_LAYER_HEAD)
    blob = _page_blob(codec)
    first = codec.from_bytes(blob)
    second = codec.from_bytes(blob)  # from the memo of parsed headers
    assert first == second and first.hashes is not second.hashes
    first.hashes.model_id = "changed in place"
    assert codec.from_bytes(blob).hashes.model_id == "m"


def test_a_remembered_header_still_checks_its_payload_and_its_length() -> None:
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_LAYER_HEAD)
    blob = _page_blob(codec)
    codec.from_bytes(blob)
    header_len = len(codec.from_bytes(blob).header_bytes or b"")
    flipped = bytearray(blob)
    flipped[-1] ^= 1
    with pytest.raises(CorruptEncodedKVError) as crc:
        codec.from_bytes(flipped)
    assert crc.value.rule == "KV-CRC"
    with pytest.raises(CorruptEncodedKVError) as cut:
        codec.from_bytes(blob[: header_len - 1])
    assert cut.value.rule == "KV-TRUNCATED"
    with pytest.raises(CorruptEncodedKVError) as short:
        codec.from_bytes(blob[:-1])
    assert short.value.rule == "KV-LEN-SUM"


def test_parsed_headers_keep_their_bound() -> None:
    codec = AsymK16V8Codec()
    limit = header_fields._PARSED_HEADERS.limit
    blobs = {f"m{i}": _page_blob(codec, f"m{i}") for i in range(limit + 3)}
    for _ in range(2):
        for name, blob in blobs.items():
            assert codec.from_bytes(blob).hashes.model_id == name
            assert len(header_fields._PARSED_HEADERS) <= limit


def test_a_header_another_check_passed_is_not_taken_as_valid() -> None:
    """A header accepted while a test swapped the consistency check (the reader mutants)
    is parsed afresh, and refused, under the reference's check."""
    codec = AsymK16V8Codec(scale_scope=ScaleScope.PER_LAYER_HEAD)
    blob = _page_blob(codec)
    fields = list(header_fields.FIXED_STRUCT.unpack_from(blob))
    fields[11] = 3  # kv_head_count: the scale table has 2 heads
    header_fields.FIXED_STRUCT.pack_into(blob, 0, *fields)
    with mock.patch.object(header_fields, "check_consistency", lambda enc: None):
        assert codec.from_bytes(blob).kv_head_count == 3
    with pytest.raises(CorruptEncodedKVError) as err:
        codec.from_bytes(blob)
    assert err.value.rule == "KV-SCALE-SHAPE"
