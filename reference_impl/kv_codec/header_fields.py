"""The encoded-KV blob header (v1, and the v2 draft) as a reader sees it, without torch: the
byte layout, the field parser and every reader rule on the fields (SPEC.md, "Blob header",
"Reader rules", "Encoded-KV v2 (draft)").

``header.py`` builds ``EncodedKV`` (torch dtypes) with the same parser and checks; this
module alone lets a header-only reader (``blob_file``: ``lmckv inspect``, ``lmckv fsck``)
run in the memory of a small process. The dtype fields are whatever the caller's
:class:`DTypeTable` maps names to (``WireDType`` here, ``torch.dtype`` in ``header.py``).

Byte layout (SPEC.md, "Blob header"), all integers little-endian::

    0   8  magic            b"LMCKV\\x01\\x00\\x01"
    8   2  version          u16, 1 (v2: 2)
    10  2  scale_scope      u16, ScaleScope
    12  2  k_dtype_id       u16, dtype table
    14  2  v_dtype_id       u16
    16  2  scale_dtype_id   u16
    18  2  reserved         u16, 0 (v2: scale_scheme, ScaleScheme)
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
                            (v2: of every header byte before it, then the payload)

followed by the payload: K bytes, V bytes, scale bytes.
"""

from __future__ import annotations

import math
import operator
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Generic, Protocol, TypeVar

from ..dtype_table import ITEMSIZE, NAME_OF_ID, WireDType
from .errors import CorruptEncodedKVError
from .memo import BoundedMemo

#: KV-MAGIC: "LMCKV" then the version triplet 1.0.1.
CODEC_MAGIC: bytes = b"LMCKV\x01\x00\x01"

FIXED_STRUCT = struct.Struct("<8s6H7q")
FIXED_HEADER_LEN: int = FIXED_STRUCT.size  # 76
LENS_STRUCT = struct.Struct("<3q")
U16_STRUCT = struct.Struct("<H")
U32_STRUCT = struct.Struct("<I")

INT64_MAX = 2**63 - 1

#: KV-SCALE-SHAPE-N: the reader refuses more scale dimensions than this.
MAX_SCALE_DIMS = 8

# What follows the fixed header up to the hash pairs, by scale_shape_n: the scale shape,
# the three payload lengths and the hash count.
_SHAPE_LENS_COUNT = tuple(struct.Struct(f"<{n}q3qH") for n in range(MAX_SCALE_DIMS + 1))
DIMS_STRUCT = tuple(struct.Struct(f"<{n}q") for n in range(MAX_SCALE_DIMS + 1))

#: KV-K-DTYPE / KV-V-DTYPE / KV-SCALE-DTYPE: the dtypes a v1 blob may declare, by name.
K_DTYPE_NAMES = ("float16", "bfloat16")
V_DTYPE_NAMES = ("float8_e4m3fn",)
SCALE_DTYPE_NAMES = ("float32", "float16", "bfloat16", "float64")


class CodecVersion(IntEnum):
    """The u16 at offset 8 (KV-VERSION): V1, and V2 of the draft, written only for
    ScaleScheme.RAW_UNIT (KV2-SCHEME)."""

    V1 = 1
    V2 = 2


#: KV-VERSION: the versions a reader reads unless told otherwise (``versions=``); a v1-only
#: reader passes ``(CodecVersion.V1,)`` and refuses every v2 blob.
READ_VERSIONS: tuple[CodecVersion, ...] = (CodecVersion.V1, CodecVersion.V2)


class ScaleScheme(IntEnum):
    """The u16 at offset 18 of a v2 header (KV2-SCHEME); v1's reserved slot, always 0 there
    (KV-RESERVED), which reads as COMPUTED_PER_TENSOR."""

    #: V quantized at store time, its scales stored as the scope says: every v1 blob.
    COMPUTED_PER_TENSOR = 0
    #: V's e4m3 codes copied unchanged, no scales anywhere (scope NONE): every v2 blob.
    RAW_UNIT = 1


class ScaleScope(IntEnum):
    """The u16 at offset 10: how V's FP8 scales are grouped (SPEC.md, "Scale scopes")."""

    PER_TENSOR = 0
    PER_LAYER_HEAD = 1
    PER_PAGE_HEAD = 2
    EXTERNAL = 3
    #: v2 only (KV2-SCOPE): no scales in the blob or out of band; V is read at unit scale.
    NONE = 4


#: KV-SCOPE: the scopes of a scale-aware (v1) blob, the ones a quantizing writer can write.
SCALE_AWARE_SCOPES: tuple[ScaleScope, ...] = tuple(s for s in ScaleScope if s != ScaleScope.NONE)


def version_of(scheme: ScaleScheme) -> CodecVersion:
    """KV2-SCHEME: the header version a blob of ``scheme`` is written as (v2 iff RAW_UNIT)."""
    return CodecVersion.V2 if scheme == ScaleScheme.RAW_UNIT else CodecVersion.V1


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
#: A CodecHashes' values in HASH_FIELDS order (one C call).
hash_values: Callable[[CodecHashes], tuple[str, ...]] = operator.attrgetter(*HASH_FIELDS)


class DTypeLike(Protocol):
    """What the reader rules need of a dtype: its element size."""

    @property
    def itemsize(self) -> int: ...


class HeaderRecord:
    """The fields the reader rules read, and the lengths they imply; ``EncodedKV`` and
    :class:`HeaderFields` are both one."""

    k_dtype: DTypeLike
    v_dtype: DTypeLike
    scale_dtype: DTypeLike
    scale_scope: ScaleScope
    scale_scheme: ScaleScheme
    layer_id: int
    chunk_id: int
    chunk_size: int
    page_size: int
    kv_head_count: int
    head_dim: int
    scale_shape: tuple[int, ...]
    k_payload_len: int
    v_payload_len: int
    scale_payload_len: int

    @property
    def version(self) -> CodecVersion:
        """The header version (KV-VERSION), which the scheme decides (KV2-SCHEME)."""
        return version_of(self.scale_scheme)

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


@dataclass
class HeaderFields(HeaderRecord):
    """A parsed header without its payload, dtypes as :class:`WireDType`;
    ``header_bytes`` is set once the whole header has been read."""

    k_dtype: WireDType
    v_dtype: WireDType
    scale_dtype: WireDType
    scale_scope: ScaleScope
    hashes: CodecHashes
    layer_id: int
    chunk_id: int
    chunk_size: int
    page_size: int
    kv_head_count: int
    head_dim: int
    scale_shape: tuple[int, ...]
    k_payload_len: int
    v_payload_len: int
    scale_payload_len: int
    scale_scheme: ScaleScheme = ScaleScheme.COMPUTED_PER_TENSOR
    header_bytes: bytes | None = field(default=None, repr=False)


D = TypeVar("D", bound=DTypeLike)
R = TypeVar("R", bound=HeaderRecord)


class DTypeTable(Generic[D]):
    """The dtype ids a v1 blob may declare for K, V and its scales, each mapped to the
    caller's dtype objects (``lookup`` turns a table name into one)."""

    def __init__(self, lookup: Callable[[str], D]) -> None:
        def allowed(names: tuple[str, ...]) -> dict[int, D]:
            return {i: lookup(n) for i, n in NAME_OF_ID.items() if n is not None and n in names}

        self.k_of_id = allowed(K_DTYPE_NAMES)
        self.v_of_id = allowed(V_DTYPE_NAMES)
        self.scale_of_id = allowed(SCALE_DTYPE_NAMES)


#: The table of header-only readers: WireDType values.
WIRE_DTYPES: DTypeTable[WireDType] = DTypeTable(lambda name: WireDType(name, ITEMSIZE[name]))


def _refuse_dtype(idx: int, allowed: tuple[str, ...], what: str) -> CorruptEncodedKVError:
    """The error for a dtype id that is unknown or not allowed where it stands."""
    rule = f"KV-{what.removesuffix('_dtype').upper()}-DTYPE"  # KV-K-DTYPE, KV-V-DTYPE, ...
    if idx not in NAME_OF_ID:
        return CorruptEncodedKVError(f"unknown {what} id {idx}", rule=rule)
    name = NAME_OF_ID[idx]
    return CorruptEncodedKVError(
        f"{what} {None if name is None else f'torch.{name}'} is not allowed in a v1 blob "
        f"(allowed: {', '.join(f'torch.{n}' for n in allowed)})",
        rule=rule,
    )


_SCOPE_OF_ID = {int(scope): scope for scope in ScaleScope}


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
        (n,) = self.take(U16_STRUCT, f"{what} length")
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
    start = r.off - U16_STRUCT.size
    for raw, values in _PARSED_SECTIONS.items():
        end = start + len(raw)
        if r.buf[start:end] == raw:
            r.off = end
            return CodecHashes(*values)
    hashes = _parse_hashes(r, n_pairs)
    values = hash_values(hashes)
    _PARSED_SECTIONS.put(bytes(r.buf[start : r.off]), values)
    return hashes


def _check_dims(enc: HeaderRecord) -> None:
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


def check_consistency(enc: HeaderRecord) -> None:
    """The redundant fields agree (KV-LEN-*, KV-SCALE-SHAPE, KV-GEOMETRY).

    Raises CorruptEncodedKVError for the first disagreement found (see _check_fields).
    """
    try:
        key = fields_key(enc)
        known = key in _CONSISTENT
    except TypeError:  # a field of the wrong type: check it, remember nothing
        _check_fields(enc)
        return
    if not known:
        _check_fields(enc)
        _CONSISTENT.put(key, True)


def fields_key(enc: HeaderRecord) -> tuple[Any, ...]:
    """Every field check_consistency reads."""
    return (
        enc.k_dtype,
        enc.v_dtype,
        enc.scale_dtype,
        enc.scale_scope,
        enc.scale_scheme,
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


def _check_fields(enc: HeaderRecord) -> None:
    """check_consistency's checks, in order."""
    _check_dims(enc)
    _check_scheme_scope(enc)
    shape = enc.scale_shape
    if shape and min(shape) < 0:
        raise CorruptEncodedKVError(
            f"negative dimension in scale_shape {shape}", rule="KV-SCALE-SHAPE"
        )
    # SPEC "Reader rules", exact arithmetic: shapes built from these fields fit int64,
    # even for an empty payload, where every length check holds trivially. Scope NONE
    # stores no scale at all (KV2-NO-SCALES: its shape is () and holds none).
    scale_elems = 0 if enc.scale_scope == ScaleScope.NONE else math.prod(shape)
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


def _check_scheme_scope(enc: HeaderRecord) -> None:
    """KV-SCOPE, KV2-SCOPE: scope NONE goes with RAW_UNIT and nothing else; KV2-NO-SCALES: a
    NONE blob declares no scale dimension and no scale byte."""
    raw = enc.scale_scheme == ScaleScheme.RAW_UNIT
    none = enc.scale_scope == ScaleScope.NONE
    if raw and not none:
        raise CorruptEncodedKVError(
            f"a RAW_UNIT (v2) blob has scale_scope NONE, not {enc.scale_scope.name}",
            rule="KV2-SCOPE",
        )
    if none and not raw:
        raise CorruptEncodedKVError(
            "scale_scope NONE (4) belongs to RAW_UNIT v2 blobs; a v1 scope is 0..3",
            rule="KV-SCOPE",
        )
    if none and (enc.scale_shape or enc.scale_payload_len):
        raise CorruptEncodedKVError(
            f"scale_scope NONE stores no scales: scale_shape {enc.scale_shape} and "
            f"scale_payload_len {enc.scale_payload_len} must be () and 0",
            rule="KV2-NO-SCALES",
        )


def _check_scale_shape(enc: HeaderRecord, elems: int) -> None:
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


# Speed only: headers already parsed and found valid. A header's fields and checks depend on
# its bytes alone, so a buffer that starts with the same bytes (up to the payload CRC)
# parses to the same fields: a stream of pages of one geometry skips the parse. Keyed by
# those bytes, the dtype table, the consistency check that passed them (a test that swaps
# the check gets entries of its own) and the versions read (a v1-only reader never takes a
# v2 header from here); holds the immutable fields and the hash values (each record gets a
# CodecHashes of its own).
_PARSED_HEADERS: BoundedMemo[
    tuple[bytes, DTypeTable[Any], Callable[..., None], tuple[CodecVersion, ...]],
    tuple[dict[str, Any], tuple[str, ...]],
]
_PARSED_HEADERS = BoundedMemo(4)

_SCHEME_OF_ID = {int(scheme): scheme for scheme in ScaleScheme}


def _read_version(version: int, versions: tuple[CodecVersion, ...]) -> CodecVersion:
    """KV-VERSION: ``version`` is one of ``versions``, the ones this reader reads."""
    if version not in versions:
        known = ", ".join(str(int(v)) for v in versions)
        raise CorruptEncodedKVError(
            f"unsupported header version {version}; this reader reads {known}",
            rule="KV-VERSION",
        )
    return CodecVersion(version)


def _read_scheme(version: CodecVersion, slot: int) -> ScaleScheme:
    """The u16 at 18: v1's reserved slot is 0 (KV-RESERVED); v2's scale_scheme is RAW_UNIT,
    the only scheme v2 is written for (KV2-SCHEME)."""
    if version == CodecVersion.V1:
        if slot != 0:
            raise CorruptEncodedKVError(f"reserved field is {slot}, must be 0", rule="KV-RESERVED")
        return ScaleScheme.COMPUTED_PER_TENSOR
    scheme = _SCHEME_OF_ID.get(slot)
    if scheme != ScaleScheme.RAW_UNIT:
        what = "unknown scale_scheme" if scheme is None else f"scale_scheme {scheme.name}"
        raise CorruptEncodedKVError(
            f"{what} ({slot}) in a v2 header: v2 is RAW_UNIT (1) only", rule="KV2-SCHEME"
        )
    return scheme


def _read_scope(version: CodecVersion, scope_id: int) -> ScaleScope:
    """KV-SCOPE: a v1 scope is 0..3; KV2-SCOPE: a v2 (RAW_UNIT) blob's scope is NONE."""
    scope = _SCOPE_OF_ID.get(scope_id)
    if version == CodecVersion.V2:
        if scope != ScaleScope.NONE:
            raise CorruptEncodedKVError(
                f"scale_scope id {scope_id} in a v2 header: RAW_UNIT blobs are NONE (4)",
                rule="KV2-SCOPE",
            )
        return ScaleScope.NONE
    if scope is None or scope == ScaleScope.NONE:
        raise CorruptEncodedKVError(f"unknown scale_scope id {scope_id}", rule="KV-SCOPE")
    return scope


def parse_fields(
    buf: bytes | bytearray | memoryview,
    table: DTypeTable[D],
    make: Callable[..., R],
    versions: tuple[CodecVersion, ...] = READ_VERSIONS,
) -> tuple[R, int, int]:
    """Parse and check every header field of the blob that ``buf`` starts with, reading no
    payload byte: ``(make(**fields), header_len, crc32)``, dtypes from ``table``; a header
    version outside ``versions`` is refused (KV-VERSION).

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
    check = check_consistency
    for (raw, known_table, known_check, known_versions), (
        known,
        known_hashes,
    ) in _PARSED_HEADERS.items():
        end = len(raw)
        if (
            known_table is table
            and known_check is check
            and known_versions == versions
            and len(mv) >= end + U32_STRUCT.size
            and mv[:end] == raw
        ):
            (crc,) = U32_STRUCT.unpack_from(mv, end)
            hashes = CodecHashes(*known_hashes)
            return make(hashes=hashes, **known), end + U32_STRUCT.size, crc
    r = _Reader(mv)
    (magic, version_id, scope_id, k_id, v_id, s_id, slot18, *geometry) = r.take(
        FIXED_STRUCT, "fixed header"
    )
    if magic != CODEC_MAGIC:
        raise CorruptEncodedKVError(
            f"bad magic {magic!r}, expected {CODEC_MAGIC!r}", rule="KV-MAGIC"
        )
    version = _read_version(version_id, versions)
    # v2 reads its scheme first: it is what makes the header a v2 one (KV2-SCHEME).
    scheme = _read_scheme(version, slot18) if version == CodecVersion.V2 else None
    scope = _read_scope(version, scope_id)
    k_dtype = table.k_of_id.get(k_id)
    if k_dtype is None:
        raise _refuse_dtype(k_id, K_DTYPE_NAMES, "k_dtype")
    v_dtype = table.v_of_id.get(v_id)
    if v_dtype is None:
        raise _refuse_dtype(v_id, V_DTYPE_NAMES, "v_dtype")
    scale_dtype = table.scale_of_id.get(s_id)
    if scale_dtype is None:
        raise _refuse_dtype(s_id, SCALE_DTYPE_NAMES, "scale_dtype")
    if scheme is None:
        scheme = _read_scheme(version, slot18)
    layer_id, chunk_id, chunk_size, page_size, heads, head_dim, n_dims = geometry
    if not 0 <= n_dims <= MAX_SCALE_DIMS:
        raise CorruptEncodedKVError(
            f"scale_shape_n {n_dims} is outside 0..{MAX_SCALE_DIMS}", rule="KV-SCALE-SHAPE-N"
        )
    *scale_shape, k_len, v_len, s_len, n_pairs = r.take(
        _SHAPE_LENS_COUNT[n_dims], "scale_shape, payload lengths and hash count"
    )
    hashes = _read_hashes(r, n_pairs)
    fields_end = r.off
    (crc,) = r.take(U32_STRUCT, "CRC")
    fields = dict(
        k_dtype=k_dtype,
        v_dtype=v_dtype,
        scale_dtype=scale_dtype,
        scale_scope=scope,
        scale_scheme=scheme,
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
    enc = make(hashes=hashes, **fields)
    check(enc)
    values = hash_values(hashes)
    _PARSED_HEADERS.put((bytes(mv[:fields_end]), table, check, versions), (fields, values))
    return enc, r.off, crc


def parse_header_fields(
    buf: bytes | bytearray | memoryview, versions: tuple[CodecVersion, ...] = READ_VERSIONS
) -> tuple[HeaderFields, int, int]:
    """:func:`parse_fields` into :class:`HeaderFields` (no torch)."""
    return parse_fields(buf, WIRE_DTYPES, HeaderFields, versions)
