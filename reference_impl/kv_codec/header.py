"""The encoded-KV blob as the codec holds it: :class:`EncodedKV` (torch dtypes and the
payload), the writer of its header (v1, or v2 when asked for RAW_UNIT), and the strict reader
of a whole blob (v1 and v2, or the versions it is told).

The byte layout, the field parser and the reader rules on the fields live in
``header_fields.py`` (no torch); this module parses with them into ``EncodedKV`` and
re-exports the names of ``lmcache.v1.kv_codec`` that are defined there.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import torch

from ..dtypes import DTYPE_TO_INT
from .checksum import crc_rule, crc_start, payload_crc32
from .errors import CorruptEncodedKVError, UnsupportedConfigError
from .header_fields import (
    CODEC_MAGIC,
    DIMS_STRUCT,
    FIXED_HEADER_LEN,
    FIXED_STRUCT,
    HASH_FIELDS,
    INT64_MAX,
    K_DTYPE_NAMES,
    LENS_STRUCT,
    MAX_SCALE_DIMS,
    READ_VERSIONS,
    SCALE_DTYPE_NAMES,
    U16_STRUCT,
    U32_STRUCT,
    V_DTYPE_NAMES,
    CodecHashes,
    CodecVersion,
    DTypeTable,
    HeaderRecord,
    ScaleScheme,
    ScaleScope,
    check_consistency,
    fields_key,
    hash_values,
    parse_fields,
    version_of,
)
from .memo import BoundedMemo

__all__ = [
    "CODEC_MAGIC",
    "FIXED_HEADER_LEN",
    "HASH_FIELDS",
    "K_DTYPES",
    "MAX_SCALE_DIMS",
    "READ_VERSIONS",
    "SCALE_DTYPES",
    "V_DTYPES",
    "CodecHashes",
    "CodecVersion",
    "EncodedKV",
    "ScaleScheme",
    "ScaleScope",
    "check_consistency",
    "check_writable",
    "deserialize_header",
    "hash_section",
    "pack_header_fields",
    "parse_header_fields",
    "serialize_header",
    "writable_header_fields",
    "writer_rule",
]

#: KV-K-DTYPE / KV-V-DTYPE / KV-SCALE-DTYPE: what a v1 blob may declare, as torch dtypes.
K_DTYPES: tuple[torch.dtype, ...] = tuple(getattr(torch, n) for n in K_DTYPE_NAMES)
V_DTYPES: tuple[torch.dtype, ...] = tuple(getattr(torch, n) for n in V_DTYPE_NAMES)
SCALE_DTYPES: tuple[torch.dtype, ...] = tuple(getattr(torch, n) for n in SCALE_DTYPE_NAMES)
#: The header's dtype ids read as torch dtypes.
TORCH_DTYPES: DTypeTable[torch.dtype] = DTypeTable(lambda name: getattr(torch, name))


@dataclass
class EncodedKV(HeaderRecord):
    """One blob: its header fields and its payload (K bytes, V bytes, scale bytes).

    ``payload`` is a view over the source buffer when parsed, so no payload bytes are
    copied on the read path. ``header_bytes`` is the serialized header once known.
    """

    k_dtype: torch.dtype
    v_dtype: torch.dtype
    scale_dtype: torch.dtype = torch.float32
    scale_scope: ScaleScope = ScaleScope.PER_PAGE_HEAD
    #: RAW_UNIT (with scope NONE) makes a v2 blob; the default, a v1 one (KV2-SCHEME).
    scale_scheme: ScaleScheme = ScaleScheme.COMPUTED_PER_TENSOR
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
    return U16_STRUCT.pack(len(data)) + data


def _pack_hash_section(values: tuple[str, ...]) -> bytes:
    """KV-HASHES as written: the pair count, then each known key and its value."""
    pairs = b"".join(_pack_str(k) + _pack_str(v) for k, v in zip(HASH_FIELDS, values, strict=True))
    return U16_STRUCT.pack(len(HASH_FIELDS)) + pairs


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
    """Every header byte except the trailing CRC (KV-LAYOUT): version 2 and the scheme in
    slot 18 for RAW_UNIT, version 1 and 0 there otherwise (KV2-SCHEME)."""
    if len(enc.scale_shape) > MAX_SCALE_DIMS:
        raise UnsupportedConfigError(
            f"scale_shape has {len(enc.scale_shape)} dims; at most {MAX_SCALE_DIMS} fit",
            rule="KV-SCALE-SHAPE-N",
        )
    try:
        fixed = FIXED_STRUCT.pack(
            CODEC_MAGIC,
            int(enc.version),
            int(enc.scale_scope),
            _dtype_id(enc.k_dtype),
            _dtype_id(enc.v_dtype),
            _dtype_id(enc.scale_dtype),
            int(enc.scale_scheme),
            enc.layer_id,
            enc.chunk_id,
            enc.chunk_size,
            enc.page_size,
            enc.kv_head_count,
            enc.head_dim,
            len(enc.scale_shape),
        )
        dims = DIMS_STRUCT[len(enc.scale_shape)].pack(*enc.scale_shape)
        lens = LENS_STRUCT.pack(enc.k_payload_len, enc.v_payload_len, enc.scale_payload_len)
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
    """KV-ENCODE-REFUSE: ``enc``'s header is one the reader accepts (scheme and scope,
    dtypes, ids, geometry, lengths, scale shape); raises UnsupportedConfigError naming the
    broken rule."""
    try:
        scheme = ScaleScheme(enc.scale_scheme)
    except ValueError:
        raise UnsupportedConfigError(
            f"unknown scale_scheme {enc.scale_scheme!r}", rule="KV2-SCHEME"
        ) from None
    if not isinstance(enc.scale_scope, ScaleScope):
        raise UnsupportedConfigError(f"unknown scale_scope {enc.scale_scope!r}", rule="KV-SCOPE")
    for dtype, allowed, what in (
        (enc.k_dtype, K_DTYPES, "k_dtype"),
        (enc.v_dtype, V_DTYPES, "v_dtype"),
        (enc.scale_dtype, SCALE_DTYPES, "scale_dtype"),
    ):
        if dtype not in allowed:
            raise UnsupportedConfigError(
                f"{what} {dtype} is not allowed in a v{int(version_of(scheme))} blob",
                rule=f"KV-{what.removesuffix('_dtype').upper()}-DTYPE",
            )
    try:
        check_consistency(enc)
    except CorruptEncodedKVError as e:
        raise UnsupportedConfigError(
            f"refusing to write an inconsistent blob: {e}", rule=writer_rule(e.rule)
        ) from None


# Speed only: headers already checked and packed. Keyed by every field the header holds
# (check_consistency's fields and the hash values), so an entry cannot go stale.
_WRITTEN_HEADERS: BoundedMemo[tuple[Any, ...], bytes] = BoundedMemo(16)


def writable_header_fields(enc: EncodedKV) -> bytes:
    """``check_writable`` then ``pack_header_fields``: every header byte but the CRC, of a
    header the reader accepts (KV-ENCODE-REFUSE); a header written before is not checked
    and packed again."""
    try:
        key = (fields_key(enc), hash_values(enc.hashes))
        packed = _WRITTEN_HEADERS.get(key)
    except TypeError:  # a field of the wrong type: check it, remember nothing
        check_writable(enc)
        return pack_header_fields(enc)
    if packed is None:
        check_writable(enc)
        packed = pack_header_fields(enc)
        _WRITTEN_HEADERS.put(key, packed)
    return packed


def serialize_header(enc: EncodedKV) -> bytes:
    """The header of ``enc``, ending with the CRC-32 of ``enc.payload`` (KV-CRC), or for a
    RAW_UNIT (v2) blob of the header bytes before it then the payload (KV2-CRC).

    Refuses (UnsupportedConfigError) a header the reader would reject: KV-ENCODE-REFUSE
    holds for every writer, not only ``encode``."""
    check_writable(enc)
    if len(enc.payload) != enc.expected_payload_len():
        raise UnsupportedConfigError(
            f"payload is {len(enc.payload)} bytes but K({enc.k_payload_len}) + "
            f"V({enc.v_payload_len}) + scales({enc.scale_payload_len}) were declared",
            rule="KV-LEN-SUM",
        )
    fields = pack_header_fields(enc)
    crc = payload_crc32(enc.payload, crc_start(enc.version, fields))
    return fields + U32_STRUCT.pack(crc)


def parse_header_fields(
    buf: bytes | bytearray | memoryview, versions: tuple[CodecVersion, ...] = READ_VERSIONS
) -> tuple[EncodedKV, int, int]:
    """Parse and check every header field of the blob that ``buf`` starts with, reading no
    payload byte: ``(enc, header_len, crc32)``, ``enc`` without payload
    (``header_fields.parse_fields`` with torch dtypes)."""
    return parse_fields(buf, TORCH_DTYPES, EncodedKV, versions)


def deserialize_header(
    buf: bytes | bytearray | memoryview,
    *,
    allow_trailing: bool = False,
    versions: tuple[CodecVersion, ...] = READ_VERSIONS,
) -> EncodedKV:
    """Parse and verify a whole blob; the returned payload is a view over ``buf``.

    Checks, in order: length, magic (KV-MAGIC), version (KV-VERSION: one of ``versions``;
    ``(CodecVersion.V1,)`` is a v1-only reader, which refuses every v2 blob), in v2 the
    scheme (KV2-SCHEME), scope (KV-SCOPE, KV2-SCOPE), dtypes (KV-*-DTYPE), in v1 reserved
    (KV-RESERVED), scale_shape_n (KV-SCALE-SHAPE-N), hash strings (KV-HASHES), every
    redundant length (KV-LEN-*, KV2-NO-SCALES) (all of them :func:`parse_header_fields`),
    the payload extent and trailing bytes (KV-TRAILING), then the CRC (KV-CRC; KV2-CRC,
    which covers the header too). With ``allow_trailing`` bytes after the payload are
    ignored, for readers that fill block-aligned buffers.
    Raises CorruptEncodedKVError, and nothing else, for any bad input.
    """
    enc, header_len, crc = parse_header_fields(buf, versions)
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
    version = enc.version
    computed = payload_crc32(enc.payload, crc_start(version, mv[: header_len - 4]))
    if computed != crc:
        covered = "header and payload" if version == CodecVersion.V2 else "payload"
        raise CorruptEncodedKVError(
            f"CRC-32 mismatch: header says {crc:#010x}, the {covered} give {computed:#010x}",
            rule=crc_rule(version),
        )
    enc.header_bytes = bytes(mv[:header_len])
    return enc
