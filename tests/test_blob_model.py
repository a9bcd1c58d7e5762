"""The independent blob model (conformance.core.blob_model) agrees with the reference on every
committed golden blob, and its walker survives any input (SPEC.md, "Blob header")."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lmckv.conformance.core import blob_model as bm
from lmckv.conformance.core.digests import crc32
from lmckv.conformance.core.golden_vectors import golden_file, vectors
from lmckv.reference_impl import kv_codec as kc

#: SPEC.md, "Dtype table" (id 1 is the legacy float16 alias).
DTYPE_OF_ID = {
    1: torch.float16,
    2: torch.float16,
    3: torch.bfloat16,
    4: torch.float32,
    5: torch.float64,
    6: torch.uint8,
    7: torch.float8_e4m3fn,
    8: torch.float8_e5m2,
}

BLOB_VECTORS = [v for v in vectors("codec") if "blob" in v]
VALID = [v for v in BLOB_VECTORS if v["result"] == "valid"]
#: A few valid blobs to cut at every offset: no scale dims, two scale dims, hash values set.
CUT_IDS = (
    "enc-per_tensor-f16-nhd-2x4x2x8",
    "enc-per_page_head-f16-nhd-2x4x2x8",
    "kv-hashes-subset",
)


def _blob(vector: dict[str, Any]) -> bytes:
    return golden_file(vector["blob"])


def _reference(vector: dict[str, Any]) -> kc.EncodedKV | None:
    """The reference's reading of a golden blob, or None when it rejects it."""
    allow = bool(vector.get("parse", {}).get("allow_trailing"))
    try:
        return kc.deserialize_header(_blob(vector), allow_trailing=allow)
    except kc.CodecError:
        return None


def _hashes(found: bm.Layout) -> dict[str, str]:
    """The known hash keys as the reader rules read them (KV-HASHES): missing keys empty."""
    keys = [f.value for f in found.fields if f.name.endswith(".key")]
    values = [f.value for f in found.fields if f.name.endswith(".value")]
    stored = {
        k.decode(): v.decode()
        for k, v in zip(keys, values, strict=True)
        if isinstance(k, bytes) and isinstance(v, bytes)
    }
    return {name: stored.get(name, "") for name in bm.HASH_KEYS}


def _check_bounds(found: bm.Layout) -> None:
    """Nothing the layout reports ends beyond the buffer; fields are contiguous from 0."""
    end = 0
    for f in found.fields:
        assert f.offset == end and f.size >= 0, f
        end = f.end
    assert end <= found.size
    if found.stop is not None:
        assert found.header_len is None and found.stop.offset == end <= found.size
        assert found.sections == () and found.payload is None
        return
    assert found.header_len == end and found.fields[-1].name == "crc"
    for s in found.sections:
        assert found.header_len <= s.offset <= found.size
        assert 0 <= s.present <= s.declared and s.offset + s.present <= found.size
    if found.payload is not None:
        assert found.header_len == found.payload.start <= found.payload.stop <= found.size


@pytest.mark.parametrize("vector", BLOB_VECTORS, ids=[v["id"] for v in BLOB_VECTORS])
def test_model_agrees_with_reference(vector: dict[str, Any]) -> None:
    """Wherever the reference accepts a golden blob, the model finds the same field values
    and header length; wherever the model finds the header cut short, the reference
    rejects (KV-TRUNCATED)."""
    blob = _blob(vector)
    found = bm.layout(blob)
    _check_bounds(found)
    enc = _reference(vector)
    if vector["rule"] == "KV-TRUNCATED":
        assert found.truncated and enc is None
    if found.truncated:
        assert enc is None
    if enc is None:
        return
    assert found.header_len == len(enc.header_bytes or b"")
    got = {
        name: found.int_value(name)
        for name in ("layer_id", "chunk_id", "chunk_size", "page_size", "kv_head_count")
    }
    assert got == {name: getattr(enc, name) for name in got}
    assert found.int_value("head_dim") == enc.head_dim
    assert found.field("magic").value == kc.CODEC_MAGIC
    assert found.int_value("version") == 1 and found.int_value("reserved") == 0
    assert found.int_value("scale_scope") == int(enc.scale_scope)
    assert DTYPE_OF_ID[found.int_value("k_dtype_id")] == enc.k_dtype
    assert DTYPE_OF_ID[found.int_value("v_dtype_id")] == enc.v_dtype
    assert DTYPE_OF_ID[found.int_value("scale_dtype_id")] == enc.scale_dtype
    n = found.int_value("scale_shape_n")
    assert tuple(found.int_value(f"scale_shape[{i}]") for i in range(n)) == enc.scale_shape
    lengths = [found.int_value(name) for name in bm.LENGTH_FIELDS]
    assert lengths == [enc.k_payload_len, enc.v_payload_len, enc.scale_payload_len]
    assert [s.declared for s in found.sections] == lengths
    assert all(s.complete for s in found.sections)
    assert found.payload is not None and blob[found.payload] == bytes(enc.payload)
    assert found.int_value("crc") == crc32(enc.payload)
    assert _hashes(found) == vars(enc.hashes)


@pytest.mark.parametrize("vector", VALID, ids=[v["id"] for v in VALID])
def test_valid_blobs_repack_to_their_bytes(vector: dict[str, Any]) -> None:
    """KV-LAYOUT: parse then pack gives the blob back, byte for byte; cutting it from the
    end at its own lengths gives the sections the layout found."""
    blob = _blob(vector)
    found = bm.layout(blob)
    assert found.payload is not None
    if found.payload.stop < len(blob):  # bytes after the payload (KV-TRAILING)
        with pytest.raises(ValueError, match="header says"):
            bm.parse(blob)
        blob = blob[: found.payload.stop]
    parsed = bm.parse(blob)
    assert bm.pack(parsed.header, parsed.payload) == blob
    assert parsed.header_len == found.header_len
    k, v, s = found.sections
    cut = bm.cut_from_end(blob, k.declared, v.declared, s.declared)
    crc = found.field("crc")
    assert cut.header == blob[: crc.offset] and cut.crc == blob[crc.offset : crc.end]
    assert (cut.k, cut.v, cut.scales) == tuple(
        blob[x.offset : x.offset + x.present] for x in (k, v, s)
    )


@pytest.mark.parametrize("vector_id", CUT_IDS)
def test_every_truncation_reports_the_cut_field(vector_id: str) -> None:
    """KV-TRUNCATED: a blob cut inside (or just before) a header field is reported cut at
    that field, with every field before it intact; a cut in the payload leaves the header
    whole and the sections short."""
    (vector,) = [v for v in VALID if v["id"] == vector_id]
    blob = _blob(vector)
    whole = bm.layout(blob)
    assert whole.header_len is not None
    for cut in range(len(blob)):
        found = bm.layout(blob[:cut])
        _check_bounds(found)
        if cut < whole.header_len:
            (at,) = [f for f in whole.fields if f.offset <= cut < f.end]
            assert found.stop == bm.Stop(at.name, at.offset, "truncated"), cut
            assert found.fields == tuple(f for f in whole.fields if f.end <= at.offset)
            continue
        assert found.stop is None and found.header_len == whole.header_len
        assert found.fields == whole.fields
        assert found.payload == slice(whole.header_len, cut)
        assert sum(s.present for s in found.sections) == cut - whole.header_len
        assert not all(s.complete for s in found.sections) or len(found.sections) < 3


def test_negative_scale_shape_n_stops_the_walk() -> None:
    """KV-SCALE-SHAPE-N: a negative count places no scale dimension."""
    blob = bytearray(_blob(VALID[0]))
    bm.layout(blob).field("scale_shape_n").put(blob, -1)
    found = bm.layout(blob)
    end = found.field("scale_shape_n").end
    assert found.stop == bm.Stop("scale_shape[0]", end, "negative count")
    assert not found.truncated


def test_negative_length_places_no_later_section() -> None:
    """KV-LEN: a negative payload length ends the sections and leaves no payload."""
    blob = bytearray(_blob(VALID[0]))
    bm.layout(blob).field("v_payload_len").put(blob, -1)
    found = bm.layout(blob)
    assert [s.name for s in found.sections] == ["k"] and found.payload is None


def _mutants() -> st.SearchStrategy[bytes]:
    """A valid golden blob with a few bytes overwritten, then cut anywhere."""

    @st.composite
    def mutant(draw: st.DrawFn) -> bytes:
        blob = bytearray(_blob(draw(st.sampled_from(VALID[:20]))))
        for _ in range(draw(st.integers(0, 6))):
            blob[draw(st.integers(0, len(blob) - 1))] = draw(st.integers(0, 255))
        return bytes(blob[: draw(st.integers(0, len(blob)))])

    return mutant()


@given(st.one_of(st.binary(max_size=400), _mutants()))
def test_layout_never_raises_nor_reaches_past_the_buffer(blob: bytes) -> None:
    _check_bounds(bm.layout(blob))
