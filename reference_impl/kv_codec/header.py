"""The encoded-KV blob v1: header fields, their byte layout, and the strict reader.

Byte layout (SPEC.md, "Blob header"), all integers little-endian::

    0   8  magic            b"LMCKV\\x01\\x00\\x01"
    8   2  version          u16, 1
    10  2  scale_scope      u16, ScaleScope
    12  2  k_dtype_id       u16, dtype table
    14  2  v_dtype_id       u16
    16  2  scale_dtype_id   u16
    18  2  reserved         u16, 0
    20  8  layer_id         i64, -1 = unset
    28  8  chunk_id         i64
    36  8  chunk_size       i64
    44  8  page_size        i64
    52  8  kv_head_count    i64
    60  8  head_dim         i64
    68  8  scale_shape_n    i64, 0..8
    76  8n scale_shape      i64 each
    ..  24 k/v/scale_payload_len  i64 x 3
    ..  2  hash_count       u16, then per pair: u16 len + UTF-8 key, u16 len + UTF-8 value
    ..  4  payload_crc32    u32, CRC-32 (IEEE, as zlib.crc32) of the payload only

followed by the payload: K bytes, V bytes, scale bytes.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import torch

from lmckv.reference_impl.dtypes import DTYPE_TO_INT, INT_TO_DTYPE
from lmckv.reference_impl.kv_codec.checksum import payload_crc32
from lmckv.reference_impl.kv_codec.errors import CorruptEncodedKVError, UnsupportedConfigError
from lmckv.reference_impl.kv_codec.memo import BoundedMemo

#: KV-MAGIC: "LMCKV" then the version triplet 1.0.1.
CODEC_MAGIC: bytes = b"LMCKV\x01\x00\x01"

_FIXED = struct.Struct("<8s6H7q")
FIXED_HEADER_LEN: int = _FIXED.size  # 76
_LENS = struct.Struct("<3q")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")

INT64_MAX = 2**63 - 1

#: KV-SCALE-SHAPE-N: the reader refuses more scale dimensions than this.
MAX_SCALE_DIMS = 8

# What follows the fixed header up to the hash pairs, by scale_shape_n: the scale shape,
# the three payload lengths and the hash count.
_SHAPE_LENS_COUNT = tuple(struct.Struct(f"<{n}q3qH") for n in range(MAX_SCALE_DIMS + 1))
_DIMS = tuple(struct.Struct(f"<{n}q") for n in range(MAX_SCALE_DIMS + 1))

#: KV-K-DTYPE / KV-V-DTYPE / KV-SCALE-DTYPE: what a v1 blob may declare.
K_DTYPES = (torch.float16, torch.bfloat16)
V_DTYPES = (torch.float8_e4m3fn,)
SCALE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class CodecVersion(IntEnum):
    """The u16 at offset 8. Only V1 exists."""

    V1 = 1


class ScaleScope(IntEnum):
    """The u16 at offset 10: how V's FP8 scales are grouped (SPEC.md, "Scale scopes")."""

    PER_TENSOR = 0
    PER_LAYER_HEAD = 1
    PER_PAGE_HEAD = 2
    EXTERNAL = 3


@dataclass
class CodecHashes:
    """The six identity strings of the header's hash section (KV-HASHES).

    An empty string means "not provided" and matches anything in the hash gate.
    Writers emit all six, in this order, even when empty.
    """

    model_id: str = ""
    model_revision_hash: str = ""
    tokenizer_hash: str = ""
    rope_config_hash: str = ""
    attention_backend: str = ""
    kv_layout: str = ""

    # The order writers emit the pairs in, and the hash gate checks them in. Not a field:
    # it has no annotation.
    _CHECK_ORDER = (
        "model_id",
        "model_revision_hash",
        "tokenizer_hash",
        "rope_config_hash",
        "attention_backend",
        "kv_layout",
    )


HASH_FIELDS: tuple[str, ...] = CodecHashes._CHECK_ORDER


@dataclass
class EncodedKV:
    """One blob: its header fields and its payload (K bytes, V bytes, scale bytes).

    ``payload`` is a view over the source buffer when parsed, so no payload bytes are
    copied on the read path. ``header_bytes`` is the serialized header once known.
    """

    k_dtype: torch.dtype
    v_dtype: torch.dtype
    scale_dtype: torch.dtype = torch.float32
    scale_scope: ScaleScope = ScaleScope.PER_PAGE_HEAD
    hashes: CodecHashes = field(default_factory=CodecHashes)
    layer_id: int = -1
    chunk_id: int = -1
    chunk_size: int = -1
    page_size: int = -1
    kv_head_count: int = -1
    head_dim: int = -1
    scale_shape: tuple[int, ...] = ()
    k_payload_len: int = 0
    v_payload_len: int = 0
    scale_payload_len: int = 0
    payload: bytes | bytearray | memoryview = b""
    header_bytes: bytes | None = None
    # The whole blob (header then payload) when encode wrote it into one buffer.
    blob: bytearray | memoryview | None = field(default=None, repr=False, compare=False)

    @property
    def total_bytes(self) -> int:
        """Header plus payload length, or -1 before the header is serialized."""
        if self.header_bytes is None:
            return -1
        return len(self.header_bytes) + len(self.payload)

    def expected_payload_len(self) -> int:
        """KV-LEN-SUM: the payload is exactly K, V and scale bytes back to back."""
        return self.k_payload_len + self.v_payload_len + self.scale_payload_len

    @property
    def has_k(self) -> bool:
        """False for a K-less blob (KV-K-ABSENT): V and its scales, no K bytes, while
        ``k_dtype`` still records the dtype of the K held elsewhere."""
        return not (self.k_payload_len == 0 and self.v_payload_len > 0)

    @property
    def element_count(self) -> int:
        """The number of elements of V, and of K when the blob has K (KV-LEN)."""
        return self.v_payload_len // self.v_dtype.itemsize


def _dtype_id(dtype: torch.dtype | None) -> int:
    try:
        return DTYPE_TO_INT[dtype]
    except KeyError:
        raise UnsupportedConfigError(
            f"dtype {dtype} has no id in the dtype table", rule="KV-ENCODE-REFUSE"
        ) from None


def _pack_str(s: str) -> bytes:
    data = s.encode("utf-8")
    if len(data) > 0xFFFF:
        raise UnsupportedConfigError(
            f"hash string of {len(data)} bytes exceeds 65535", rule="KV-HASHES"
        )
    return _U16.pack(len(data)) + data


def _pack_hash_section(values: tuple[str, ...]) -> bytes:
    """KV-HASHES as written: the pair count, then each known key and its value."""
    pairs = b"".join(_pack_str(k) + _pack_str(v) for k, v in zip(HASH_FIELDS, values, strict=True))
    return _U16.pack(len(HASH_FIELDS)) + pairs


# Speed only: a deployment writes the same few hash sets over and over. Keyed by the six
# values, all that the section depends on.
_PACKED_SECTIONS: BoundedMemo[tuple[str, ...], bytes] = BoundedMemo(256)


def hash_section(hashes: CodecHashes) -> bytes:
    """The serialized hash section of ``hashes`` (None reads as empty)."""
    values = tuple(getattr(hashes, name) or "" for name in HASH_FIELDS)
    packed = _PACKED_SECTIONS.get(values)
    if packed is None:
        packed = _pack_hash_section(values)
        _PACKED_SECTIONS.put(values, packed)
    return packed


def pack_header_fields(enc: EncodedKV) -> bytes:
    """Every header byte except the trailing CRC (KV-LAYOUT)."""
    if len(enc.scale_shape) > MAX_SCALE_DIMS:
        raise UnsupportedConfigError(
            f"scale_shape has {len(enc.scale_shape)} dims; at most {MAX_SCALE_DIMS} fit",
            rule="KV-SCALE-SHAPE-N",
        )
    try:
        fixed = _FIXED.pack(
            CODEC_MAGIC,
            int(CodecVersion.V1),
            int(enc.scale_scope),
            _dtype_id(enc.k_dtype),
            _dtype_id(enc.v_dtype),
            _dtype_id(enc.scale_dtype),
            0,
            enc.layer_id,
            enc.chunk_id,
            enc.chunk_size,
            enc.page_size,
            enc.kv_head_count,
            enc.head_dim,
            len(enc.scale_shape),
        )
        dims = _DIMS[len(enc.scale_shape)].pack(*enc.scale_shape)
        lens = _LENS.pack(enc.k_payload_len, enc.v_payload_len, enc.scale_payload_len)
    except struct.error as e:
        raise UnsupportedConfigError(
            f"header field out of range: {e}", rule=_out_of_range_rule(enc)
        ) from None
    return fixed + dims + lens + hash_section(enc.hashes)


def _out_of_range_rule(enc: EncodedKV) -> str:
    """The rule of the first int64 header field of ``enc`` that does not fit."""
    groups = (
        ("KV-IDS", (enc.layer_id, enc.chunk_id)),
        ("KV-GEOMETRY", (enc.chunk_size, enc.page_size, enc.kv_head_count, enc.head_dim)),
        ("KV-SCALE-SHAPE", tuple(enc.scale_shape)),
        ("KV-LEN", (enc.k_payload_len, enc.v_payload_len, enc.scale_payload_len)),
    )
    for rule, values in groups:
        if any(not -(2**63) <= v <= INT64_MAX for v in values):
            return rule
    return "KV-ENCODE-REFUSE"


#: Reader rules about one field's own range: a writer refusing such a value enforces that
#: rule itself. Any other reader rule (fields that disagree) makes the refusal a case of
#: KV-ENCODE-REFUSE.
_FIELD_RULES = (
    "KV-IDS",
    "KV-GEOMETRY",
    "KV-K-DTYPE",
    "KV-V-DTYPE",
    "KV-SCALE-DTYPE",
    "KV-K-ABSENT",
)


def writer_rule(reader_rule: str | None) -> str:
    """The rule a writer enforces when it refuses a blob that breaks ``reader_rule``."""
    return reader_rule if reader_rule in _FIELD_RULES else "KV-ENCODE-REFUSE"


def check_writable(enc: EncodedKV) -> None:
    """KV-ENCODE-REFUSE: ``enc``'s header is one the reader accepts (dtypes, ids, geometry,
    lengths, scale shape); raises UnsupportedConfigError naming the broken rule."""
    for dtype, allowed, what in (
        (enc.k_dtype, K_DTYPES, "k_dtype"),
        (enc.v_dtype, V_DTYPES, "v_dtype"),
        (enc.scale_dtype, SCALE_DTYPES, "scale_dtype"),
    ):
        if dtype not in allowed:
            raise UnsupportedConfigError(
                f"{what} {dtype} is not allowed in a v1 blob",
                rule=f"KV-{what.removesuffix('_dtype').upper()}-DTYPE",
            )
    try:
        check_consistency(enc)
    except CorruptEncodedKVError as e:
        raise UnsupportedConfigError(
            f"refusing to write an inconsistent blob: {e}", rule=writer_rule(e.rule)
        ) from None


def serialize_header(enc: EncodedKV) -> bytes:
    """The header of ``enc``, ending with the CRC-32 of ``enc.payload`` (KV-CRC).

    Refuses (UnsupportedConfigError) a header the reader would reject: KV-ENCODE-REFUSE
    holds for every writer, not only ``encode``."""
    check_writable(enc)
    if len(enc.payload) != enc.expected_payload_len():
        raise UnsupportedConfigError(
            f"payload is {len(enc.payload)} bytes but K({enc.k_payload_len}) + "
            f"V({enc.v_payload_len}) + scales({enc.scale_payload_len}) were declared",
            rule="KV-LEN-SUM",
        )
    return pack_header_fields(enc) + _U32.pack(payload_crc32(enc.payload))


class _Reader:
    """Bounds-checked little-endian cursor over a header; every overrun is corruption."""

    def __init__(self, buf: memoryview) -> None:
        self.buf = buf
        self.off = 0

    def take(self, st: struct.Struct, what: str) -> tuple[Any, ...]:
        if self.off + st.size > len(self.buf):
            raise CorruptEncodedKVError(
                f"truncated {what}: needs {st.size} bytes at offset {self.off}, "
                f"{len(self.buf) - self.off} remain",
                rule="KV-TRUNCATED",
            )
        values = st.unpack_from(self.buf, self.off)
        self.off += st.size
        return values

    def string(self, what: str) -> str:
        (n,) = self.take(_U16, f"{what} length")
        if self.off + n > len(self.buf):
            raise CorruptEncodedKVError(
                f"{what} at offset {self.off} declares {n} bytes, "
                f"{len(self.buf) - self.off} remain",
                rule="KV-TRUNCATED",
            )
        raw = bytes(self.buf[self.off : self.off + n])
        self.off += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptEncodedKVError(f"{what} is not UTF-8: {e}", rule="KV-HASHES") from None


def _parse_hashes(r: _Reader, n_pairs: int) -> CodecHashes:
    """KV-HASHES: ``n_pairs`` (key, value) UTF-8 strings, each key at most once; unknown
    keys are skipped. ``r`` stands just past the hash count and is left past the pairs."""
    hashes = CodecHashes()
    seen: set[str] = set()
    for _ in range(n_pairs):
        key = r.string("hash key")
        value = r.string(f"hash value of {key!r}")
        if key in seen:
            raise CorruptEncodedKVError(f"hash key {key!r} appears twice", rule="KV-HASHES")
        seen.add(key)
        if key in HASH_FIELDS:
            setattr(hashes, key, value)
    return hashes


# Speed only: a deployment reads the same few hash sets over and over. Keyed by the raw
# section (from the hash count on), which parses to the same values wherever it stands.
_PARSED_SECTIONS: BoundedMemo[bytes, tuple[str, ...]] = BoundedMemo(4)


def _read_hashes(r: _Reader, n_pairs: int) -> CodecHashes:
    """_parse_hashes, or the values of a recently parsed section with the same bytes."""
    start = r.off - _U16.size
    for raw, values in _PARSED_SECTIONS.items():
        end = start + len(raw)
        if r.buf[start:end] == raw:
            r.off = end
            return CodecHashes(*values)
    hashes = _parse_hashes(r, n_pairs)
    values = tuple(getattr(hashes, name) for name in HASH_FIELDS)
    _PARSED_SECTIONS.put(bytes(r.buf[start : r.off]), values)
    return hashes


def _ids_of(allowed: tuple[torch.dtype, ...]) -> dict[int, torch.dtype]:
    """The ids of the dtype table that read as one of ``allowed``."""
    return {i: d for i, d in INT_TO_DTYPE.items() if d is not None and d in allowed}


_SCOPE_OF_ID = {int(scope): scope for scope in ScaleScope}
_K_OF_ID, _V_OF_ID, _SCALE_OF_ID = (_ids_of(d) for d in (K_DTYPES, V_DTYPES, SCALE_DTYPES))


def _read_dtype(idx: int, allowed: tuple[torch.dtype, ...], what: str) -> torch.dtype:
    rule = f"KV-{what.removesuffix('_dtype').upper()}-DTYPE"  # KV-K-DTYPE, KV-V-DTYPE, ...
    if idx not in INT_TO_DTYPE:
        raise CorruptEncodedKVError(f"unknown {what} id {idx}", rule=rule)
    dtype = INT_TO_DTYPE[idx]
    if dtype is None or dtype not in allowed:
        raise CorruptEncodedKVError(
            f"{what} {dtype} is not allowed in a v1 blob (allowed: "
            f"{', '.join(str(d) for d in allowed)})",
            rule=rule,
        )
    return dtype


def _check_dims(enc: EncodedKV) -> None:
    """KV-IDS, KV-GEOMETRY: ids are >= -1; geometry fields are -1 (unset) or positive."""
    # Each loop runs only when its min() says a field may be out of range, to name it.
    if min(enc.layer_id, enc.chunk_id) < -1:
        for name in ("layer_id", "chunk_id"):
            if getattr(enc, name) < -1:
                raise CorruptEncodedKVError(
                    f"{name} = {getattr(enc, name)} is below -1", rule="KV-IDS"
                )
    if min(enc.chunk_size, enc.page_size, enc.kv_head_count, enc.head_dim) < 1:
        for name in ("chunk_size", "page_size", "kv_head_count", "head_dim"):
            v = getattr(enc, name)
            if v != -1 and v < 1:
                raise CorruptEncodedKVError(
                    f"{name} = {v}: must be -1 (unset) or positive", rule="KV-GEOMETRY"
                )


# Speed only: field sets already found consistent. The checks read nothing else, so a set
# seen before needs no second look (parse checks, then decode checks again, the same fields).
_CONSISTENT: BoundedMemo[tuple[Any, ...], bool] = BoundedMemo(256)


def check_consistency(enc: EncodedKV) -> None:
    """The redundant fields agree (KV-LEN-*, KV-SCALE-SHAPE, KV-GEOMETRY).

    Raises CorruptEncodedKVError for the first disagreement found (see _check_fields).
    """
    try:
        key = _fields_key(enc)
        known = key in _CONSISTENT
    except TypeError:  # a field of the wrong type: check it, remember nothing
        _check_fields(enc)
        return
    if not known:
        _check_fields(enc)
        _CONSISTENT.put(key, True)


def _fields_key(enc: EncodedKV) -> tuple[Any, ...]:
    """Every field check_consistency reads."""
    return (
        enc.k_dtype,
        enc.v_dtype,
        enc.scale_dtype,
        enc.scale_scope,
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
    )


def _check_fields(enc: EncodedKV) -> None:
    """check_consistency's checks, in order."""
    _check_dims(enc)
    shape = enc.scale_shape
    if shape and min(shape) < 0:
        raise CorruptEncodedKVError(
            f"negative dimension in scale_shape {shape}", rule="KV-SCALE-SHAPE"
        )
    # SPEC "Reader rules", exact arithmetic: shapes built from these fields fit int64,
    # even for an empty payload, where every length check holds trivially.
    scale_elems = math.prod(shape)
    if scale_elems > INT64_MAX or (
        scale_elems == 0 and math.prod(d for d in shape if d) > INT64_MAX
    ):
        raise CorruptEncodedKVError(f"scale_shape {shape} overflows int64", rule="KV-LEN")
    if enc.kv_head_count > 0 and enc.head_dim > 0 and enc.kv_head_count * enc.head_dim > INT64_MAX:
        raise CorruptEncodedKVError(
            f"kv_head_count {enc.kv_head_count} x head_dim {enc.head_dim} overflows int64",
            rule="KV-LEN",
        )
    if min(enc.k_payload_len, enc.v_payload_len, enc.scale_payload_len) < 0:  # name it
        for name in ("k_payload_len", "v_payload_len", "scale_payload_len"):
            if getattr(enc, name) < 0:
                raise CorruptEncodedKVError(
                    f"{name} = {getattr(enc, name)} is negative", rule="KV-LEN"
                )
    k_item = enc.k_dtype.itemsize
    if enc.k_payload_len % k_item:
        raise CorruptEncodedKVError(
            f"k_payload_len {enc.k_payload_len} is not a multiple of {enc.k_dtype} size {k_item}",
            rule="KV-LEN",
        )
    k_elems = enc.k_payload_len // k_item
    v_elems = enc.v_payload_len // enc.v_dtype.itemsize
    if k_elems and not v_elems:
        raise CorruptEncodedKVError(
            f"K holds {k_elems} elements but V none: only K may be absent", rule="KV-K-ABSENT"
        )
    if k_elems != v_elems and k_elems:  # K holds V's elements, or none (KV-K-ABSENT)
        raise CorruptEncodedKVError(
            f"K holds {k_elems} elements but V holds {v_elems}; K and V share one shape "
            "(or K is absent: k_payload_len 0)",
            rule="KV-LEN",
        )
    if enc.scale_payload_len != scale_elems * enc.scale_dtype.itemsize:
        raise CorruptEncodedKVError(
            f"scale_payload_len {enc.scale_payload_len} != {scale_elems} scales of "
            f"{enc.scale_dtype} ({scale_elems * enc.scale_dtype.itemsize} bytes) "
            f"for scale_shape {enc.scale_shape}",
            rule="KV-LEN",
        )
    heads, dim = enc.kv_head_count, enc.head_dim
    if heads > 0 and dim > 0 and v_elems % (heads * dim):
        raise CorruptEncodedKVError(
            f"{v_elems} elements are not a whole number of tokens of "
            f"kv_head_count {heads} x head_dim {dim}",
            rule="KV-LEN",
        )
    _check_scale_shape(enc, v_elems)


def _check_scale_shape(enc: EncodedKV, elems: int) -> None:
    """KV-SCALE-SHAPE: the scale tensor's shape is the one its scope prescribes."""
    scope, shape, heads = enc.scale_scope, enc.scale_shape, enc.kv_head_count
    if scope == ScaleScope.PER_TENSOR and shape != ():
        raise CorruptEncodedKVError(
            f"PER_TENSOR scale_shape must be (), got {shape}", rule="KV-SCALE-SHAPE"
        )
    if scope == ScaleScope.PER_LAYER_HEAD:
        if len(shape) != 1:
            raise CorruptEncodedKVError(
                f"PER_LAYER_HEAD scale_shape must be (H,), got {shape}", rule="KV-SCALE-SHAPE"
            )
        if heads > 0 and shape[0] != heads:
            raise CorruptEncodedKVError(
                f"PER_LAYER_HEAD scale_shape {shape} disagrees with kv_head_count {heads}",
                rule="KV-SCALE-SHAPE",
            )
        if elems and shape[0] == 0:
            raise CorruptEncodedKVError(
                "PER_LAYER_HEAD blob with data but zero heads", rule="KV-SCALE-SHAPE"
            )
        if shape[0] and elems % shape[0]:
            raise CorruptEncodedKVError(
                f"{elems} elements do not split over {shape[0]} heads", rule="KV-SCALE-SHAPE"
            )
    if scope == ScaleScope.PER_PAGE_HEAD:
        if len(shape) != 2:
            raise CorruptEncodedKVError(
                f"PER_PAGE_HEAD scale_shape must be (n_pages, H), got {shape}",
                rule="KV-SCALE-SHAPE",
            )
        pages, sheads = shape
        if heads > 0 and sheads != heads:
            raise CorruptEncodedKVError(
                f"PER_PAGE_HEAD scale_shape {shape} disagrees with kv_head_count {heads}",
                rule="KV-SCALE-SHAPE",
            )
        if elems and pages * sheads == 0:
            raise CorruptEncodedKVError(
                f"PER_PAGE_HEAD blob with data but scale_shape {shape}", rule="KV-SCALE-SHAPE"
            )
        if pages * sheads and elems % (pages * sheads):
            raise CorruptEncodedKVError(
                f"{elems} elements do not split over {pages} pages x {sheads} heads",
                rule="KV-SCALE-SHAPE",
            )
        if enc.head_dim > 0 and sheads > 0:
            if elems % (sheads * enc.head_dim):
                raise CorruptEncodedKVError(
                    f"{elems} elements are not whole tokens of {sheads} heads x "
                    f"head_dim {enc.head_dim}",
                    rule="KV-SCALE-SHAPE",
                )
            tokens = elems // (sheads * enc.head_dim)
            if pages and tokens % pages:
                raise CorruptEncodedKVError(
                    f"{tokens} tokens do not split into {pages} pages", rule="KV-SCALE-SHAPE"
                )
            if enc.page_size > 0 and tokens != pages * enc.page_size:
                raise CorruptEncodedKVError(
                    f"{tokens} tokens != {pages} pages x page_size {enc.page_size}",
                    rule="KV-SCALE-SHAPE",
                )


def parse_header_fields(
    buf: bytes | bytearray | memoryview,
) -> tuple[EncodedKV, int, int]:
    """Parse and check every header field of the blob that ``buf`` starts with, reading no
    payload byte: ``(enc, header_len, payload_crc32)``, ``enc`` without payload.

    The checks of :func:`deserialize_header` up to and including the redundant lengths:
    a ``buf`` that ends inside the header raises KV-TRUNCATED, so a reader of a file can
    hand it the file's first bytes and read more on that error (blob_file.py).
    Raises CorruptEncodedKVError, and nothing else, for any bad input.
    """
    try:
        mv = memoryview(buf).cast("B")
    except TypeError as e:
        raise CorruptEncodedKVError(
            f"not a contiguous byte buffer: {e}", rule="KV-TRUNCATED"
        ) from None
    r = _Reader(mv)
    (magic, version, scope_id, k_id, v_id, s_id, reserved, *geometry) = r.take(
        _FIXED, "fixed header"
    )
    if magic != CODEC_MAGIC:
        raise CorruptEncodedKVError(
            f"bad magic {magic!r}, expected {CODEC_MAGIC!r}", rule="KV-MAGIC"
        )
    if version != CodecVersion.V1:
        raise CorruptEncodedKVError(
            f"unsupported header version {version}; this reader knows 1", rule="KV-VERSION"
        )
    scope = _SCOPE_OF_ID.get(scope_id)
    if scope is None:
        raise CorruptEncodedKVError(f"unknown scale_scope id {scope_id}", rule="KV-SCOPE")
    k_dtype = _K_OF_ID.get(k_id) or _read_dtype(k_id, K_DTYPES, "k_dtype")
    v_dtype = _V_OF_ID.get(v_id) or _read_dtype(v_id, V_DTYPES, "v_dtype")
    scale_dtype = _SCALE_OF_ID.get(s_id) or _read_dtype(s_id, SCALE_DTYPES, "scale_dtype")
    if reserved != 0:
        raise CorruptEncodedKVError(f"reserved field is {reserved}, must be 0", rule="KV-RESERVED")
    layer_id, chunk_id, chunk_size, page_size, heads, head_dim, n_dims = geometry
    if not 0 <= n_dims <= MAX_SCALE_DIMS:
        raise CorruptEncodedKVError(
            f"scale_shape_n {n_dims} is outside 0..{MAX_SCALE_DIMS}", rule="KV-SCALE-SHAPE-N"
        )
    *scale_shape, k_len, v_len, s_len, n_pairs = r.take(
        _SHAPE_LENS_COUNT[n_dims], "scale_shape, payload lengths and hash count"
    )
    hashes = _read_hashes(r, n_pairs)
    (crc,) = r.take(_U32, "payload CRC")
    enc = EncodedKV(
        k_dtype=k_dtype,
        v_dtype=v_dtype,
        scale_dtype=scale_dtype,
        scale_scope=scope,
        hashes=hashes,
        layer_id=layer_id,
        chunk_id=chunk_id,
        chunk_size=chunk_size,
        page_size=page_size,
        kv_head_count=heads,
        head_dim=head_dim,
        scale_shape=tuple(scale_shape),
        k_payload_len=k_len,
        v_payload_len=v_len,
        scale_payload_len=s_len,
    )
    check_consistency(enc)
    return enc, r.off, crc


def deserialize_header(
    buf: bytes | bytearray | memoryview, *, allow_trailing: bool = False
) -> EncodedKV:
    """Parse and verify a whole blob; the returned payload is a view over ``buf``.

    Checks, in order: length, magic (KV-MAGIC), version (KV-VERSION), scope (KV-SCOPE),
    dtypes (KV-*-DTYPE), reserved (KV-RESERVED), scale_shape_n (KV-SCALE-SHAPE-N),
    hash strings (KV-HASHES), every redundant length (KV-LEN-*) (all of them
    :func:`parse_header_fields`), the payload extent and trailing bytes (KV-TRAILING), then
    the CRC (KV-CRC). With ``allow_trailing`` bytes after the payload are ignored, for
    readers that fill block-aligned buffers.
    Raises CorruptEncodedKVError, and nothing else, for any bad input.
    """
    enc, header_len, crc = parse_header_fields(buf)
    mv = memoryview(buf).cast("B")
    end = header_len + enc.expected_payload_len()
    if end > len(mv):
        raise CorruptEncodedKVError(
            f"payload truncated: header ends at {header_len}, {enc.expected_payload_len()} "
            f"payload bytes declared, buffer holds {len(mv)}",
            rule="KV-LEN-SUM",
        )
    if end < len(mv) and not allow_trailing:
        raise CorruptEncodedKVError(
            f"{len(mv) - end} bytes follow the payload (pass allow_trailing=True to ignore)",
            rule="KV-TRAILING",
        )
    enc.payload = mv[header_len:end]
    computed = payload_crc32(enc.payload)
    if computed != crc:
        raise CorruptEncodedKVError(
            f"payload CRC-32 mismatch: header says {crc:#010x}, payload gives {computed:#010x}",
            rule="KV-CRC",
        )
    enc.header_bytes = bytes(mv[:header_len])
    return enc
