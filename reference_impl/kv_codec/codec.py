"""AsymK16V8Codec: K kept in float16/bfloat16, V stored as FP8 e4m3fn with scales.

Same public methods and keywords as upstream's codec, with these differences (SPEC.md,
"Differences from upstream 0.5.6"): encode writes header and payload into one buffer and
refuses to write a blob the reader would reject; ``to_bytes`` returns that buffer (a
``bytearray``) without copying; ``from_bytes`` rejects trailing bytes unless asked not to;
``decode`` returns K and V in their logical shape and dequantizes in every scope.
"""

from __future__ import annotations

import ctypes
import math
import warnings

import numpy as np
import torch

from .checksum import payload_crc32
from .errors import (
    CodecMismatchError,
    CorruptEncodedKVError,
    OutputTooSmallError,
    UnsupportedConfigError,
)
from .header import (
    HASH_FIELDS,
    K_DTYPES,
    READ_VERSIONS,
    SCALE_DTYPES,
    CodecHashes,
    CodecVersion,
    EncodedKV,
    ScaleScheme,
    ScaleScope,
    check_consistency,
    deserialize_header,
    serialize_header,
    writable_header_fields,
)
from .layout import LogicalShape, explicit_shape, logical_shape
from .quant_fast import (
    compute_v_scales,
    dequantize_v_fp8,
    quantize_v_fp8,
    small_payload,
    untracked,
    write_small_payload,
)

Buffer = bytes | bytearray | memoryview


def _destination(out: bytearray | memoryview, n: int) -> memoryview:
    """The first ``n`` bytes of the caller's writable buffer ``out``, as a flat byte view;
    refuses (nothing written) a read-only or too small one."""
    view = memoryview(out)
    if view.readonly:
        raise UnsupportedConfigError("encode's out buffer is read-only", rule=None)
    if not view.contiguous:
        raise UnsupportedConfigError("encode's out buffer is not contiguous", rule=None)
    flat = view.cast("B") if view.format != "B" or view.ndim != 1 else view
    if len(flat) < n:
        raise OutputTooSmallError(
            f"encode's out buffer holds {len(flat)} bytes, the blob needs {n}", rule=None
        )
    return flat[:n]


def _byte_view(
    buf: bytearray | memoryview, offset: int, count: int, dtype: torch.dtype = torch.uint8
) -> torch.Tensor:
    """A flat ``dtype`` tensor over ``count`` elements of ``buf`` from ``offset`` (empty
    ranges included)."""
    if count == 0:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer(buf, dtype=dtype, offset=offset, count=count)


def _address(buf: bytearray | memoryview) -> int:
    """The address of a writable host buffer's first byte (valid while ``buf`` is neither
    resized nor released)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def _put(buf: bytearray | memoryview, offset: int, t: torch.Tensor, base: int) -> None:
    """Write ``t``'s elements into ``buf`` (whose first byte is at ``base``) at ``offset``,
    in C order and in t's own dtype, from wherever ``t`` lives (a contiguous host tensor by
    one ``memmove``: one pass, and none of the tensor calls a small blob would spend more
    time on than on its bytes)."""
    n = t.nbytes
    if not n:
        return
    if t.is_cpu and t.is_contiguous():
        ctypes.memmove(base + offset, t.data_ptr(), n)
        return
    _byte_view(buf, offset, t.numel(), t.dtype).view(t.shape).copy_(untracked(t))


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    """The C-order bytes of ``t`` as a flat uint8 tensor (a view when ``t`` is contiguous)."""
    return t.contiguous().reshape(-1).view(torch.uint8)


def _section(
    payload: memoryview, offset: int, length: int, dtype: torch.dtype, shape: tuple[int, ...]
) -> torch.Tensor:
    """``length`` bytes of ``payload`` from ``offset`` as a ``dtype`` tensor of ``shape``
    (of ``length // itemsize`` elements): a view when the payload is writable, else a copy
    (torch cannot view read-only memory)."""
    count = length // dtype.itemsize
    if length == 0:
        empty = torch.empty(0, dtype=dtype)
        return empty if shape == (0,) else empty.view(shape)
    if not payload.readonly:
        flat = torch.frombuffer(payload, dtype=dtype, offset=offset, count=count)
    else:
        with warnings.catch_warnings():  # read-only source: the view is cloned at once
            warnings.simplefilter("ignore", UserWarning)
            flat = torch.frombuffer(payload, dtype=dtype, offset=offset, count=count).clone()
    if shape == (count,):
        return flat
    # view(*dims) costs half of view(tuple) in torch 2.13's argument parsing; () needs the tuple.
    return flat.view(*shape) if shape else flat.view(shape)


class AsymK16V8Codec:
    """The v1 storage codec. Stateless apart from its configuration."""

    def __init__(
        self,
        *,
        fp8_dtype: torch.dtype = torch.float8_e4m3fn,
        scale_dtype: torch.dtype = torch.float32,
        scale_scope: ScaleScope = ScaleScope.PER_TENSOR,
    ) -> None:
        if fp8_dtype == torch.float8_e5m2:
            raise UnsupportedConfigError(
                "float8_e5m2 V is reserved, not part of v1", rule="KV-V-DTYPE"
            )
        if fp8_dtype != torch.float8_e4m3fn:
            raise UnsupportedConfigError(
                f"fp8_dtype must be float8_e4m3fn, got {fp8_dtype}", rule="KV-V-DTYPE"
            )
        if scale_dtype not in SCALE_DTYPES:
            raise UnsupportedConfigError(
                f"scale_dtype {scale_dtype} is not one of {SCALE_DTYPES}", rule="KV-SCALE-DTYPE"
            )
        try:
            scope = ScaleScope(scale_scope)
        except ValueError:
            raise UnsupportedConfigError(
                f"unknown scale scope {scale_scope!r}", rule="KV-SCOPE"
            ) from None
        if scope == ScaleScope.NONE:  # the codec quantizes: its blobs are v1
            raise UnsupportedConfigError(
                "scale scope NONE is the v2 RAW_UNIT scope; this codec stores scales",
                rule="KV-SCOPE",
            )
        self.fp8_dtype = fp8_dtype
        self.scale_dtype = scale_dtype
        self.scale_scope = scope

    def _scales_and_quant(
        self,
        v: torch.Tensor,
        head_axis: int,
        page_axis: int | None,
        precomputed_v_scales: torch.Tensor | None,
        precomputed_v_quant: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The stored scales, and V already in FP8 when the caller supplied it."""
        if precomputed_v_quant is not None:
            if precomputed_v_scales is None:
                raise UnsupportedConfigError(
                    "precomputed_v_quant needs precomputed_v_scales", rule="KV-ENCODE-REFUSE"
                )
            if precomputed_v_quant.dtype != self.fp8_dtype:
                raise UnsupportedConfigError(
                    f"precomputed_v_quant is {precomputed_v_quant.dtype}, not {self.fp8_dtype}",
                    rule="KV-V-DTYPE",
                )
            if precomputed_v_quant.shape != v.shape:
                raise UnsupportedConfigError(
                    f"precomputed_v_quant shape {tuple(precomputed_v_quant.shape)} != "
                    f"V shape {tuple(v.shape)}",
                    rule="KV-ENCODE-REFUSE",
                )
            return self._stored(precomputed_v_scales), precomputed_v_quant
        if precomputed_v_scales is not None:
            return self._stored(precomputed_v_scales), None
        if self.scale_scope == ScaleScope.EXTERNAL:
            raise UnsupportedConfigError(
                "EXTERNAL scope needs precomputed_v_scales", rule="Q-EXTERNAL"
            )
        scales = compute_v_scales(
            v, self.scale_scope, fp8_dtype=self.fp8_dtype, head_axis=head_axis, page_axis=page_axis
        )
        return self._stored(scales), None

    def _stored(self, scales: torch.Tensor) -> torch.Tensor:
        """``scales`` as the scale payload holds them: in scale_dtype, outside autograd."""
        scales = untracked(scales)
        return scales if scales.dtype == self.scale_dtype else scales.to(self.scale_dtype)

    def encode(
        self,
        k: torch.Tensor | None,
        v: torch.Tensor,
        *,
        k_dtype: torch.dtype | None = None,
        hashes: CodecHashes | None = None,
        layer_id: int = -1,
        chunk_id: int = -1,
        chunk_size: int = -1,
        page_size: int = -1,
        kv_head_count: int = -1,
        head_dim: int = -1,
        head_axis: int = -2,
        page_axis: int | None = None,
        precomputed_v_scales: torch.Tensor | None = None,
        precomputed_v_quant: torch.Tensor | None = None,
        out: bytearray | memoryview | None = None,
    ) -> EncodedKV:
        """One blob from K and V (same shape). V is quantized per Q-SCALE/Q-ROUND unless
        ``precomputed_v_quant`` (with its scales) is given; ``precomputed_v_scales`` alone
        quantizes V with those static scales. CUDA inputs are quantized on the device and
        copied to the host once. The result's ``blob`` holds header and payload.

        ``k=None`` writes a K-less blob (KV-K-ABSENT): V and its scales, k_payload_len 0,
        and ``k_dtype`` (required then) recorded as the dtype of the K kept elsewhere.
        Its bytes are those of the blob of (K, V) with K's section removed.

        ``out``: a writable buffer (a ``bytearray``, ``mmap``, the memoryview of a host
        tensor) the blob is written into from its start, in one pass (K copied, V quantized
        straight into it), instead of a new ``bytearray``; ``enc.blob`` is then a memoryview
        of its first ``enc.total_bytes`` bytes. A buffer too small for the blob is refused
        before anything is written."""
        if k is None:
            if k_dtype is None:
                raise UnsupportedConfigError(
                    "a K-less blob records k_dtype: pass k_dtype=", rule="KV-K-ABSENT"
                )
            k = torch.empty(0, dtype=k_dtype, device=v.device)
        elif k_dtype is not None and k_dtype != k.dtype:
            raise UnsupportedConfigError(
                f"k_dtype {k_dtype} disagrees with K's dtype {k.dtype}", rule="KV-ENCODE-REFUSE"
            )
        elif k.shape != v.shape:
            raise UnsupportedConfigError(
                f"K shape {tuple(k.shape)} != V shape {tuple(v.shape)}; they must match",
                rule="KV-ENCODE-REFUSE",
            )
        if k.dtype not in K_DTYPES:
            raise UnsupportedConfigError(
                f"K must be float16 or bfloat16, got {k.dtype}", rule="KV-K-DTYPE"
            )
        if not v.dtype.is_floating_point:
            raise UnsupportedConfigError(
                f"V must be floating point, got {v.dtype}", rule="KV-ENCODE-REFUSE"
            )
        if k.device != v.device:
            raise UnsupportedConfigError(f"K is on {k.device} but V is on {v.device}", rule=None)
        small = None
        if precomputed_v_scales is None and precomputed_v_quant is None:
            small = small_payload(
                v,
                k,
                self.scale_scope,
                scale_dtype=self.scale_dtype,
                fp8_dtype=self.fp8_dtype,
                head_axis=head_axis,
                page_axis=page_axis,
            )
        scales: torch.Tensor | None = None
        if small is None:
            scales, v_quant = self._scales_and_quant(
                v, head_axis, page_axis, precomputed_v_scales, precomputed_v_quant
            )
            scale_shape = tuple(scales.shape)
            scale_len = scales.numel() * scales.element_size()
        else:
            scale_shape = small.scale_shape
            scale_len = 4 * math.prod(scale_shape)  # float32
        enc = EncodedKV(
            k_dtype=k.dtype,
            v_dtype=self.fp8_dtype,
            scale_dtype=self.scale_dtype,
            scale_scope=self.scale_scope,
            hashes=hashes if hashes is not None else CodecHashes(),
            layer_id=layer_id,
            chunk_id=chunk_id,
            chunk_size=chunk_size,
            page_size=page_size,
            kv_head_count=kv_head_count,
            head_dim=head_dim,
            scale_shape=scale_shape,
            k_payload_len=k.numel() * k.element_size(),
            v_payload_len=v.numel(),
            scale_payload_len=scale_len,
        )
        fields = writable_header_fields(enc)
        head_len = len(fields) + 4  # then payload_crc32
        size = head_len + enc.expected_payload_len()
        buf: bytearray | memoryview = bytearray(size) if out is None else _destination(out, size)
        buf[: len(fields)] = fields
        k_off, v_off = head_len, head_len + enc.k_payload_len
        s_off = v_off + enc.v_payload_len
        if scales is None:  # small_payload took it: one kernel call writes the payload
            assert small is not None
            write_small_payload(
                small, v, k, np.frombuffer(buf, dtype=np.uint8), (k_off, v_off, s_off)
            )
        else:
            self._write_payload(
                buf, (k_off, v_off, s_off), k, v, scales, v_quant, head_axis, page_axis
            )
        crc = payload_crc32(memoryview(buf)[head_len:])
        buf[len(fields) : head_len] = crc.to_bytes(4, "little")
        enc.blob = buf
        enc.payload = memoryview(buf)[head_len:]
        enc.header_bytes = bytes(buf[:head_len])
        return enc

    def _write_payload(
        self,
        buf: bytearray | memoryview,
        offsets: tuple[int, int, int],
        k: torch.Tensor,
        v: torch.Tensor,
        scales: torch.Tensor,
        v_quant: torch.Tensor | None,
        head_axis: int,
        page_axis: int | None,
    ) -> None:
        """K, V (quantized by ``scales`` unless ``v_quant`` is given) and the scales into
        ``buf`` at ``offsets``: on the host by one copy each and V quantized in place; from a
        device through one staged buffer and one copy to the host."""
        k_off, v_off, s_off = offsets
        if k.device.type == "cpu":
            base = _address(buf)
            _put(buf, k_off, k, base)
            if v_quant is None:
                v_dst = _byte_view(buf, v_off, v.numel(), self.fp8_dtype)
                quantize_v_fp8(
                    v,
                    scales,
                    self.scale_scope,
                    fp8_dtype=self.fp8_dtype,
                    head_axis=head_axis,
                    page_axis=page_axis,
                    out=v_dst.view(v.shape),
                )
            else:
                _put(buf, v_off, v_quant, base)
            _put(buf, s_off, scales, base)
        else:
            if v_quant is None:
                v_quant = quantize_v_fp8(
                    v,
                    scales.to(v.device),
                    self.scale_scope,
                    fp8_dtype=self.fp8_dtype,
                    head_axis=head_axis,
                    page_axis=page_axis,
                )
            # One device buffer, one copy to the host (a precomputed V may come from the host).
            parts = (untracked(k), untracked(v_quant).to(k.device), scales.to(k.device))
            staged = torch.cat([_as_bytes(t) for t in parts])
            _byte_view(buf, k_off, len(buf) - k_off).copy_(staged)

    def to_bytes(self, enc: EncodedKV) -> bytearray | memoryview:
        """Header then payload. Returns encode's own buffer when ``enc`` came from encode
        and is unchanged (no copy: the view of the caller's buffer after ``encode(out=)``),
        else a new ``bytearray``."""
        if enc.header_bytes is None:
            enc.header_bytes = serialize_header(enc)
        blob = enc.blob
        if (
            blob is not None
            and isinstance(enc.payload, memoryview)
            and enc.payload.obj is (blob.obj if isinstance(blob, memoryview) else blob)
            and len(blob) == len(enc.header_bytes) + len(enc.payload)
            and bytes(blob[: len(enc.header_bytes)]) == enc.header_bytes
        ):
            return blob
        out = bytearray(len(enc.header_bytes) + len(enc.payload))
        out[: len(enc.header_bytes)] = enc.header_bytes
        out[len(enc.header_bytes) :] = enc.payload
        return out

    def from_bytes(
        self,
        buf: Buffer,
        *,
        expected_hashes: CodecHashes | None = None,
        allow_trailing: bool = False,
        versions: tuple[CodecVersion, ...] = READ_VERSIONS,
    ) -> EncodedKV:
        """Parse and verify a blob (see ``deserialize_header``; ``versions``: the header
        versions read, ``(CodecVersion.V1,)`` for a v1-only reader), then apply the hash
        gate: a non-empty expected hash that differs from a non-empty stored one raises
        CodecMismatchError (KV-HASH-GATE)."""
        enc = deserialize_header(buf, allow_trailing=allow_trailing, versions=versions)
        if expected_hashes is not None:
            for name in HASH_FIELDS:
                want, got = getattr(expected_hashes, name), getattr(enc.hashes, name)
                if want and got and want != got:
                    raise CodecMismatchError(
                        f"hash {name!r} differs: blob has {got!r}, expected {want!r}",
                        rule="KV-HASH-GATE",
                    )
        return enc

    def decode(
        self,
        enc: EncodedKV,
        *,
        out_k_dtype: torch.dtype | None = None,
        out_v_dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        layout: str | None = None,
        shape: tuple[int, ...] | None = None,
        head_axis: int = -2,
        page_axis: int | None = None,
        v_scales: torch.Tensor | None = None,
        out_v: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(K, V, scales) in their logical shape (see ``layout.logical_shape``); for a
        K-less blob (KV-K-ABSENT) K is an empty 1-D tensor of ``k_dtype``.

        V stays FP8 unless ``out_v_dtype`` is a wider float, then it is dequantized per
        Q-DEQUANT in any scope; a RAW_UNIT (v2) blob's V codes are returned as stored and
        never widened (KV2-RAW-BYTES), and its scales are an empty 1-D tensor. On CPU, K, V
        and the scales are views over the parsed buffer when it is writable (a bytearray,
        mmap, ...) and copies when it is immutable ``bytes``.
        ``shape`` (with ``head_axis``/``page_axis``) overrides the shape rule; ``layout``
        overrides the ``kv_layout`` hash; ``v_scales`` supplies EXTERNAL scales that
        were not stored. ``out_v``: a tensor of V's element count and ``out_v_dtype`` (on the
        decode's device) that the dequantized V is written into, in one pass, instead of a new
        tensor; the V returned is ``out_v`` viewed in V's logical shape.
        """
        try:
            check_consistency(enc)
        except CorruptEncodedKVError as e:
            raise CorruptEncodedKVError(f"cannot decode: {e}", rule=e.rule) from None
        if len(enc.payload) != enc.expected_payload_len():
            raise CorruptEncodedKVError(
                f"payload is {len(enc.payload)} bytes, header declares "
                f"{enc.expected_payload_len()}",
                rule="KV-LEN-SUM",
            )
        ls: LogicalShape | None = (
            explicit_shape(enc, shape, head_axis, page_axis)
            if shape is not None
            else logical_shape(enc, layout)
        )
        payload = memoryview(enc.payload)
        k_len, v_len = enc.k_payload_len, enc.v_payload_len
        v_shape = (v_len // enc.v_dtype.itemsize,) if ls is None else ls.shape
        # A K-less blob's K stays an empty 1-D tensor (KV-K-ABSENT).
        k_shape = v_shape if enc.has_k and ls is not None else (k_len // enc.k_dtype.itemsize,)
        k = _section(payload, 0, k_len, enc.k_dtype, k_shape)
        v = _section(payload, k_len, v_len, enc.v_dtype, v_shape)
        # KV2-NO-SCALES: scope NONE stores none; its empty section is a 1-D tensor.
        s_shape = (0,) if enc.scale_scope == ScaleScope.NONE else enc.scale_shape
        scales = _section(payload, k_len + v_len, enc.scale_payload_len, enc.scale_dtype, s_shape)
        if device is not None and torch.device(device).type != "cpu":
            k, v, scales = k.to(device), v.to(device), scales.to(device)
        if out_k_dtype is not None and out_k_dtype != k.dtype:
            k = k.to(out_k_dtype)
        if out_v_dtype is None or out_v_dtype == enc.v_dtype:
            if out_v is not None:
                raise UnsupportedConfigError(
                    "out_v receives dequantized V: pass out_v_dtype= too", rule=None
                )
            return k, v, scales
        if out_v is not None and (
            out_v.dtype != out_v_dtype or out_v.numel() != v.numel() or out_v.device != v.device
        ):
            raise UnsupportedConfigError(
                f"out_v is {out_v.dtype} x {out_v.numel()} on {out_v.device}, V needs "
                f"{out_v_dtype} x {v.numel()} on {v.device}",
                rule=None,
            )
        if enc.scale_scheme == ScaleScheme.RAW_UNIT:
            raise UnsupportedConfigError(
                "a RAW_UNIT (v2) blob's V codes are restored as stored, never widened: "
                "no scale is recorded to widen them with",
                rule="KV2-RAW-BYTES",
            )
        return k, self._dequantize(enc, v, scales, ls, out_v_dtype, v_scales, out_v), scales

    def _dequantize(
        self,
        enc: EncodedKV,
        v: torch.Tensor,
        scales: torch.Tensor,
        ls: LogicalShape | None,
        out_dtype: torch.dtype,
        v_scales: torch.Tensor | None,
        out_v: torch.Tensor | None = None,
    ) -> torch.Tensor:
        scope = enc.scale_scope
        if v.numel() == 0:  # nothing to scale: no axes or scales are needed
            return torch.empty(v.shape, dtype=out_dtype, device=v.device)
        if scope == ScaleScope.EXTERNAL and v_scales is not None:
            scales = v_scales.to(v.device)
        elif scope == ScaleScope.EXTERNAL and scales.numel() == 0:
            raise UnsupportedConfigError(
                "EXTERNAL blob stores no scales: pass v_scales=", rule="Q-EXTERNAL"
            )
        if ls is None and scope in (ScaleScope.PER_LAYER_HEAD, ScaleScope.PER_PAGE_HEAD):
            raise UnsupportedConfigError(
                f"{scope.name} dequantization needs the head axis, but the header has no "
                "kv_head_count/head_dim: pass shape= and head_axis=/page_axis=",
                rule="KV-LOGICAL-SHAPE",
            )
        head_axis = ls.head_axis if ls is not None else -2
        page_axis = ls.page_axis if ls is not None else None
        return dequantize_v_fp8(
            v,
            scales,
            scope,
            out_dtype=out_dtype,
            head_axis=head_axis,
            page_axis=page_axis,
            out=out_v,
        )
