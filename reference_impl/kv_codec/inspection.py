"""What ``lmckv inspect`` reports about one blob: its verified header and tensor statistics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from lmckv.reference_impl.dtypes import dtype_name
from lmckv.reference_impl.kv_codec import AsymK16V8Codec, CodecError, EncodedKV, ScaleScope
from lmckv.reference_impl.kv_codec.blob_file import check_blob_file
from lmckv.reference_impl.kv_codec.header import HASH_FIELDS
from lmckv.reference_impl.kv_codec.layout import logical_shape


def header_record(enc: EncodedKV) -> dict[str, Any]:
    """The header fields of a parsed blob, dtypes by name, scope by enum name."""
    header = enc.header_bytes or b""
    return {
        "version": 1,
        # KV-K-ABSENT: "v_only" for a K-less blob (V and scales; K is held elsewhere)
        "blob_kind": "kv" if enc.has_k else "v_only",
        "scale_scope": enc.scale_scope.name,
        "k_dtype": dtype_name(enc.k_dtype),
        "v_dtype": dtype_name(enc.v_dtype),
        "scale_dtype": dtype_name(enc.scale_dtype),
        "layer_id": enc.layer_id,
        "chunk_id": enc.chunk_id,
        "chunk_size": enc.chunk_size,
        "page_size": enc.page_size,
        "kv_head_count": enc.kv_head_count,
        "head_dim": enc.head_dim,
        "scale_shape": list(enc.scale_shape),
        "k_payload_len": enc.k_payload_len,
        "v_payload_len": enc.v_payload_len,
        "scale_payload_len": enc.scale_payload_len,
        "header_len": len(header),
        "total_len": len(header) + enc.expected_payload_len(),
        "crc32": int.from_bytes(header[-4:], "little"),
        "hashes": {name: getattr(enc.hashes, name) for name in HASH_FIELDS},
    }


def _nonfinite(t: torch.Tensor) -> tuple[int, int]:
    f = t.float()
    return int(torch.isnan(f).sum()), int(torch.isinf(f).sum())


def decode_stats(enc: EncodedKV) -> dict[str, Any]:
    """Shapes, V abs-max per scale group (dequantized), and NaN/Inf counts of K and V."""
    codec = AsymK16V8Codec(scale_scope=enc.scale_scope)
    k, v, scales = codec.decode(enc, out_v_dtype=torch.float32)
    ls = logical_shape(enc)
    keep: tuple[int, ...] = ()
    if ls is not None and enc.scale_scope == ScaleScope.PER_LAYER_HEAD:
        keep = (ls.head_axis,)
    elif ls is not None and enc.scale_scope == ScaleScope.PER_PAGE_HEAD:
        keep = tuple(a for a in (ls.page_axis, ls.head_axis) if a is not None)
    reduce = tuple(d for d in range(v.ndim) if d not in keep)
    absmax = v.abs().amax(dim=reduce) if v.numel() else torch.zeros(())
    k_nan, k_inf = _nonfinite(k)
    v_nan, v_inf = _nonfinite(v)
    return {
        "k_shape": list(k.shape),
        "v_shape": list(v.shape),
        "scale_shape": list(scales.shape),
        "v_absmax_per_group": absmax.tolist(),
        "k_nan": k_nan,
        "k_inf": k_inf,
        "v_nan": v_nan,
        "v_inf": v_inf,
    }


def inspect_file(path: str, *, decode: bool) -> dict[str, Any]:
    """One JSON record: ``path``, ``valid``, then ``header`` (and ``stats``) or ``error``
    (the error class name) and ``message``. The file is checked as a stream
    (``check_blob_file``: bounded memory whatever it claims); only ``decode`` reads the
    payload into memory, once its length is known to match the file. Raises
    BlobFileError when the file cannot be checked."""
    try:
        enc = check_blob_file(path)
    except CodecError as e:
        return {"path": path, "valid": False, "error": type(e).__name__, "message": str(e)}
    record: dict[str, Any] = {"path": path, "valid": True, "header": header_record(enc)}
    if decode:
        try:
            record["stats"] = decode_stats(AsymK16V8Codec().from_bytes(Path(path).read_bytes()))
        except CodecError as e:  # a valid blob whose layout this reader cannot shape
            record["stats_error"] = f"{type(e).__name__}: {e}"
    return record
