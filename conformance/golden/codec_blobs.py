"""Hand-built blob vectors: each named after the rule it tests, most of them negative.

They start from a valid blob (``base``: PER_PAGE_HEAD, float16, [2, 4, 2, 8]; ``hashes``:
the same with all six hash strings set) and change it through the independent header model
in :mod:`lmckv.conformance.core.blob_model`. Because the CRC covers the payload only, most
header edits keep a valid CRC: exactly the corruption a reader must catch by checking the
redundant fields.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Callable
from typing import Any

from ...reference_impl.kv_codec import ScaleScope
from ..core import blob_model as bl
from ..core.digests import crc32c
from .codec_builder import (
    CORRUPT,
    INT64_MAX,
    INT64_MIN,
    MISMATCH,
    SCOPE_NAMES,
    CodecVectors,
)

Edit = Callable[[bl.Header], None]

#: What catches a blob whose hash count disagrees with the pairs present (a shifted frame).
ALT_FRAMING = ["KV-CRC", "KV-LEN", "KV-LEN-SUM", "KV-TRAILING", "KV-TRUNCATED"]


def _edited(base: bytes, edit: Edit, payload: bytes | None = None) -> bytes:
    parsed = bl.parse(base)
    header = dataclasses.replace(parsed.header, hash_pairs=list(parsed.header.hash_pairs))
    edit(header)
    return bl.pack(header, parsed.payload if payload is None else payload)


class _Set:
    """An edit that sets header fields; ``fields`` names them (the vector's ``edit``)."""

    def __init__(self, **values: object) -> None:
        self.values = values

    def __call__(self, h: bl.Header) -> None:
        for name, value in self.values.items():
            setattr(h, name, value)

    @property
    def fields(self) -> list[str]:
        return sorted(self.values)


def _set(**values: object) -> _Set:
    return _Set(**values)


def edit_of(
    fields: list[str],
    *,
    crc: str = "kept",
    payload: str = "kept",
    framing: str | None = None,
    isolated: bool = True,
    note: str | None = None,
) -> dict[str, Any]:
    """A vector's ``edit`` (vectors.schema.json): the header fields changed (blob-model
    names), what happened to the CRC field ("kept": same bytes as the parent's;
    "recomputed": the CRC of the new payload; "changed": now wrong) and to the payload
    ("kept", "changed"). ``framing`` "shifted": a count was changed without the items it
    counts, so every later field moves (the rule is about that count). ``isolated``
    False (with a ``note``): the rule cannot be broken alone, another rule also catches
    the vector."""
    out: dict[str, Any] = {"fields": sorted(fields), "crc": crc, "payload": payload}
    if framing is not None:
        out["framing"] = framing
    if not isolated:
        out["isolated"] = False
        out["note"] = note
    return out


def field_corruptions(cv: CodecVectors, base: bytes) -> None:
    """Every header field set to a value its rule forbids, alone: the CRC stays right and
    the lengths keep adding up unless the rule is about exactly that."""
    cases: list[tuple[str, str, str, _Set]] = [
        (
            "kv-magic-lowercase",
            "KV-MAGIC",
            "magic 'lmckv' in lower case",
            _set(magic=b"lmckv\x01\x00\x01"),
        ),
        (
            "kv-magic-minor-2",
            "KV-MAGIC",
            "magic with version triplet 1.0.2",
            _set(magic=b"LMCKV\x01\x00\x02"),
        ),
        ("kv-magic-zero", "KV-MAGIC", "eight zero bytes", _set(magic=b"\x00" * 8)),
        ("kv-version-0", "KV-VERSION", "header version 0", _set(version=0)),
        ("kv-version-2", "KV-VERSION", "header version 2", _set(version=2)),
        (
            "kv-version-byteswapped",
            "KV-VERSION",
            "version 1 written big-endian (0x0100)",
            _set(version=0x0100),
        ),
        ("kv-scope-4", "KV-SCOPE", "scale_scope 4 (one past EXTERNAL)", _set(scale_scope=4)),
        ("kv-scope-ffff", "KV-SCOPE", "scale_scope 0xffff", _set(scale_scope=0xFFFF)),
        ("kv-k-dtype-none", "KV-K-DTYPE", "k_dtype id 0 (no dtype)", _set(k_dtype_id=0)),
        ("kv-k-dtype-float32", "KV-K-DTYPE", "k_dtype float32 (4)", _set(k_dtype_id=4)),
        ("kv-k-dtype-fp8", "KV-K-DTYPE", "k_dtype float8_e4m3fn (7)", _set(k_dtype_id=7)),
        (
            "kv-k-dtype-unknown-9",
            "KV-K-DTYPE",
            "k_dtype id 9 (not in the table)",
            _set(k_dtype_id=9),
        ),
        ("kv-k-dtype-ffff", "KV-K-DTYPE", "k_dtype id 0xffff", _set(k_dtype_id=0xFFFF)),
        ("kv-v-dtype-none", "KV-V-DTYPE", "v_dtype id 0", _set(v_dtype_id=0)),
        ("kv-v-dtype-float16", "KV-V-DTYPE", "v_dtype float16 (2)", _set(v_dtype_id=2)),
        (
            "kv-v-dtype-e5m2",
            "KV-V-DTYPE",
            "v_dtype float8_e5m2 (8): reserved, not v1",
            _set(v_dtype_id=8),
        ),
        ("kv-scale-dtype-none", "KV-SCALE-DTYPE", "scale_dtype id 0", _set(scale_dtype_id=0)),
        ("kv-scale-dtype-uint8", "KV-SCALE-DTYPE", "scale_dtype uint8 (6)", _set(scale_dtype_id=6)),
        (
            "kv-scale-dtype-fp8",
            "KV-SCALE-DTYPE",
            "scale_dtype float8_e4m3fn (7)",
            _set(scale_dtype_id=7),
        ),
        ("kv-scale-dtype-unknown", "KV-SCALE-DTYPE", "scale_dtype id 99", _set(scale_dtype_id=99)),
        ("kv-reserved-1", "KV-RESERVED", "reserved field 1", _set(reserved=1)),
        ("kv-reserved-8000", "KV-RESERVED", "reserved field 0x8000", _set(reserved=0x8000)),
        ("kv-ids-layer-minus-2", "KV-IDS", "layer_id -2", _set(layer_id=-2)),
        ("kv-ids-layer-int64-min", "KV-IDS", "layer_id int64 min", _set(layer_id=INT64_MIN)),
        ("kv-ids-chunk-minus-2", "KV-IDS", "chunk_id -2", _set(chunk_id=-2)),
        ("kv-geometry-chunk-size-0", "KV-GEOMETRY", "chunk_size 0", _set(chunk_size=0)),
        ("kv-geometry-chunk-size-minus-2", "KV-GEOMETRY", "chunk_size -2", _set(chunk_size=-2)),
        ("kv-geometry-page-size-0", "KV-GEOMETRY", "page_size 0", _set(page_size=0)),
        ("kv-geometry-page-size-minus-7", "KV-GEOMETRY", "page_size -7", _set(page_size=-7)),
        ("kv-geometry-heads-0", "KV-GEOMETRY", "kv_head_count 0", _set(kv_head_count=0)),
        ("kv-geometry-heads-minus-3", "KV-GEOMETRY", "kv_head_count -3", _set(kv_head_count=-3)),
        ("kv-geometry-head-dim-0", "KV-GEOMETRY", "head_dim 0", _set(head_dim=0)),
        (
            "kv-geometry-head-dim-int64-min",
            "KV-GEOMETRY",
            "head_dim int64 min",
            _set(head_dim=INT64_MIN),
        ),
        ("kv-scale-shape-n-9", "KV-SCALE-SHAPE-N", "scale_shape_n 9", _set(scale_shape_n=9)),
        (
            "kv-scale-shape-n-minus-1",
            "KV-SCALE-SHAPE-N",
            "scale_shape_n -1",
            _set(scale_shape_n=-1),
        ),
        (
            "kv-scale-shape-n-2-62",
            "KV-SCALE-SHAPE-N",
            "scale_shape_n 2^62: a reader that reads 8*n bytes first overflows",
            _set(scale_shape_n=2**62),
        ),
        (
            "kv-scale-shape-n-int64-max",
            "KV-SCALE-SHAPE-N",
            "scale_shape_n int64 max",
            _set(scale_shape_n=INT64_MAX),
        ),
        (
            "kv-scale-shape-count-3",
            "KV-SCALE-SHAPE",
            "scale_shape_n 3 on a 2-d scale shape: every later field shifts by 8 bytes. NOT "
            "ISOLATED: the shifted fields break other rules too (the reference finds the hash "
            "section running past the buffer, KV-TRUNCATED); kv-scale-shape-3-dims breaks "
            "KV-SCALE-SHAPE alone",
            _set(scale_shape_n=3),
        ),
        (
            "kv-scale-shape-3-dims",
            "KV-SCALE-SHAPE",
            "PER_PAGE_HEAD scale_shape (2, 2, 1): the same 4 scales, lengths and CRC right, "
            "but the scope prescribes 2 dimensions",
            _set(scale_shape=[2, 2, 1]),
        ),
        (
            "kv-scale-shape-negative",
            "KV-SCALE-SHAPE",
            "scale_shape (-2, -2): negative dimensions whose product, 4, still matches the 16 "
            "scale bytes",
            _set(scale_shape=[-2, -2]),
        ),
        (
            "kv-len-k-negative",
            "KV-LEN",
            "k_payload_len -256, v_payload_len 640: the three lengths still add up to the 400 "
            "payload bytes",
            _set(k_payload_len=-256, v_payload_len=640),
        ),
        (
            "kv-len-k-2-62",
            "KV-LEN",
            "k_payload_len 2^62: a reader that allocates by it dies. NOT ISOLATED: no length "
            "past the buffer keeps the sum (KV-LEN-SUM also applies)",
            _set(k_payload_len=2**62),
        ),
        (
            "kv-len-k-int64-max",
            "KV-LEN",
            "k_payload_len int64 max: offset arithmetic overflows. NOT ISOLATED: no length "
            "past the buffer keeps the sum (KV-LEN-SUM also applies)",
            _set(k_payload_len=INT64_MAX),
        ),
        (
            "kv-len-v-negative",
            "KV-LEN",
            "v_payload_len -128, k_payload_len 512: the lengths still add up to the payload",
            _set(v_payload_len=-128, k_payload_len=512),
        ),
        (
            "kv-len-v-2-62",
            "KV-LEN",
            "v_payload_len 2^62. NOT ISOLATED: no length past the buffer keeps the sum "
            "(KV-LEN-SUM also applies)",
            _set(v_payload_len=2**62),
        ),
        (
            "kv-len-scale-negative",
            "KV-LEN",
            "scale_payload_len -16, v_payload_len 160: the lengths still add up to the payload",
            _set(scale_payload_len=-16, v_payload_len=160),
        ),
    ]
    parent = cv.base_ids["base"]
    for vid, rule, comment, edit in cases:
        flags = ["field-corrupt"]
        if "2-62" in vid or "int64-max" in vid:
            flags.append("allocation")
        framing = "shifted" if "scale_shape_n" in edit.fields else None
        isolated = "NOT ISOLATED" not in comment
        desc = edit_of(
            edit.fields,
            framing=framing,
            isolated=isolated,
            note=None if isolated else comment.split("NOT ISOLATED: ")[1],
        )
        cv.add_blob(
            vid,
            rule,
            comment,
            _edited(base, edit),
            result="invalid",
            error=CORRUPT,
            flags=flags,
            parent=parent,
            edit=desc,
            alt_rules=None if isolated else ALT_FRAMING if framing else ["KV-LEN-SUM"],
        )
    payload_edits(cv, base)


def payload_edits(cv: CodecVectors, base: bytes) -> None:
    """Length and shape fields broken alone: the payload is resized to what the edited
    lengths declare and the CRC recomputed, so only the vector's rule is broken."""
    parsed = bl.parse(base)
    h, payload = parsed.header, parsed.payload
    k_len, v_len = h.k_payload_len, h.v_payload_len
    ones = struct.pack("<2f", 1.0, 1.0)
    cases: list[tuple[str, str, str, _Set, bytes]] = [
        (
            "kv-len-k-odd",
            "KV-LEN",
            "k_payload_len 257, odd for float16: one byte added at the end of K so that the "
            "lengths add up and the CRC is right; K and V still hold 128 elements",
            _set(k_payload_len=k_len + 1),
            payload[:k_len] + b"\x00" + payload[k_len:],
        ),
        (
            "kv-len-scale-zero",
            "KV-LEN",
            "scale_payload_len 0 for a (2, 2) float32 scale shape: the scale bytes removed, "
            "so the lengths add up and the CRC is right",
            _set(scale_payload_len=0),
            payload[: k_len + v_len],
        ),
        (
            "kv-scale-shape-heads",
            "KV-SCALE-SHAPE",
            "scale_shape (2, 3) with kv_head_count 2: two scales added so that "
            "scale_payload_len (24) agrees with the shape and the CRC is right",
            _set(scale_shape=[2, 3], scale_payload_len=h.scale_payload_len + 8),
            payload + ones,
        ),
    ]
    for vid, rule, comment, edit, new_payload in cases:
        cv.add_blob(
            vid,
            rule,
            comment,
            _edited(base, edit, new_payload),
            result="invalid",
            error=CORRUPT,
            flags=["field-corrupt"],
            parent=cv.base_ids["base"],
            edit=edit_of(edit.fields, crc="recomputed", payload="changed"),
        )


def redundant_disagreements(cv: CodecVectors, base: bytes) -> None:
    """Fields that must agree, made to disagree with the payload extent and CRC intact."""
    cases: list[tuple[str, str, str, _Set]] = [
        (
            "kv-len-k-v-shifted",
            "KV-LEN",
            "k_payload_len +2, v_payload_len -2: same total, K has 129 elements, V 126",
            _set(k_payload_len=258, v_payload_len=126),
        ),
        (
            "kv-len-v-scale-shifted",
            "KV-LEN",
            "v_payload_len +16, scale_payload_len 0: same total",
            _set(v_payload_len=144, scale_payload_len=0),
        ),
        (
            "kv-len-k-scale-shifted",
            "KV-LEN",
            "k_payload_len -16 (120 elements), scale_payload_len +16",
            _set(k_payload_len=240, scale_payload_len=32),
        ),
        (
            "kv-scale-shape-heads-4",
            "KV-SCALE-SHAPE",
            "kv_head_count 4 but scale_shape (2, 2)",
            _set(kv_head_count=4),
        ),
        (
            "kv-scale-shape-pages-swapped",
            "KV-SCALE-SHAPE",
            "scale_shape (4, 1): same 4 scales, wrong pages x heads",
            _set(scale_shape=[4, 1]),
        ),
        (
            "kv-scale-shape-page-size-2",
            "KV-SCALE-SHAPE",
            "page_size 2 while 2 pages hold 8 tokens",
            _set(page_size=2),
        ),
        (
            "kv-scale-shape-head-dim-16",
            "KV-SCALE-SHAPE",
            "head_dim 16: 128 elements make 4 tokens, not 2 pages x 4",
            _set(head_dim=16),
        ),
        (
            "kv-geometry-head-dim-3",
            "KV-LEN",
            "head_dim 3: 128 elements are not whole tokens of 2 x 3 (a KV-LEN check: 3 is a "
            "valid head_dim by KV-GEOMETRY)",
            _set(head_dim=3),
        ),
        (
            "kv-scale-shape-scope-per-tensor",
            "KV-SCALE-SHAPE",
            "scale_scope PER_TENSOR on a (2, 2) scale shape",
            _set(scale_scope=0),
        ),
        (
            "kv-scale-shape-scope-per-layer-head",
            "KV-SCALE-SHAPE",
            "scale_scope PER_LAYER_HEAD on a (2, 2) scale shape",
            _set(scale_scope=1),
        ),
        (
            "kv-len-scale-dtype-float16",
            "KV-LEN",
            "scale_dtype float16 while 16 bytes hold 4 float32 scales",
            _set(scale_dtype_id=2),
        ),
    ]
    for vid, rule, comment, edit in cases:
        cv.add_blob(
            vid,
            rule,
            comment,
            _edited(base, edit),
            result="invalid",
            error=CORRUPT,
            flags=["redundant-disagree"],
            parent=cv.base_ids["base"],
            edit=edit_of(edit.fields),
        )
    cv.add_blob(
        "kv-k-dtype-flip-bfloat16",
        "KV-K-DTYPE",
        "k_dtype changed from float16 to bfloat16: sizes agree and the CRC covers only the "
        "payload, so the blob is valid and K now decodes as different numbers",
        _edited(base, _set(k_dtype_id=3)),
        result="valid",
        flags=["header-not-covered"],
    )
    cv.add_blob(
        "kv-ids-layer-id-edited",
        "KV-IDS",
        "layer_id rewritten to 7 after writing: valid, since the CRC cannot see it",
        _edited(base, _set(layer_id=7)),
        result="valid",
        flags=["header-not-covered"],
    )
    cv.add_blob(
        "kv-geometry-chunk-size-edited",
        "KV-GEOMETRY",
        "chunk_size rewritten to 4 while the blob holds 8 tokens: no rule ties chunk_size to "
        "the payload (the last chunk of a sequence may hold fewer tokens than chunk_size), "
        "and the CRC cannot see the edit, so the blob is valid (SPEC.md, 'Decisions')",
        _edited(base, _set(chunk_size=4)),
        result="valid",
        flags=["header-not-covered"],
        parent=cv.base_ids["base"],
        edit=edit_of(["chunk_size"]),
    )
    cv.add_blob(
        "kv-dtype-alias-k-1",
        "KV-DTYPE-ALIAS",
        "k_dtype id 1, the legacy float16 id: read as float16",
        _edited(base, _set(k_dtype_id=1)),
        result="valid",
        flags=["field-corrupt"],
    )
    cv.add_blob(
        "kv-layout-big-endian",
        "KV-LAYOUT",
        "the whole header written big-endian. Two rules apply: the version then reads "
        "0x0100, so a reader may report KV-VERSION first",
        _edited(base, _set(big_endian=True)),
        result="invalid",
        error=CORRUPT,
        flags=["byte-order"],
        parent=cv.base_ids["base"],
        edit=edit_of(["big_endian"]),
        alt_rules=["KV-VERSION"],
    )
    external = cv.base_blobs[SCOPE_NAMES[ScaleScope.EXTERNAL]]
    ext = bl.parse(external)
    cv.add_blob(
        "kv-scale-shape-external-not-stored",
        "Q-EXTERNAL",
        "EXTERNAL scope with no stored scales (scale_shape (0,), 0 bytes): valid, but V can "
        "only be dequantized with scales given out of band",
        _edited(
            external,
            _set(scale_shape=[0], scale_payload_len=0),
            ext.payload[: -ext.header.scale_payload_len],
        ),
        result="valid",
        flags=["field-corrupt"],
    )
    parsed = bl.parse(base)
    one_scale = parsed.payload[: -parsed.header.scale_payload_len + 4]
    cv.add_blob(
        "kv-scale-shape-n-8-external",
        "KV-SCALE-SHAPE-N",
        "EXTERNAL scope with one scale of shape (1, 1, 1, 1, 1, 1, 1, 1): eight dimensions "
        "is the maximum, and valid",
        _edited(base, _set(scale_scope=3, scale_shape=[1] * 8, scale_payload_len=4), one_scale),
        result="valid",
        flags=["field-corrupt"],
        decode=False,
    )


def hash_sections(cv: CodecVectors, base: bytes) -> None:
    """Valid and malformed hash sections."""
    pairs = bl.parse(base).header.hash_pairs

    def with_pairs(new: list[tuple[bytes, bytes]], count: int | None = None) -> bytes:
        return _edited(base, _set(hash_pairs=new, hash_count=count))

    framing_note = (
        "the count is not checked against anything but the bytes that follow: a wrong "
        "count shifts the CRC and the payload, so the blob is caught by KV-TRUNCATED, "
        "KV-LEN-SUM, KV-TRAILING or KV-CRC, never by a hash rule alone"
    )

    valid = [
        ("kv-hashes-none", "no hash pairs at all (count 0): every hash reads empty", []),
        ("kv-hashes-reversed", "the six pairs in reverse order", list(reversed(pairs))),
        (
            "kv-hashes-unknown-key",
            "an extra pair with an unknown key, which readers ignore",
            [*pairs, (b"x-future-field", b"anything")],
        ),
        ("kv-hashes-subset", "only model_id and kv_layout", [pairs[0], pairs[5]]),
    ]
    for vid, comment, new in valid:
        cv.add_blob(
            vid, "KV-HASHES", comment, with_pairs(new), result="valid", flags=["hash-section"]
        )
    first = pairs[0]
    invalid: list[tuple[str, str, bytes]] = [
        ("kv-hashes-count-ffff", "hash count 0xffff, six pairs present", with_pairs(pairs, 0xFFFF)),
        (
            "kv-hashes-count-7",
            "hash count 7, six pairs present: the 7th is read from the CRC",
            with_pairs(pairs, 7),
        ),
        (
            "kv-hashes-count-5",
            "hash count 5, six pairs present: the 6th pair is read as the CRC",
            with_pairs(pairs, 5),
        ),
        (
            "kv-hashes-value-not-utf8",
            "model_id value bytes ff fe",
            with_pairs([(first[0], b"\xff\xfe"), *pairs[1:]]),
        ),
        (
            "kv-hashes-key-not-utf8",
            "a key of bytes c3 28",
            with_pairs([*pairs, (b"\xc3\x28", b"")]),
        ),
        (
            "kv-hashes-value-overlong-utf8",
            "model_id value c0 af (overlong '/')",
            with_pairs([(first[0], b"\xc0\xaf"), *pairs[1:]]),
        ),
        (
            "kv-hashes-value-surrogate",
            "model_id value ed a0 80 (UTF-8 of a surrogate)",
            with_pairs([(first[0], b"\xed\xa0\x80"), *pairs[1:]]),
        ),
        ("kv-hashes-duplicate-key", "model_id twice", with_pairs([*pairs, (first[0], b"other")])),
    ]
    parent = cv.base_ids["hashes"]
    for vid, comment, blob in invalid:
        counted = vid.startswith("kv-hashes-count-")
        cv.add_blob(
            vid,
            "KV-HASHES",
            comment + (". NOT ISOLATED: " + framing_note if counted else ""),
            blob,
            result="invalid",
            error=CORRUPT,
            flags=["hash-section"],
            parent=parent,
            edit=edit_of(["hash_count"], framing="shifted", isolated=False, note=framing_note)
            if counted
            else edit_of(["hash_pairs"]),
            alt_rules=ALT_FRAMING if counted else None,
        )
    parsed = bl.parse(base)
    raw = bytearray(base)
    off, _ = parsed.offsets["hash[0].key_len"]
    raw[off : off + 2] = b"\xff\xff"
    cv.add_blob(
        "kv-hashes-key-len-ffff",
        "KV-HASHES",
        "first key length 0xffff: runs past the end of the buffer. Two rules apply: a reader "
        "cannot tell a string length that is too large (KV-HASHES) from a buffer cut inside "
        "the string (KV-TRUNCATED)",
        bytes(raw),
        result="invalid",
        error=CORRUPT,
        flags=["hash-section", "allocation"],
        parent=parent,
        edit=edit_of(["hash_pairs"], framing="shifted"),
        alt_rules=["KV-TRUNCATED"],
    )


def crc_variants(cv: CodecVectors, base: bytes) -> None:
    """Wrong CRC values, and payload bytes changed under a right one."""
    parsed = bl.parse(base)
    payload = parsed.payload
    h = parsed.header
    k_len, v_len = h.k_payload_len, h.v_payload_len
    crc = zlib.crc32(payload) & 0xFFFFFFFF
    header_plus = bl.pack(dataclasses.replace(h, crc=0), payload)[: parsed.header_len - 4]

    def with_crc(value: int) -> bytes:
        return _edited(base, _set(crc=value))

    def flip(index: int) -> bytes:
        changed = bytearray(payload)
        changed[index] ^= 0x01
        return _edited(base, _set(crc=crc), bytes(changed))

    cases: list[tuple[str, str, bytes, list[str]]] = [
        (
            "kv-crc-crc32c",
            "the CRC field holds CRC-32C (Castagnoli) of the payload",
            with_crc(crc32c(payload)),
            ["crc32c"],
        ),
        (
            "kv-crc-big-endian",
            "the right CRC written big-endian",
            with_crc(struct.unpack("<I", struct.pack(">I", crc))[0]),
            ["byte-order"],
        ),
        (
            "kv-crc-no-final-xor",
            "CRC-32 without the final inversion",
            with_crc(crc ^ 0xFFFFFFFF),
            [],
        ),
        (
            "kv-crc-over-header",
            "CRC-32 of header fields plus payload instead of payload only",
            with_crc(zlib.crc32(header_plus + payload) & 0xFFFFFFFF),
            [],
        ),
        ("kv-crc-zero", "CRC field zero", with_crc(0), []),
        ("kv-crc-bit-flip", "lowest CRC bit flipped", with_crc(crc ^ 1), []),
        ("kv-crc-k-byte", "first K payload byte changed", flip(0), []),
        ("kv-crc-v-byte", "first V payload byte changed", flip(k_len), []),
        (
            "kv-crc-scale-byte",
            "last scale payload byte changed",
            flip(k_len + v_len + h.scale_payload_len - 1),
            [],
        ),
    ]
    for vid, comment, blob, extra in cases:
        flipped = vid in ("kv-crc-k-byte", "kv-crc-v-byte", "kv-crc-scale-byte")
        cv.add_blob(
            vid,
            "KV-CRC",
            comment,
            blob,
            result="invalid",
            error=CORRUPT,
            flags=["crc", *extra],
            parent=cv.base_ids["base"],
            edit=edit_of([], payload="changed") if flipped else edit_of(["crc"], crc="changed"),
        )


def truncations(cv: CodecVectors, base: bytes) -> None:
    """The buffer cut at the start and middle of every header field, and in the payload."""
    parsed = bl.parse(base)
    cuts: dict[int, str] = {0: "empty buffer"}
    for name, (off, size) in parsed.offsets.items():
        if off > 0:
            cuts.setdefault(off, f"ends before {name}")
        if size > 1:
            cuts.setdefault(off + size // 2, f"ends inside {name}")
    for cut in sorted(cuts):
        label = cuts[cut].replace(" ", "-").replace("[", "").replace("]", "").replace(".", "-")
        cv.add_blob(
            f"kv-truncated-at-{cut:03d}-{label}",
            "KV-TRUNCATED",
            f"blob cut to {cut} bytes: {cuts[cut]}",
            base[:cut],
            result="invalid",
            error=CORRUPT,
            flags=["truncated"],
            parent=cv.base_ids["base"],
            edit={"truncated_at": cut},
        )
    head = parsed.header_len
    payload_cuts = {
        head: "header complete, no payload",
        head + parsed.header.k_payload_len: "K complete, V missing",
        len(base) - 1: "last scale byte missing",
    }
    for cut, comment in payload_cuts.items():
        cv.add_blob(
            f"kv-len-sum-truncated-at-{cut}",
            "KV-LEN-SUM",
            f"blob cut to {cut} bytes: {comment}",
            base[:cut],
            result="invalid",
            error=CORRUPT,
            flags=["truncated"],
            parent=cv.base_ids["base"],
            edit={"truncated_at": cut},
        )


def trailing(cv: CodecVectors, base: bytes) -> None:
    """Bytes after the payload: rejected by default, ignored with allow_trailing."""
    padded = base + bytes(-len(base) % 4096)
    cases = [
        ("one-zero-byte", "one 0x00 byte", base + b"\x00"),
        ("second-blob", "a second copy of the blob", base + base),
        ("block-padding", f"zero padding to 4096 bytes ({len(padded) - len(base)} bytes)", padded),
    ]
    for name, comment, blob in cases:
        strict = cv.add_blob(
            f"kv-trailing-{name}",
            "KV-TRAILING",
            f"{comment} after the payload, read strictly",
            blob,
            result="invalid",
            error=CORRUPT,
            flags=["trailing"],
            parent=cv.base_ids["base"],
            edit={"appended": len(blob) - len(base)},
        )
        cv.add_blob(
            f"kv-trailing-{name}-allowed",
            "KV-TRAILING",
            f"{comment} after the payload, read with allow_trailing",
            blob,
            result="valid",
            flags=["trailing", "allow-trailing"],
            parse_args={"allow_trailing": True},
            blob_path=strict["blob"],
        )


def hash_gate(cv: CodecVectors, blob: bytes) -> None:
    """The same blob read with expected hashes that match, wildcard, or differ."""
    stored = {k.decode(): v.decode("utf-8") for k, v in bl.parse(blob).header.hash_pairs}
    path = cv.files.add("v1/codec/kv-hash-gate.bin", blob)

    def gate(vid: str, comment: str, expected: dict[str, str], error: str | None) -> None:
        changed = sorted(k for k in {*stored, *expected} if expected.get(k) != stored.get(k))
        cv.add_blob(
            vid,
            "KV-HASH-GATE",
            comment,
            blob,
            result="invalid" if error else "valid",
            error=error,
            flags=["hash-gate"],
            parse_args={f"expect_{k}": v for k, v in expected.items()},
            blob_path=path,
            parent="kv-hash-gate-all-equal" if error else None,
            edit={"parse": [f"expected_hashes.{k}" for k in changed]} if error else None,
        )

    gate("kv-hash-gate-all-equal", "expected hashes equal the stored ones", stored, None)
    gate(
        "kv-hash-gate-all-empty",
        "expected hashes all empty: wildcards",
        dict.fromkeys(stored, ""),
        None,
    )
    gate(
        "kv-hash-gate-model-only",
        "only model_id expected, and equal",
        {"model_id": stored["model_id"]},
        None,
    )
    for name, value in stored.items():
        gate(
            f"kv-hash-gate-{name.replace('_', '-')}-differs",
            f"expected {name} differs from the stored one",
            {**stored, name: value + "-other"},
            MISMATCH,
        )
    gate(
        "kv-hash-gate-case-differs",
        "expected model_id differs only in letter case: hashes compare as exact strings",
        {"model_id": stored["model_id"].upper()},
        MISMATCH,
    )
    gate(
        "kv-hash-gate-nfd-differs",
        "expected tokenizer_hash is the NFD form of the stored NFC string: no normalization",
        {"tokenizer_hash": stored["tokenizer_hash"].replace("ö", "o\u0308")},
        MISMATCH,
    )
    empty_blob = cv.base_blobs["base"]
    empty_path = cv.files.add("v1/codec/kv-hash-gate-stored-empty.bin", empty_blob)
    cv.add_blob(
        "kv-hash-gate-stored-empty",
        "KV-HASH-GATE",
        "model_id stored empty, expected set: the stored empty string is a wildcard",
        empty_blob,
        result="valid",
        flags=["hash-gate"],
        parse_args={"expect_model_id": "some/model"},
        blob_path=empty_path,
    )


#: The six known hash keys with empty values, in writing order.
_EMPTY_HASHES = [(key.encode("ascii"), b"") for key in bl.HASH_KEYS]


def _unset_blob(edit: Edit, payload: bytes) -> bytes:
    """A blob built from scratch: every field unset (-1), six empty hash strings, ``edit``
    applied, then ``payload``."""
    header = bl.Header(hash_pairs=list(_EMPTY_HASHES))
    edit(header)
    return bl.pack(header, payload)


def empty_and_overflow(cv: CodecVectors) -> None:
    """Blobs without elements whose shapes need care (KV-LOGICAL-SHAPE), and header fields
    whose products or sum exceed 2^63 - 1: exact arithmetic rejects them, a 64-bit reader
    that does not check for overflow wraps and accepts them, or divides by zero."""
    one_f32 = struct.pack("<f", 1.0)
    unset_parents(cv)
    cv.add_blob(
        "kv-logical-shape-zero-tokens-page-size",
        "KV-LOGICAL-SHAPE",
        "PER_TENSOR, kv_head_count 2, head_dim 8, page_size 4, no tokens: the page count "
        "is unknown (0 pages cannot give tokens per page), so K and V are [0, 2, 8]",
        _unset_blob(_set(page_size=4, kv_head_count=2, head_dim=8, scale_payload_len=4), one_f32),
        result="valid",
        flags=["empty", "logical-shape"],
    )
    cv.add_blob(
        "kv-logical-shape-zero-pages",
        "KV-LOGICAL-SHAPE",
        "PER_PAGE_HEAD with scale_shape (0, 2), page_size 4, no tokens: zero pages is no "
        "page count, so K and V are [0, 2, 8]",
        _unset_blob(
            _set(scale_scope=2, page_size=4, kv_head_count=2, head_dim=8, scale_shape=[0, 2]),
            b"",
        ),
        result="valid",
        flags=["empty", "logical-shape"],
    )
    invalid: list[tuple[str, str, str, str, _Set]] = [
        (
            "kv-geometry-heads-times-dim-overflow-empty",
            "KV-LEN",
            "PER_TENSOR, no elements, kv_head_count 0x2400000000000002 x head_dim 8 exceeds "
            "2^63 - 1 (a KV-LEN check: each field alone is valid by KV-GEOMETRY)",
            "kv-unset-per-tensor-empty",
            _set(kv_head_count=0x2400000000000002, head_dim=8),
        ),
        (
            "kv-scale-shape-partial-product-overflow",
            "KV-LEN",
            "EXTERNAL scale_shape (2^62, 4, 0), no scales: the product of the non-zero "
            "dimensions exceeds 2^63 - 1 (a KV-LEN check: EXTERNAL allows any shape)",
            "kv-unset-external-no-scales",
            _set(scale_shape=[2**62, 4, 0]),
        ),
        (
            "kv-len-scale-product-wraps",
            "KV-LEN",
            "EXTERNAL scale_shape (2^32, 2^32) with scale_payload_len 0: the product wraps "
            "to 0 in 64 bits",
            "kv-unset-external-no-scales",
            _set(scale_shape=[2**32, 2**32]),
        ),
        (
            "kv-len-heads-times-dim-wraps",
            "KV-LEN",
            "kv_head_count = head_dim = 2^32 with 8 elements: the product wraps to 0 in 64 "
            "bits (a naive 'elements % 0')",
            "kv-unset-per-tensor-8-elements",
            _set(kv_head_count=2**32, head_dim=2**32),
        ),
        (
            "kv-len-sum-overflows",
            "KV-LEN-SUM",
            "consistent lengths 2^63 - 2, 2^62 - 1 and 4 whose sum exceeds 2^63 - 1; only "
            "the 4 scale bytes follow",
            "kv-unset-per-tensor-empty",
            _set(k_payload_len=INT64_MAX - 1, v_payload_len=2**62 - 1),
        ),
    ]
    for vid, rule, comment, parent, edit in invalid:
        cv.add_blob(
            vid,
            rule,
            comment,
            _edited(cv.unset_parents[parent], edit),
            result="invalid",
            error=CORRUPT,
            flags=["int64-overflow"],
            parent=parent,
            edit=edit_of(edit.fields),
        )


def unset_parents(cv: CodecVectors) -> None:
    """Valid blobs built from scratch (every field unset, six empty hash strings): the
    parents of the overflow and UTF-8 vectors."""
    one_f32 = struct.pack("<f", 1.0)
    cases = [
        (
            "kv-unset-per-tensor-empty",
            "PER_TENSOR, no elements, one float32 scale 1.0",
            _unset_blob(_set(scale_payload_len=4), one_f32),
        ),
        (
            "kv-unset-external-no-scales",
            "EXTERNAL, no elements, no scales stored (scale_shape (0,))",
            _unset_blob(_set(scale_scope=3, scale_shape=[0]), b""),
        ),
        (
            "kv-unset-per-tensor-8-elements",
            "PER_TENSOR, 8 zero elements of K and V, one float32 scale 1.0",
            _unset_blob(
                _set(k_payload_len=16, v_payload_len=8, scale_payload_len=4), bytes(24) + one_f32
            ),
        ),
    ]
    for vid, comment, blob in cases:
        cv.add_blob(vid, "KV-LAYOUT", comment, blob, result="valid", flags=["empty"], decode=False)
        cv.unset_parents[vid] = blob


def utf8_and_alias(cv: CodecVectors) -> None:
    """Hash values that are not well-formed UTF-8 in ways a lenient decoder accepts, and
    the legacy float16 id in scale_dtype."""
    bad_utf8 = [
        (
            "kv-hashes-above-u10ffff",
            "model_id value f4 90 80 80, above U+10FFFF",
            b"\xf4\x90\x80\x80",
        ),
        (
            "kv-hashes-truncated-sequence",
            "model_id value e2 82, a 3-byte sequence cut short",
            b"\xe2\x82",
        ),
    ]
    parent = "kv-unset-per-tensor-empty"
    for vid, comment, value in bad_utf8:
        pairs = [(b"model_id", value), *_EMPTY_HASHES[1:]]
        edit = _set(hash_pairs=pairs)
        cv.add_blob(
            vid,
            "KV-HASHES",
            comment,
            _edited(cv.unset_parents[parent], edit),
            result="invalid",
            error=CORRUPT,
            flags=["hash-section"],
            parent=parent,
            edit=edit_of(edit.fields),
        )
    cv.add_blob(
        "kv-dtype-alias-scale-1",
        "KV-DTYPE-ALIAS",
        "PER_TENSOR with scale_dtype id 1, the legacy float16 id, and the scale float16 1.0: "
        "read as float16 (a writer writes id 2)",
        _unset_blob(_set(scale_dtype_id=1, scale_payload_len=2), struct.pack("<e", 1.0)),
        result="valid",
        flags=["field-corrupt", "scale-dtype"],
    )


def _k_removed(blob: bytes) -> bytes:
    """``blob`` with its K section removed, k_payload_len 0 and the CRC of the new payload:
    the K-less blob of the same V (KV-K-ABSENT)."""
    parsed = bl.parse(blob)
    header = dataclasses.replace(parsed.header, k_payload_len=0, crc=None)
    return bl.pack(header, parsed.payload[parsed.header.k_payload_len :])


def k_absent(cv: CodecVectors, base: bytes) -> None:
    """K-less blobs (KV-K-ABSENT), as upstream's V-only serializer writes them: valid ones,
    then single-field edits of a valid K-less parent that break V's agreement with its
    scales and geometry, or the recorded k_dtype, which every reader still checks."""
    parent = "kv-k-absent-per_page_head-f16"
    k_less = _k_removed(base)
    cv.add_blob(
        parent,
        "KV-K-ABSENT",
        "the base blob (PER_PAGE_HEAD, float16, [2, 4, 2, 8]) with K's 256 bytes removed, "
        "k_payload_len 0, k_dtype float16 still recorded, CRC of V and scales: a K-less blob; "
        "decode gives V, and K as an empty tensor",
        k_less,
        result="valid",
        flags=["k-absent"],
    )
    bf16 = _edited(k_less, _set(k_dtype_id=3))
    cv.add_blob(
        "kv-k-absent-k-dtype-bfloat16",
        "KV-K-ABSENT",
        "the K-less parent recording k_dtype bfloat16 (the CRC does not cover it): valid",
        bf16,
        result="valid",
        flags=["k-absent"],
    )
    one_f32 = struct.pack("<f", 1.0)
    cv.add_blob(
        "kv-k-absent-per_tensor-unset",
        "KV-K-ABSENT",
        "PER_TENSOR, geometry unset, 8 zero V elements, one float32 scale 1.0, no K "
        "(the shape of upstream 0.5.6's V-only serializer's blobs): decodes flat",
        _unset_blob(_set(v_payload_len=8, scale_payload_len=4), bytes(8) + one_f32),
        result="valid",
        flags=["k-absent"],
    )
    invalid: list[tuple[str, str, str, _Set]] = [
        (
            "kv-k-absent-k-dtype-float32",
            "KV-K-DTYPE",
            "k_dtype float32 (id 4) in the K-less parent: k_dtype is recorded and checked "
            "even without K bytes",
            _set(k_dtype_id=4),
        ),
        (
            "kv-k-absent-heads",
            "KV-SCALE-SHAPE",
            "kv_head_count 4 in the K-less parent: V's (2, 2) scales disagree with it",
            _set(kv_head_count=4),
        ),
        (
            "kv-k-absent-head-dim",
            "KV-LEN",
            "head_dim 5 in the K-less parent: V's 128 elements are no whole number of "
            "tokens of 2 heads x 5",
            _set(head_dim=5),
        ),
        (
            "kv-k-absent-page-size",
            "KV-SCALE-SHAPE",
            "page_size 3 in the K-less parent: V's 8 tokens are not 2 pages x 3",
            _set(page_size=3),
        ),
        (
            "kv-k-absent-scale-len",
            "KV-LEN",
            "v_payload_len 144, scale_payload_len 0 in the K-less parent: same total, the "
            "scales moved into V",
            _set(v_payload_len=144, scale_payload_len=0),
        ),
    ]
    for vid, rule, comment, edit in invalid:
        cv.add_blob(
            vid,
            rule,
            comment,
            _edited(k_less, edit),
            result="invalid",
            error=CORRUPT,
            flags=["k-absent", "field-corrupt"],
            parent=parent,
            edit=edit_of(edit.fields),
        )
    parsed = bl.parse(base)
    v_removed = dataclasses.replace(parsed.header, v_payload_len=0, crc=None)
    k_len = parsed.header.k_payload_len
    cv.add_blob(
        "kv-k-absent-v-absent-instead",
        "KV-K-ABSENT",
        "the base blob with V's 128 bytes removed and v_payload_len 0, CRC recomputed: "
        "K without V. Only K may be absent (V is what the scales describe)",
        bl.pack(v_removed, parsed.payload[:k_len] + parsed.payload[k_len + 128 :]),
        result="invalid",
        error=CORRUPT,
        flags=["k-absent", "field-corrupt"],
        parent=cv.base_ids["base"],
        edit=edit_of(["v_payload_len"], crc="recomputed", payload="changed"),
    )


def build(cv: CodecVectors) -> None:
    """All hand-built blob vectors, in a fixed order."""
    base = cv.base_blobs["base"]
    field_corruptions(cv, base)
    redundant_disagreements(cv, base)
    hash_sections(cv, cv.base_blobs["hashes"])
    crc_variants(cv, base)
    truncations(cv, base)
    trailing(cv, base)
    hash_gate(cv, cv.base_blobs["hashes"])
    empty_and_overflow(cv)
    utf8_and_alias(cv)
    k_absent(cv, base)
