"""The encoded-KV v2 draft's vectors: golden_blobs/v2/codec.json and v2/codec/.

Every blob is built byte by byte from SPEC.md's v2 byte table with the independent header
model (conformance/core/blob_model.py) and ``zlib.crc32``: nothing here runs the reference,
whose reader the vectors check (the v1 generator runs it; the v2 one does not need to, since
a v2 blob involves no quantization). Each vector's outcome is the one SPEC.md's v2 chapter
decides, written here beside the vector.

Each vector names ``versions``, the header versions whose readers must give ``expected``
(every v2 vector: [2]), and ``v1_reader``, what a v1-only reader must do instead: refuse it,
with the rule it names. Every invalid vector is one edit of a valid v2 parent: P (V only),
Q (K and V) or G (K and V with ids, geometry and a hash). Fields edited without touching the
CRC leave it stale ("crc": "kept"); otherwise the v2 CRC is recomputed over the edited header
and payload ("recomputed"), so that only the vector's own rule can refuse it.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Callable
from typing import Any

from ...reference_impl.kv_codec.header_fields import SCALE_AWARE_SCOPES
from ..core import blob_model as bl
from ..core.digests import sha256
from .common import FileSet, GenerationError

CORRUPT = "CorruptEncodedKVError"
MISMATCH = "CodecMismatchError"
UNSUPPORTED = "UnsupportedConfigError"

#: SPEC.md, "Encoded-KV v2 (draft)": the fork commit the chapter was read from.
DRAFT_COMMIT = "01859d4e0f5178b27b238e3b49855d25ff7d4369"
#: u16 values of the v2 header (SPEC.md, v2 byte table).
VERSION_2 = 2
SCHEME_COMPUTED, SCHEME_RAW_UNIT = 0, 1
SCOPE_NONE = 4
BF16, F16, F16_LEGACY, F32, E4M3, E5M2 = 3, 2, 1, 4, 7, 8
#: dtype id -> the name a reader returns (SPEC.md, "Dtype table").
DTYPE_NAMES = {F16_LEGACY: "float16", F16: "float16", BF16: "bfloat16", F32: "float32"}
DTYPE_NAMES[E4M3] = "float8_e4m3fn"
ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float8_e4m3fn": 1}
#: What a v1 reader must do with a blob whose header says version 2 (KV-VERSION).
V1_REFUSES_VERSION = {"error": CORRUPT, "rule": "KV-VERSION"}

NOTES = {
    "raw-unit": "A v2 RAW_UNIT blob: e4m3 V codes stored as they were, scope NONE, no scales.",
    "v1-reader": "A v1-only reader must refuse it with a typed error (v1_reader).",
    "k-absent": "A K-less blob (k_payload_len 0, k_dtype a tag): V only (KV-K-ABSENT).",
    "empty": "Zero elements: an empty payload.",
    "hashes": "Hash strings set.",
    "logical-shape": "Decode must return K and V in the logical shape recorded here.",
    "nonfinite-codes": "V codes that are NaN or -0 in e4m3: they come back bit for bit.",
    "field-corrupt": "One header field set to a value the rule forbids, the CRC resealed.",
    "scheme-scope": "A scheme x scope x scale combination the draft's code accepts and the "
    "v2 chapter refuses (SPEC.md, v2 decisions).",
    "header-crc": "One header bit flipped, CRC kept: only the header CRC (KV2-CRC) sees it; "
    "in a v1 blob the same flip would give a valid blob that means something else.",
    "crc": "The CRC field or what it covers is wrong.",
    "crc32c": "The CRC field holds CRC-32C (Castagnoli) instead of CRC-32 (IEEE).",
    "truncated": "The buffer ends early.",
    "trailing": "Bytes follow the payload.",
    "allow-trailing": "Read with allow_trailing=True.",
    "hash-gate": "Read with expected hashes (KV-HASH-GATE).",
    "relabelled": "A v2 blob relabelled as version 1: a v2 reader must not read it as v1.",
}


def v2_crc(header_fields: bytes, payload: bytes) -> int:
    """KV2-CRC: CRC-32 (IEEE) of the header bytes before the CRC field, then the payload."""
    return zlib.crc32(header_fields + payload) & 0xFFFFFFFF


def _header_len(h: bl.Header, payload: bytes) -> int:
    return len(bl.pack(dataclasses.replace(h, crc=0), payload)) - len(payload)


def sealed(h: bl.Header, payload: bytes) -> bytes:
    """The blob of ``h`` and ``payload`` with its v2 CRC (``h.crc`` ignored)."""
    blob = bl.pack(dataclasses.replace(h, crc=0), payload)
    head = _header_len(h, payload)
    crc = v2_crc(blob[: head - 4], payload)
    return blob[: head - 4] + struct.pack("<I", crc) + payload


def _pairs(**values: str) -> list[tuple[bytes, bytes]]:
    """The six canonical hash pairs in writing order, empty unless given."""
    return [(k.encode(), values.get(k, "").encode()) for k in bl.HASH_KEYS]


def _raw(**fields: Any) -> bl.Header:
    """A v2 RAW_UNIT header: version 2, scope NONE, e4m3 V, float32 scale tag, no scales."""
    base: dict[str, Any] = {
        "version": VERSION_2,
        "scale_scope": SCOPE_NONE,
        "k_dtype_id": BF16,
        "v_dtype_id": E4M3,
        "scale_dtype_id": F32,
        "reserved": SCHEME_RAW_UNIT,
        "hash_pairs": _pairs(),
    }
    return bl.Header(**(base | fields))


#: Parent P's V: the e4m3 codes of 1.0, -1.0, 0 and 448.
P_V = bytes.fromhex("38b8007e")
#: SPEC.md's worked example: P is 217 bytes and its CRC is this.
P_CRC = 0xC71B1532
#: Q's K: four bfloat16 values (1.0, -2.0, 0.5, 3.0).
Q_K = struct.pack("<4H", 0x3F80, 0xC000, 0x3F00, 0x4040)


def _g_payload() -> tuple[bytes, bytes]:
    """G's K (64 bfloat16 values) and V (64 e4m3 codes): fixed, varied patterns."""
    k = b"".join(struct.pack("<H", 0x3C00 + 37 * i) for i in range(64))
    v = bytes((13 * i + 5) & 0x77 for i in range(64))
    return k, v


class V2Vectors:
    """Accumulates the v2 vectors and their files."""

    def __init__(self, files: FileSet) -> None:
        self.files = files
        self.vectors: list[dict[str, Any]] = []
        self.blobs: dict[str, bytes] = {}
        self.headers: dict[str, tuple[bl.Header, bytes]] = {}

    def _record(
        self,
        vid: str,
        rule: str,
        comment: str,
        blob: bytes,
        *,
        flags: list[str],
        expected: dict[str, Any],
        parse: dict[str, Any] | None = None,
        parent: str | None = None,
        edit: dict[str, Any] | None = None,
        alt_rules: list[str] | None = None,
        v1_reader: dict[str, str] = V1_REFUSES_VERSION,
        decode: dict[str, Any] | None = None,
    ) -> None:
        result = "invalid" if "error" in expected else "valid"
        if result == "invalid" and (parent is None or edit is None):
            raise GenerationError(f"{vid}: an invalid vector needs a parent and an edit")
        path = self.files.add(f"v2/codec/{vid}.bin", blob)
        vec: dict[str, Any] = {
            "id": vid,
            "rule": rule,
            "comment": comment,
            "flags": sorted({*flags, "v1-reader"}),
            "result": result,
            "blob": path,
            "blob_sha256": sha256(blob),
            "parse": parse or {},
            "expected": expected,
            "versions": [VERSION_2],
            "v1_reader": dict(v1_reader),
        }
        if parent is not None:
            vec["parent"] = parent
            vec["edit"] = edit
        if alt_rules:
            vec["alt_rules"] = sorted(alt_rules)
        if decode is not None:
            vec["decode"] = decode
        self.vectors.append(vec)
        self.blobs[vid] = blob

    # -- valid --------------------------------------------------------------------------------

    def valid(
        self,
        vid: str,
        rule: str,
        comment: str,
        h: bl.Header,
        k: bytes,
        v: bytes,
        *,
        flags: list[str],
        shape: list[int] | None = None,
    ) -> bytes:
        """A valid RAW_UNIT blob, its header fields and its decode expectations worked out
        from ``h`` itself (``shape``: the logical shape of K and V, flat if None)."""
        h = dataclasses.replace(h, k_payload_len=len(k), v_payload_len=len(v))
        payload = k + v
        blob = sealed(h, payload)
        self.headers[vid] = (h, payload)
        self._record(
            vid,
            rule,
            comment,
            blob,
            flags=["raw-unit", *flags],
            expected={"header": self._fields(h, payload)},
            decode=self._decode(h, k, v, shape),
        )
        return blob

    @staticmethod
    def _fields(h: bl.Header, payload: bytes) -> dict[str, Any]:
        """What codec.parse returns for a valid ``h`` (TESTEE.md, codec.parse)."""
        hashes = {key.decode(): value.decode() for key, value in h.hash_pairs}
        return {
            "scale_scope": h.scale_scope,
            "k_dtype": DTYPE_NAMES[h.k_dtype_id],
            "v_dtype": DTYPE_NAMES[h.v_dtype_id],
            "scale_dtype": DTYPE_NAMES[h.scale_dtype_id],
            "layer_id": h.layer_id,
            "chunk_id": h.chunk_id,
            "chunk_size": h.chunk_size,
            "page_size": h.page_size,
            "kv_head_count": h.kv_head_count,
            "head_dim": h.head_dim,
            "scale_shape": list(h.scale_shape),
            "k_payload_len": h.k_payload_len,
            "v_payload_len": h.v_payload_len,
            "scale_payload_len": h.scale_payload_len,
            "header_len": _header_len(h, payload),
            **{key: hashes.get(key, "") for key in bl.HASH_KEYS},
        }

    @staticmethod
    def _decode(h: bl.Header, k: bytes, v: bytes, shape: list[int] | None) -> dict[str, Any]:
        """KV2-RAW-BYTES: decode returns the K bytes and the V codes as stored (a K-less
        blob's K empty and 1-D), an empty 1-D float32 scale tensor, and refuses to widen V."""
        k_name = DTYPE_NAMES[h.k_dtype_id]
        v_shape = shape if shape is not None else [len(v)]
        k_shape = v_shape if k else [0]

        def section(data: bytes, dtype: str, shape: list[int]) -> dict[str, Any]:
            return {"dtype": dtype, "nbytes": len(data), "sha256": sha256(data), "shape": shape}

        return {
            "payload": {
                "k": section(k, k_name, k_shape),
                "v": section(v, "float8_e4m3fn", v_shape),
                "scales": section(b"", "float32", [0]),
            },
            "dequant": {"out_v_dtype": "float16", "error": UNSUPPORTED},
        }

    # -- invalid ------------------------------------------------------------------------------

    def edited(
        self,
        vid: str,
        rule: str,
        comment: str,
        parent: str,
        changes: dict[str, Any],
        *,
        flags: list[str],
        reseal: bool = True,
        error: str = CORRUPT,
        alt_rules: list[str] | None = None,
        v1_reader: dict[str, str] = V1_REFUSES_VERSION,
        payload: bytes | None = None,
    ) -> None:
        """``parent`` with header ``changes`` (and ``payload``), its CRC resealed over the
        edit or, with ``reseal=False``, left as the parent's (stale)."""
        h, old_payload = self.headers[parent]
        new = dataclasses.replace(h, **changes)
        body = old_payload if payload is None else payload
        if reseal:
            blob = sealed(new, body)
        else:
            crc = struct.unpack_from("<I", self.blobs[parent], _header_len(h, old_payload) - 4)
            blob = bl.pack(dataclasses.replace(new, crc=crc[0]), body)
        names = sorted("hash_pairs" if c == "hash_pairs" else c for c in changes)
        edit: dict[str, Any] = {
            "fields": names,
            "crc": "recomputed" if reseal else "kept",
            "payload": "kept" if payload is None else "changed",
        }
        self._record(
            vid,
            rule,
            comment,
            blob,
            flags=flags,
            expected={"error": error},
            parent=parent,
            edit=edit,
            alt_rules=alt_rules,
            v1_reader=v1_reader,
        )

    def raw_edit(
        self,
        vid: str,
        rule: str,
        comment: str,
        parent: str,
        make: Callable[[bytes], bytes],
        edit: dict[str, Any],
        *,
        flags: list[str],
        alt_rules: list[str] | None = None,
        parse: dict[str, Any] | None = None,
        expected: dict[str, Any] | None = None,
        v1_reader: dict[str, str] = V1_REFUSES_VERSION,
    ) -> None:
        """``make(parent's blob)``: a byte-level edit (a flip, a cut, appended bytes)."""
        self._record(
            vid,
            rule,
            comment,
            make(self.blobs[parent]),
            flags=flags,
            expected=expected or {"error": CORRUPT},
            parse=parse,
            parent=parent,
            edit=edit,
            alt_rules=alt_rules,
            v1_reader=v1_reader,
        )

    def expected_of(self, vid: str) -> dict[str, Any]:
        """The ``expected`` of the vector ``vid`` recorded before."""
        return dict(next(v for v in self.vectors if v["id"] == vid)["expected"])

    def crc_of_parent(self, parent: str) -> tuple[int, bytes, bytes]:
        """(header length, header bytes before the CRC, payload) of a parent."""
        h, payload = self.headers[parent]
        head = _header_len(h, payload)
        return head, self.blobs[parent][: head - 4], payload


def _flip(offset: int, mask: int = 1) -> Callable[[bytes], bytes]:
    def make(blob: bytes) -> bytes:
        out = bytearray(blob)
        out[offset] ^= mask
        return bytes(out)

    return make


def _with_crc(crc: int) -> Callable[[bytes], bytes]:
    """The blob with its CRC field (the 4 bytes before the payload) replaced."""

    def make(blob: bytes) -> bytes:
        head = bl.layout(blob).header_len
        assert head is not None
        return blob[: head - 4] + struct.pack("<I", crc) + blob[head:]

    return make


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected 0x82F63B78), bit by bit: the wrong-algorithm vector."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def build_valid(vv: V2Vectors) -> None:
    p = vv.valid(
        "kv2-raw_unit-none-v_only",
        "KV2-SCHEME",
        "parent P: a V-only RAW_UNIT blob (e4m3 codes of 1, -1, 0, 448), bfloat16 K tag, ids "
        "and geometry unset, six empty hashes; SPEC.md's worked example (217 bytes)",
        _raw(),
        b"",
        P_V,
        flags=["k-absent"],
    )
    crc = struct.unpack_from("<I", p, 209)[0]
    if len(p) != 217 or crc != P_CRC:
        raise GenerationError(f"parent P is {len(p)} bytes with CRC {crc:#x}, not SPEC's")
    vv.valid(
        "kv2-raw_unit-none-kv-bf16",
        "KV2-SCHEME",
        "parent Q: K (4 bfloat16 values) then V (4 e4m3 codes), RAW_UNIT",
        _raw(),
        Q_K,
        P_V,
        flags=[],
    )
    vv.valid(
        "kv2-raw_unit-none-kv-f16",
        "KV-K-DTYPE",
        "Q with K declared float16 (id 2)",
        _raw(k_dtype_id=F16),
        Q_K,
        P_V,
        flags=[],
    )
    vv.valid(
        "kv2-raw_unit-none-legacy-f16-id",
        "KV-K-DTYPE",
        "Q with K declared by the legacy float16 id 1, read as float16",
        _raw(k_dtype_id=F16_LEGACY),
        Q_K,
        P_V,
        flags=[],
    )
    g_k, g_v = _g_payload()
    vv.valid(
        "kv2-raw_unit-none-geometry",
        "KV-GEOMETRY",
        "parent G: K (64 bfloat16) then V (64 codes); layer 3, chunk 7, chunk_size 4, "
        "page_size 4, 2 heads of 8: the logical shape [1, 4, 2, 8]; model_id 'm'",
        _raw(
            layer_id=3,
            chunk_id=7,
            chunk_size=4,
            page_size=4,
            kv_head_count=2,
            head_dim=8,
            hash_pairs=_pairs(model_id="m"),
        ),
        g_k,
        g_v,
        flags=["hashes", "logical-shape"],
        shape=[1, 4, 2, 8],
    )
    vv.valid(
        "kv2-raw_unit-none-hashes",
        "KV-HASHES",
        "P with model_id 'm' and kv_layout 'NHD': the hash bytes are covered by the CRC",
        _raw(hash_pairs=_pairs(model_id="m", kv_layout="NHD")),
        b"",
        P_V,
        flags=["hashes", "k-absent"],
    )
    vv.valid(
        "kv2-raw_unit-none-empty",
        "KV-LEN",
        "P with no V element: what the V-only writer stores for an empty tensor",
        _raw(),
        b"",
        b"",
        flags=["empty"],
    )
    vv.valid(
        "kv2-raw_unit-none-nan-codes",
        "KV2-RAW-BYTES",
        "P with V codes 7f ff 80 00 (NaN, -NaN, -0, 0): read back bit for bit",
        _raw(),
        b"",
        bytes.fromhex("7fff8000"),
        flags=["k-absent", "nonfinite-codes"],
    )
    hashes = "kv2-raw_unit-none-hashes"
    vv.raw_edit(
        "kv2-hash-gate-match",
        "KV-HASH-GATE",
        "the hashes vector read expecting model_id 'm' and kv_layout 'NHD'",
        hashes,
        lambda blob: blob,
        {"parse": ["expected_hashes"]},
        flags=["hash-gate", "hashes"],
        parse={"expected_hashes": {"model_id": "m", "kv_layout": "NHD"}},
        expected=vv.expected_of(hashes),
    )
    vv.raw_edit(
        "kv2-hash-gate-mismatch",
        "KV-HASH-GATE",
        "the hashes vector read expecting model_id 'x': the hash gate refuses it",
        hashes,
        lambda blob: blob,
        {"parse": ["expected_hashes"]},
        flags=["hash-gate", "hashes"],
        parse={"expected_hashes": {"model_id": "x"}},
        expected={"error": MISMATCH},
    )
    vv.raw_edit(
        "kv2-raw_unit-none-allow-trailing",
        "KV-TRAILING",
        "P then 16 zero bytes, read with allow_trailing (a framed buffer): the blob is P",
        "kv2-raw_unit-none-v_only",
        lambda blob: blob + bytes(16),
        {"appended": 16, "parse": ["allow_trailing"]},
        flags=["allow-trailing", "trailing", "k-absent"],
        parse={"allow_trailing": True},
        expected=vv.expected_of("kv2-raw_unit-none-v_only"),
    )


def build_fields(vv: V2Vectors) -> None:
    """One field each, the CRC resealed: only the vector's rule can refuse it."""
    P, Q, G = "kv2-raw_unit-none-v_only", "kv2-raw_unit-none-kv-bf16", "kv2-raw_unit-none-geometry"
    fc = ["field-corrupt"]
    ss = ["scheme-scope"]
    for scope in SCALE_AWARE_SCOPES:  # the names only: the values are the byte table's 0..3
        vv.edited(
            f"kv2-raw_unit-scope-{scope.name.lower()}",
            "KV2-SCOPE",
            f"P with scope {int(scope)} ({scope.name}): a RAW_UNIT blob's scope is NONE",
            P,
            {"scale_scope": scope},
            flags=ss,
        )
    vv.edited(
        "kv2-scope-5",
        "KV2-SCOPE",
        "P with scope 5 (no such scope)",
        P,
        {"scale_scope": 5},
        flags=fc,
    )
    vv.edited(
        "kv2-scheme-computed",
        "KV2-SCHEME",
        "P with scheme 0 (COMPUTED_PER_TENSOR): v2 is written for RAW_UNIT only",
        P,
        {"reserved": SCHEME_COMPUTED},
        flags=ss,
    )
    vv.edited(
        "kv2-scheme-computed-per_tensor-scaled",
        "KV2-SCHEME",
        "P as a scale-aware v2 blob: scheme 0, scope PER_TENSOR, one float32 scale 1.0 stored",
        P,
        {"reserved": SCHEME_COMPUTED, "scale_scope": 0, "scale_payload_len": 4},
        flags=ss,
        payload=P_V + struct.pack("<f", 1.0),
    )
    vv.edited(
        "kv2-none-with-scales",
        "KV2-NO-SCALES",
        "P declaring scale_shape (1,) and one float32 scale stored (lengths consistent)",
        P,
        {"scale_shape": [1], "scale_payload_len": 4},
        flags=ss,
        payload=P_V + struct.pack("<f", 1.0),
    )
    vv.edited(
        "kv2-none-scale-shape-no-bytes",
        "KV2-NO-SCALES",
        "P declaring scale_shape (2, 2) and no scale byte",
        P,
        {"scale_shape": [2, 2]},
        flags=ss,
    )
    vv.edited(
        "kv2-scheme-2",
        "KV2-SCHEME",
        "P with scheme 2 (no such scheme)",
        P,
        {"reserved": 2},
        flags=fc,
    )
    vv.edited(
        "kv2-scheme-ffff", "KV2-SCHEME", "P with scheme 0xffff", P, {"reserved": 0xFFFF}, flags=fc
    )
    vv.edited(
        "kv2-magic-minor-2",
        "KV-MAGIC",
        "P with the magic's version triplet 1.0.2",
        P,
        {"magic": b"LMCKV\x01\x00\x02"},
        flags=fc,
        v1_reader={"error": CORRUPT, "rule": "KV-MAGIC"},
    )
    for version in (0, 3):
        vv.edited(
            f"kv2-version-{version}",
            "KV-VERSION",
            f"P with header version {version}",
            P,
            {"version": version},
            flags=fc,
        )
    for v_id, what in ((E5M2, "e5m2"), (F16, "f16"), (0, "0"), (9, "9")):
        vv.edited(
            f"kv2-v-dtype-{what}",
            "KV-V-DTYPE",
            f"P with v_dtype id {v_id}: RAW_UNIT V is e4m3 codes (id 7)",
            P,
            {"v_dtype_id": v_id},
            flags=fc,
        )
    vv.edited(
        "kv2-k-dtype-e4m3",
        "KV-K-DTYPE",
        "Q with K declared e4m3 (id 7)",
        Q,
        {"k_dtype_id": E4M3},
        flags=fc,
    )
    vv.edited(
        "kv2-k-dtype-0",
        "KV-K-DTYPE",
        "P with k_dtype id 0 (no dtype)",
        P,
        {"k_dtype_id": 0},
        flags=fc,
    )
    vv.edited(
        "kv2-scale-dtype-0",
        "KV-SCALE-DTYPE",
        "P with scale_dtype id 0: the tag names no dtype a v1 scale may have",
        P,
        {"scale_dtype_id": 0},
        flags=fc,
    )
    vv.edited(
        "kv2-scale-shape-9-dims",
        "KV-SCALE-SHAPE-N",
        "P with scale_shape_n 9 (and nine dimensions of 0)",
        P,
        {"scale_shape": [0] * 9},
        flags=fc,
    )
    for vid, lens, parent, comment, alt in (
        ("kv2-len-k-negative", (-1, 5, 0), P, "k_payload_len -1, v_payload_len 5 (sum kept)", None),
        ("kv2-len-v-negative", (8, -4, 0), P, "k_payload_len 8, v_payload_len -4 (sum kept)", None),
        (
            "kv2-len-scale-negative",
            (0, 5, -1),
            P,
            "v_payload_len 5, scale_payload_len -1 (sum kept)",
            ["KV2-NO-SCALES"],
        ),
        ("kv2-len-k-odd", (7, 5, 0), Q, "Q with k_payload_len 7: not whole bfloat16 values", None),
        ("kv2-len-kv-count", (6, 6, 0), Q, "Q with 3 K elements against 6 V elements", None),
    ):
        vv.edited(
            vid,
            "KV-LEN",
            comment,
            parent,
            dict(zip(bl.LENGTH_FIELDS, lens, strict=True)),
            flags=fc,
            alt_rules=alt,
        )
    vv.edited(
        "kv2-len-v-absent",
        "KV-K-ABSENT",
        "Q with k_payload_len 12, v_payload_len 0: K without V",
        Q,
        {"k_payload_len": 12, "v_payload_len": 0},
        flags=fc,
        alt_rules=["KV-LEN"],
    )
    vv.edited(
        "kv2-geometry-page-size-0",
        "KV-GEOMETRY",
        "G with page_size 0",
        G,
        {"page_size": 0},
        flags=fc,
    )
    vv.edited(
        "kv2-ids-layer-minus-2", "KV-IDS", "G with layer_id -2", G, {"layer_id": -2}, flags=fc
    )
    vv.edited(
        "kv2-hashes-duplicate-key",
        "KV-HASHES",
        "P with a second model_id pair",
        P,
        {"hash_pairs": [*_pairs(), (b"model_id", b"x")]},
        flags=fc,
    )
    vv.raw_edit(
        "kv2-version-1-crc-v1",
        "KV-SCOPE",
        "P relabelled version 1 with a v1 (payload-only) CRC: a v1 header with scope NONE and "
        "slot 18 = 1, refused in either version",
        P,
        _relabelled_v1,
        {"fields": ["version"], "crc": "changed", "payload": "kept"},
        flags=["relabelled"],
        alt_rules=["KV-RESERVED"],
        v1_reader={"error": CORRUPT, "rule": "KV-SCOPE"},
    )


def _relabelled_v1(blob: bytes) -> bytes:
    """A v2 blob as version 1, with the CRC a v1 writer would store (its payload's)."""
    found = bl.layout(blob)
    head, payload = found.header_len, found.payload
    assert head is not None and payload is not None
    out = bytearray(blob)
    found.field("version").put(out, 1)
    found.field("crc").put(out, zlib.crc32(blob[payload]))
    return bytes(out)


def build_bytes(vv: V2Vectors) -> None:
    """Cuts, trailing bytes, CRC variants and the header bit flips."""
    P, G = "kv2-raw_unit-none-v_only", "kv2-raw_unit-none-geometry"
    _, fields, payload = vv.crc_of_parent(P)
    vv.raw_edit(
        "kv2-truncated-payload",
        "KV-LEN-SUM",
        "P without its last byte",
        P,
        lambda blob: blob[:-1],
        {"truncated_at": 216},
        flags=["truncated"],
    )
    vv.raw_edit(
        "kv2-truncated-crc",
        "KV-TRUNCATED",
        "P cut inside its CRC field (211 bytes)",
        P,
        lambda blob: blob[:211],
        {"truncated_at": 211},
        flags=["truncated"],
    )
    vv.raw_edit(
        "kv2-trailing-1",
        "KV-TRAILING",
        "P then one zero byte, read strictly (the draft at its commit ignores it)",
        P,
        lambda blob: blob + b"\x00",
        {"appended": 1},
        flags=["trailing"],
    )
    for vid, crc, comment, flags in (
        ("kv2-crc-payload-only", zlib.crc32(payload), "the v1 CRC: of the payload only", ["crc"]),
        (
            "kv2-crc-crc32c",
            crc32c(fields + payload),
            "CRC-32C over the v2 range",
            ["crc", "crc32c"],
        ),
        ("kv2-crc-header-only", zlib.crc32(fields), "the CRC of the header bytes only", ["crc"]),
        (
            "kv2-crc-with-zeroed-field",
            zlib.crc32(fields + bytes(4) + payload),
            "the CRC over the header with its CRC field zeroed, then the payload",
            ["crc"],
        ),
    ):
        vv.raw_edit(
            vid,
            "KV2-CRC",
            f"P with {comment}",
            P,
            _with_crc(crc),
            {"crc": "changed"},
            flags=flags,
        )
    flips: tuple[tuple[str, str, int, int, str, list[str] | None], ...] = (
        ("k-dtype", G, 12, 1, "k_dtype bfloat16 -> float16 (same size)", None),
        ("layer-id", G, 20, 1, "layer_id 3 -> 2", None),
        ("chunk-id", G, 28, 1, "chunk_id 7 -> 6", None),
        ("chunk-size", G, 36, 1, "chunk_size 4 -> 5", None),
        ("page-size", G, 44, 1, "page_size 4 -> 5", None),
        ("kv-head-count", G, 52, 1, "kv_head_count 2 -> 3", ["KV-LEN"]),
        ("head-dim", G, 60, 1, "head_dim 8 -> 9", ["KV-LEN"]),
        ("hash-key", G, 104, 1, "hash key 'model_id' -> 'lodel_id' (an unknown key)", None),
        ("hash-value", G, 114, 1, "model_id 'm' -> 'l'", None),
        ("scale-dtype", P, 16, 1, "scale_dtype float32 -> float64", None),
        ("scheme", P, 18, 1, "scheme RAW_UNIT -> COMPUTED_PER_TENSOR", ["KV2-SCHEME"]),
        ("scope", P, 10, 1, "scope NONE -> 5", ["KV2-SCOPE"]),
        ("v-len-shrink", P, 84, 4, "v_payload_len 4 -> 0 (the codes left over)", ["KV-TRAILING"]),
        ("payload-first", P, 213, 1, "the first V code", None),
        ("payload-last", P, 216, 1, "the last V code", None),
        ("crc", P, 209, 1, "the CRC's low bit", None),
    )
    for name, parent, offset, mask, comment, alt in flips:
        in_payload = offset >= vv.crc_of_parent(parent)[0]
        in_crc = not in_payload and offset >= vv.crc_of_parent(parent)[0] - 4
        edit: dict[str, Any] = {"crc": "changed" if in_crc else "kept"}
        if in_payload:
            edit["payload"] = "changed"
        elif not in_crc:
            found = bl.layout(vv.blobs[parent])
            field = next(f for f in found.fields if f.offset <= offset < f.end)
            edit |= {"fields": [_model_field(field.name)], "payload": "kept"}
        vv.raw_edit(
            f"kv2-flip-{name}",
            "KV2-CRC",
            f"{'G' if parent == G else 'P'} with bit {mask.bit_length() - 1} of byte "
            f"{offset} flipped: {comment}; the CRC is the parent's",
            parent,
            _flip(offset, mask),
            edit,
            flags=["header-crc", "crc"] if not (in_payload or in_crc) else ["crc"],
            alt_rules=alt,
        )


def _model_field(layout_name: str) -> str:
    """A blob_model.layout field name -> the blob_model.Header attribute it belongs to."""
    return "hash_pairs" if layout_name.startswith("hash[") else layout_name


def build(files: FileSet) -> list[dict[str, Any]]:
    """Every v2 vector; files under v2/codec/."""
    vv = V2Vectors(files)
    build_valid(vv)
    build_fields(vv)
    build_bytes(vv)
    return vv.vectors
