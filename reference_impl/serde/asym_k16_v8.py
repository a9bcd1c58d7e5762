"""The AsymK16V8 serde: a (K, V) group to one LMCKV blob and back (SPEC.md, "The serde
layer"), with upstream's public names (``lmcache.v1.distributed.serde.asym_k16_v8``).

Glue over :mod:`lmckv.reference_impl.kv_codec`:

- ``AsymK16V8MultiSerializer`` writes ``codec.encode(K, V)`` (geometry unset, no hashes)
  into the destination (SERDE-BYTES); ``AsymK16V8VOnlyMultiSerializer`` writes the K-less
  blob of V, ``codec.encode(None, V, k_dtype=...)`` (KV-K-ABSENT).
- ``estimate_serialized_size`` is the exact size serialize writes for the layout, an upper
  bound for every layout the serializer accepts (SERDE-ESTIMATE).
- The deserializers read the source as a framed buffer: a blob followed by unused
  capacity (``allow_trailing``, SERDE-FRAMED), check every requested slot before writing
  any, and write nothing when they refuse (SERDE-SLOTS, SERDE-CROSS-MODE).

Group slots are objects with a ``tensor`` attribute (upstream's ``MemoryObj``) or None.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import torch

from ..kv_codec import AsymK16V8Codec, EncodedKV, ScaleScope
from ..kv_codec.errors import OutputTooSmallError
from ..kv_codec.header import FIXED_HEADER_LEN, HASH_FIELDS
from .errors import (
    DestinationTooSmallError,
    SerdeModeError,
    SerdeSlotError,
)

GROUP_SIZE = 2  # (K, V) on both sides, in both modes

#: What a serde's blob header takes besides its scale dimensions: the fixed part, the three
#: lengths, the hash section with six empty values, the CRC (KV-LAYOUT).
_HEADER_BASE = FIXED_HEADER_LEN + 24 + 2 + sum(2 + len(k) + 2 for k in HASH_FIELDS) + 4

#: The axis the serializers take V's heads from (the codec's default head_axis).
HEAD_AXIS = -2


class MemoryObjLike(Protocol):
    """A group slot: what the serde uses of upstream's ``MemoryObj``."""

    tensor: torch.Tensor | None


class LayoutLike(Protocol):
    """What the estimate uses of ``MemoryLayoutDesc``."""

    shapes: Sequence[Sequence[int]]
    dtypes: Sequence[torch.dtype]


def _group(group: Sequence[Any], role: str) -> tuple[Any, Any]:
    if len(group) != GROUP_SIZE:
        raise SerdeSlotError(
            f"{role} group has {len(group)} slots, expected {GROUP_SIZE}", rule="SERDE-SLOTS"
        )
    return group[0], group[1]


def _tensor(obj: MemoryObjLike, what: str) -> torch.Tensor:
    t = getattr(obj, "tensor", None)
    if not isinstance(t, torch.Tensor):
        raise SerdeSlotError(f"{what} has no tensor", rule="SERDE-SLOTS")
    return t


def _write(blob: bytearray | memoryview, out: torch.Tensor) -> int:
    """SERDE-DST-SMALL: the blob into ``out``'s bytes, or a refusal with nothing written."""
    n = len(blob)
    if out.numel() < n:
        raise DestinationTooSmallError(
            f"destination holds {out.numel()} bytes, the blob needs {n}", rule="SERDE-DST-SMALL"
        )
    out[:n].copy_(torch.frombuffer(blob, dtype=torch.uint8))
    return n


def _encode_into(codec: AsymK16V8Codec, dst: MemoryObjLike, *args: Any, **kwargs: Any) -> int:
    """SERDE-BYTES: ``codec.encode(*args, **kwargs)`` written into ``dst``'s bytes; the bytes
    written. A host destination receives the blob in one pass (``encode(out=)``: K copied and
    V quantized straight into it); others get a copy of the encoded blob. SERDE-DST-SMALL:
    a destination smaller than the blob is refused with nothing written."""
    out = _tensor(dst, "dst").view(-1).view(torch.uint8)
    if out.device.type != "cpu":
        return _write(codec.to_bytes(codec.encode(*args, **kwargs)), out)
    try:
        return codec.encode(*args, out=out.numpy().data, **kwargs).total_bytes
    except OutputTooSmallError as e:
        raise DestinationTooSmallError(str(e), rule="SERDE-DST-SMALL") from None


def _scale_count(scope: ScaleScope, shapes: Sequence[Sequence[int]]) -> tuple[int, int]:
    """(scale elements, scale dimensions) the serializer writes for V of ``shapes``: an
    upper bound when the group has several shapes."""
    if scope == ScaleScope.PER_TENSOR:
        return 1, 0
    if scope == ScaleScope.PER_LAYER_HEAD:
        if any(len(s) < -HEAD_AXIS for s in shapes):
            raise SerdeSlotError(
                f"PER_LAYER_HEAD needs V of rank >= {-HEAD_AXIS} (heads on axis {HEAD_AXIS})",
                rule="SERDE-ESTIMATE",
            )
        return max(int(s[HEAD_AXIS]) for s in shapes), 1
    raise SerdeSlotError(
        f"{scope.name}: this serde writes PER_TENSOR and PER_LAYER_HEAD only (PER_PAGE_HEAD "
        "needs a page axis, EXTERNAL the caller's scales, neither of which a group carries)",
        rule="SERDE-ESTIMATE",
    )


class _Serde:
    """What every serde holds: its codec, configured as upstream's constructors take it."""

    def __init__(
        self,
        fp8_dtype: torch.dtype = torch.float8_e4m3fn,
        scale_scope: ScaleScope = ScaleScope.PER_TENSOR,
        scale_dtype: torch.dtype = torch.float32,
    ) -> None:
        self._codec = AsymK16V8Codec(
            fp8_dtype=fp8_dtype, scale_scope=scale_scope, scale_dtype=scale_dtype
        )

    @property
    def group_size(self) -> int:
        return GROUP_SIZE


class _Serializer(_Serde):
    """What both serializers share: the size rule, and the scopes they write."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _scale_count(self._codec.scale_scope, [(1, 1)])  # refuse unwritable scopes now

    def _size(self, k_bytes: int, v_layout: LayoutLike) -> int:
        shapes = [tuple(int(d) for d in s) for s in v_layout.shapes]
        scales, dims = _scale_count(self._codec.scale_scope, shapes)
        v_elems = sum(math.prod(s) for s in shapes)
        scale_bytes = scales * self._codec.scale_dtype.itemsize
        return _HEADER_BASE + 8 * dims + k_bytes + v_elems + scale_bytes


class AsymK16V8MultiSerializer(_Serializer):
    """(K, V) -> the codec's blob of K and V ("storage-only-dequant"). Both slots required."""

    def serialize(self, src: Sequence[Any], dst: MemoryObjLike, key: object = None) -> int:
        """Write the blob into ``dst``; the number of bytes written (SERDE-BYTES)."""
        k_obj, v_obj = _group(src, "src")
        if k_obj is None or v_obj is None:
            raise SerdeSlotError("both K and V are required in this mode", rule="SERDE-SLOTS")
        return _encode_into(self._codec, dst, _tensor(k_obj, "K"), _tensor(v_obj, "V"))

    def estimate_serialized_size(self, layout_descs: Sequence[LayoutLike | None]) -> int:
        """The bytes serialize writes for this layout (SERDE-ESTIMATE)."""
        k_layout, v_layout = _group(layout_descs, "layout")
        if k_layout is None or v_layout is None:
            raise SerdeSlotError("both K and V layouts are required", rule="SERDE-SLOTS")
        k_bytes = sum(
            math.prod(int(d) for d in s) * dt.itemsize
            for s, dt in zip(k_layout.shapes, k_layout.dtypes, strict=True)
        )
        return self._size(k_bytes, v_layout)


class AsymK16V8VOnlyMultiSerializer(_Serializer):
    """(None, V) -> the K-less blob of V ("split-tier", KV-K-ABSENT); the K slot must be None
    and ``k_dtype_tag`` is recorded as k_dtype."""

    def __init__(
        self,
        fp8_dtype: torch.dtype = torch.float8_e4m3fn,
        scale_scope: ScaleScope = ScaleScope.PER_TENSOR,
        scale_dtype: torch.dtype = torch.float32,
        k_dtype_tag: torch.dtype = torch.bfloat16,
    ) -> None:
        super().__init__(fp8_dtype, scale_scope, scale_dtype)
        self._k_dtype_tag = k_dtype_tag

    def serialize(self, src: Sequence[Any], dst: MemoryObjLike, key: object = None) -> int:
        """Write the K-less blob into ``dst``; the number of bytes written (SERDE-BYTES)."""
        k_obj, v_obj = _group(src, "src")
        if k_obj is not None:
            raise SerdeSlotError("the K slot must be None in V-only mode", rule="SERDE-SLOTS")
        if v_obj is None:
            raise SerdeSlotError("V is required", rule="SERDE-SLOTS")
        return _encode_into(self._codec, dst, None, _tensor(v_obj, "V"), k_dtype=self._k_dtype_tag)

    def estimate_serialized_size(self, layout_descs: Sequence[LayoutLike | None]) -> int:
        """The bytes serialize writes for this layout (SERDE-ESTIMATE)."""
        k_layout, v_layout = _group(layout_descs, "layout")
        if k_layout is not None:
            raise SerdeSlotError("the K layout must be None in V-only mode", rule="SERDE-SLOTS")
        if v_layout is None:
            raise SerdeSlotError("the V layout is required", rule="SERDE-SLOTS")
        return self._size(0, v_layout)


class _Deserializer(_Serde):
    """What both deserializers share: the framed read and the checked, all-or-nothing
    write of the requested slots."""

    def _parse(self, src: MemoryObjLike) -> EncodedKV:
        """SERDE-FRAMED: the blob at the start of ``src``; the capacity after it is unused."""
        data = _tensor(src, "src").contiguous().view(-1).view(torch.uint8)
        # A host source is read where it lies (its payload viewed, not copied); others are
        # copied to the host first.
        blob = data.numpy().data if data.device.type == "cpu" else bytearray(data.cpu().numpy())
        return self._codec.from_bytes(blob, allow_trailing=True)

    def _fill(self, enc: EncodedKV, k_out: torch.Tensor | None, v_out: torch.Tensor | None) -> None:
        """Decode into the requested outputs; check both before writing either."""
        elems = enc.element_count
        for what, out in (("K", k_out), ("V", v_out)):
            if out is not None and out.numel() != elems:
                raise SerdeSlotError(
                    f"{what} destination holds {out.numel()} elements, the blob {elems}",
                    rule="SERDE-SLOTS",
                )
        shape = tuple(v_out.shape) if v_out is not None else None
        # V dequantized straight into a contiguous host destination (one pass), else copied.
        direct = (
            v_out is not None
            and v_out.is_contiguous()
            and v_out.device.type == "cpu"
            and v_out.dtype != enc.v_dtype
        )
        k, v, _ = self._codec.decode(
            enc,
            out_k_dtype=k_out.dtype if k_out is not None else None,
            out_v_dtype=v_out.dtype if v_out is not None else None,
            shape=shape if shape is not None and len(shape) >= -HEAD_AXIS else None,
            head_axis=HEAD_AXIS,
            out_v=v_out.view(-1) if direct and v_out is not None else None,
        )
        if k_out is not None:
            k_out.copy_(k.reshape(k_out.shape))
        if v_out is not None and not direct:
            v_out.copy_(v.reshape(v_out.shape))


class AsymK16V8MultiDeserializer(_Deserializer):
    """A blob -> (K_out, V_out): K bit-exact (cast to K_out's dtype), V dequantized into
    V_out's dtype. A None slot is skipped and left alone; a K-less blob can fill V only."""

    def deserialize(self, src: MemoryObjLike, dst: Sequence[Any], key: object = None) -> None:
        k_obj, v_obj = _group(dst, "dst")
        if k_obj is None and v_obj is None:
            return
        k_out = None if k_obj is None else _tensor(k_obj, "K destination")
        v_out = None if v_obj is None else _tensor(v_obj, "V destination")
        enc = self._parse(src)
        if k_out is not None and not enc.has_k:
            raise SerdeModeError(
                "the blob holds no K (a V-only blob): pass None for K, or read it with the "
                "V-only deserializer",
                rule="SERDE-CROSS-MODE",
            )
        self._fill(enc, k_out, v_out)


class AsymK16V8VOnlyMultiDeserializer(_Deserializer):
    """A K-less blob -> (untouched, V_out). The K slot is never written, whatever it holds;
    a blob with K is refused (it belongs to the (K, V) deserializer)."""

    def deserialize(self, src: MemoryObjLike, dst: Sequence[Any], key: object = None) -> None:
        _k_obj, v_obj = _group(dst, "dst")
        if v_obj is None:
            return
        v_out = _tensor(v_obj, "V destination")
        enc = self._parse(src)
        if enc.k_payload_len:
            raise SerdeModeError(
                f"the blob holds K ({enc.k_payload_len} bytes): read it with "
                "AsymK16V8MultiDeserializer",
                rule="SERDE-CROSS-MODE",
            )
        self._fill(enc, None, v_out)
