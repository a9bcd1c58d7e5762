"""An independent model of the v1 blob layout, used to build, corrupt and walk blobs.

It is written from SPEC.md's byte table ("Blob header", **KV-LAYOUT**), not from the
reference: the generator checks that the reference's own output re-packs to the same bytes,
so a writer bug in the reference cannot silently become a golden vector. It is also the one
place outside ``reference_impl`` that knows where a field sits: :func:`layout` walks any
buffer, truncated or malformed, as far as its bytes go; :func:`parse` is the strict split of
a well-formed blob; :func:`pack` writes one.

The model is rule-blind: it places fields where the byte table puts them and checks none of
the reader rules, except that a negative ``scale_shape_n`` or payload length cannot be placed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Literal

from .digests import crc32

MAGIC = b"LMCKV\x01\x00\x01"
#: The known hash keys in writing order (SPEC.md, "Blob header": the canonical header).
HASH_KEYS = (
    "model_id",
    "model_revision_hash",
    "tokenizer_hash",
    "rope_config_hash",
    "attention_backend",
    "kv_layout",
)
#: (name, struct code) of the fixed part, in order; offsets follow from the codes.
FIXED_FIELDS = (
    ("magic", "8s"),
    ("version", "H"),
    ("scale_scope", "H"),
    ("k_dtype_id", "H"),
    ("v_dtype_id", "H"),
    ("scale_dtype_id", "H"),
    ("reserved", "H"),
    ("layer_id", "q"),
    ("chunk_id", "q"),
    ("chunk_size", "q"),
    ("page_size", "q"),
    ("kv_head_count", "q"),
    ("head_dim", "q"),
    ("scale_shape_n", "q"),
)
#: The payload length fields, in header order; the payload sections follow in that order
#: (SPEC.md, **KV-PAYLOAD**).
LENGTH_FIELDS = ("k_payload_len", "v_payload_len", "scale_payload_len")
SECTION_NAMES = ("k", "v", "scales")


@dataclass
class Header:
    """Every header field, free to hold values a valid blob never has."""

    version: int = 1
    scale_scope: int = 0
    k_dtype_id: int = 2
    v_dtype_id: int = 7
    scale_dtype_id: int = 4
    reserved: int = 0
    layer_id: int = -1
    chunk_id: int = -1
    chunk_size: int = -1
    page_size: int = -1
    kv_head_count: int = -1
    head_dim: int = -1
    scale_shape: list[int] = field(default_factory=list)
    scale_shape_n: int | None = None
    k_payload_len: int = 0
    v_payload_len: int = 0
    scale_payload_len: int = 0
    hash_pairs: list[tuple[bytes, bytes]] = field(default_factory=list)
    hash_count: int | None = None
    magic: bytes = MAGIC
    crc: int | None = None
    big_endian: bool = False


@dataclass(frozen=True)
class Field:
    """One header field the buffer holds whole: where it sits, its struct code (always
    little-endian, SPEC.md "Conventions") and the value stored there."""

    name: str
    offset: int
    size: int
    code: str
    value: int | bytes

    @property
    def end(self) -> int:
        return self.offset + self.size

    def put(self, buf: bytearray, value: int | bytes) -> None:
        """Overwrite this field of ``buf`` (a buffer laid out like the walked one)."""
        struct.pack_into("<" + self.code, buf, self.offset, value)


@dataclass(frozen=True)
class Stop:
    """The first header field the walk could not place, and why: the buffer ends before
    the field does (**KV-TRUNCATED**), or a count the byte table cannot place (a negative
    ``scale_shape_n``; **KV-SCALE-SHAPE-N**)."""

    field: str
    offset: int
    reason: Literal["truncated", "negative count"]


@dataclass(frozen=True)
class Section:
    """A payload section (**KV-PAYLOAD**): where it starts, the length its header field
    declares, and how many of those bytes the buffer holds."""

    name: str
    offset: int
    declared: int
    present: int

    @property
    def complete(self) -> bool:
        return self.present == self.declared


@dataclass(frozen=True)
class Layout:
    """What :func:`layout` located in a buffer of ``size`` bytes.

    Either ``header_len`` is set (the whole header, CRC included, is present: H of
    SPEC.md's byte table) or ``stop`` says where the walk ended. ``sections`` lists the
    payload sections that start inside the buffer (none unless the header is complete).
    """

    size: int
    fields: tuple[Field, ...]
    header_len: int | None
    stop: Stop | None
    sections: tuple[Section, ...]

    def get(self, name: str) -> Field | None:
        """The field called ``name`` (a :func:`parse` offsets key), if it was located."""
        return next((f for f in self.fields if f.name == name), None)

    def field(self, name: str) -> Field:
        """The field called ``name``; KeyError when the walk did not reach it."""
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def int_value(self, name: str) -> int:
        """The integer stored in field ``name``; KeyError when the walk did not reach it."""
        value = self.field(name).value
        if not isinstance(value, int):
            raise TypeError(f"{name} holds bytes")
        return value

    @property
    def truncated(self) -> bool:
        """The buffer ends inside the header (**KV-TRUNCATED**)."""
        return self.stop is not None and self.stop.reason == "truncated"

    @property
    def payload(self) -> slice | None:
        """The payload bytes present: from H for the three lengths' sum, or to the end of
        the buffer if that comes first (**KV-LEN-SUM**); None when the header is incomplete
        or a length is negative."""
        if self.header_len is None:
            return None
        lengths = [self.int_value(name) for name in LENGTH_FIELDS]
        if min(lengths) < 0:
            return None
        return slice(self.header_len, min(self.header_len + sum(lengths), self.size))


def _walk(blob: bytes | bytearray | memoryview) -> tuple[list[Field], Stop | None]:
    """The header fields of ``blob`` in order, as far as its bytes go. Lengths read from the
    buffer only move the offset and are compared with ``len(blob)``: nothing is sized by
    them, and every loop ends when the bytes do."""
    fields: list[Field] = []
    off = 0
    size = len(blob)

    def take(name: str, code: str) -> int | bytes | None:
        nonlocal off
        width = struct.calcsize("<" + code)
        if off + width > size:
            return None
        (value,) = struct.unpack_from("<" + code, blob, off)
        fields.append(Field(name, off, width, code, value))
        off += width
        return value  # type: ignore[no-any-return]

    def cut(name: str) -> Stop:
        return Stop(name, off, "truncated")

    for name, code in FIXED_FIELDS:
        if take(name, code) is None:
            return fields, cut(name)
    n = fields[-1].value  # scale_shape_n, the last fixed field
    if not isinstance(n, int) or n < 0:
        return fields, Stop("scale_shape[0]", off, "negative count")
    for i in range(n):
        if take(f"scale_shape[{i}]", "q") is None:
            return fields, cut(f"scale_shape[{i}]")
    for name in LENGTH_FIELDS:
        if take(name, "q") is None:
            return fields, cut(name)
    count = take("hash_count", "H")
    if not isinstance(count, int):
        return fields, cut("hash_count")
    for i in range(count):
        for part in ("key", "value"):
            length = take(f"hash[{i}].{part}_len", "H")
            if not isinstance(length, int):
                return fields, cut(f"hash[{i}].{part}_len")
            if take(f"hash[{i}].{part}", f"{length}s") is None:
                return fields, cut(f"hash[{i}].{part}")
    if take("crc", "I") is None:
        return fields, cut("crc")
    return fields, None


def _sections(header_len: int, lengths: list[int], size: int) -> tuple[Section, ...]:
    """K, V and the scales in that order from H (**KV-PAYLOAD**), each listed when it starts
    inside the buffer; a negative length cannot be placed and ends the list."""
    out: list[Section] = []
    off = header_len
    for name, length in zip(SECTION_NAMES, lengths, strict=True):
        if length < 0 or off > size:
            break
        out.append(Section(name, off, length, min(length, size - off)))
        off += length
    return tuple(out)


def layout(blob: bytes | bytearray | memoryview) -> Layout:
    """Locate every header field and payload section of ``blob`` (SPEC.md, "Blob header"
    and "Payload"), as far as the bytes go. Never raises on short or odd input and reports
    nothing that ends beyond ``len(blob)``; checks none of the reader rules."""
    fields, stop = _walk(blob)
    found = Layout(len(blob), tuple(fields), None, stop, ())
    if stop is not None:
        return found
    header_len = fields[-1].end
    lengths = [found.int_value(name) for name in LENGTH_FIELDS]
    sections = _sections(header_len, lengths, len(blob))
    return Layout(len(blob), found.fields, header_len, None, sections)


def pack(h: Header, payload: bytes) -> bytes:
    """Header bytes then ``payload``, in the order of SPEC.md's byte table (**KV-LAYOUT**),
    big-endian if ``h.big_endian``; the CRC is computed over ``payload`` unless set."""
    e = ">" if h.big_endian else "<"
    n = len(h.scale_shape) if h.scale_shape_n is None else h.scale_shape_n
    out = bytearray()
    values = {name: getattr(h, name) for name, _ in FIXED_FIELDS} | {"scale_shape_n": n}
    for name, code in FIXED_FIELDS:
        out += struct.pack(e + code, values[name])
    for d in h.scale_shape:
        out += struct.pack(e + "q", d)
    out += struct.pack(e + "3q", h.k_payload_len, h.v_payload_len, h.scale_payload_len)
    count = len(h.hash_pairs) if h.hash_count is None else h.hash_count
    out += struct.pack(e + "H", count)
    for key, value in h.hash_pairs:
        out += struct.pack(e + "H", len(key)) + key + struct.pack(e + "H", len(value)) + value
    crc = crc32(payload) if h.crc is None else h.crc
    out += struct.pack(e + "I", crc)
    return bytes(out) + payload


@dataclass
class Parsed:
    """A blob split into its header model, the (offset, size) of every field, and its
    payload."""

    header: Header
    offsets: dict[str, tuple[int, int]]
    header_len: int
    payload: bytes


def parse(blob: bytes) -> Parsed:
    """Split a well-formed blob (little-endian) into fields, strictly: raises ValueError
    when the header is cut short (**KV-TRUNCATED**), when the buffer is not exactly H plus
    the payload lengths (**KV-LEN-SUM**, **KV-TRAILING**) or when the CRC is wrong
    (**KV-CRC**)."""
    found = layout(blob)
    if found.header_len is None:
        raise ValueError(f"the header walk stops early: {found.stop}")
    h = Header()
    for name, _ in FIXED_FIELDS:
        setattr(h, name, found.field(name).value)
    h.scale_shape = [found.int_value(f"scale_shape[{i}]") for i in range(h.scale_shape_n or 0)]
    h.scale_shape_n = None
    for name in LENGTH_FIELDS:
        setattr(h, name, found.int_value(name))
    for i in range(found.int_value("hash_count")):
        key, value = found.field(f"hash[{i}].key").value, found.field(f"hash[{i}].value").value
        assert isinstance(key, bytes) and isinstance(value, bytes)
        h.hash_pairs.append((key, value))
    end = found.header_len + h.k_payload_len + h.v_payload_len + h.scale_payload_len
    if end != len(blob):
        raise ValueError(f"blob is {len(blob)} bytes, header says {end}")
    payload = blob[found.header_len : end]
    if crc32(payload) != found.int_value("crc"):
        raise ValueError("CRC mismatch in a blob the generator expected to be valid")
    offsets = {f.name: (f.offset, f.size) for f in found.fields}
    return Parsed(h, offsets, found.header_len, payload)


@dataclass(frozen=True)
class Sections:
    """A blob cut into header (before the CRC), CRC, K, V and scales."""

    header: bytes
    crc: bytes
    k: bytes
    v: bytes
    scales: bytes


def cut_from_end(blob: bytes, k_len: int, v_len: int, scale_len: int) -> Sections:
    """``blob`` cut where a blob with these payload lengths has its boundaries, counting from
    the end: the payload (K, V, scales; **KV-PAYLOAD**) ends the blob and the CRC is the
    header's last 4 bytes (**KV-LAYOUT**). Counting from the end lines up the payload of a
    blob whose header has another length than the one the lengths came from."""
    payload_start = max(len(blob) - (k_len + v_len + scale_len), 0)
    head = blob[:payload_start]
    payload = blob[payload_start:]
    return Sections(
        header=head[:-4],
        crc=head[-4:],
        k=payload[:k_len],
        v=payload[k_len : k_len + v_len],
        scales=payload[k_len + v_len :],
    )
