"""What ``lmckv inspect`` reports about one blob: its verified header (read without torch,
in the memory of a small process) and, asked for, its tensor statistics (``blob_stats``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .blob_file import check_blob_file
from .errors import CodecError
from .header_fields import HASH_FIELDS, HeaderFields


def header_record(enc: HeaderFields) -> dict[str, Any]:
    """The header fields of a parsed blob: its version and scheme, dtypes by name, scope and
    scheme by enum name."""
    header = enc.header_bytes or b""
    return {
        "version": int(enc.version),
        # KV2-SCHEME: RAW_UNIT for a v2 blob, COMPUTED_PER_TENSOR (v1's reserved 0) otherwise
        "scale_scheme": enc.scale_scheme.name,
        # KV-K-ABSENT: "v_only" for a K-less blob (V and scales; K is held elsewhere)
        "blob_kind": "kv" if enc.has_k else "v_only",
        "scale_scope": enc.scale_scope.name,
        "k_dtype": enc.k_dtype.name,
        "v_dtype": enc.v_dtype.name,
        "scale_dtype": enc.scale_dtype.name,
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


def inspect_file(path: str, *, decode: bool) -> dict[str, Any]:
    """One JSON record: ``path``, ``valid``, then ``header`` (and ``stats``) or ``error``
    (the error class name), ``rule`` (the SPEC rule broken, or null) and ``message``.
    The file is checked as a stream (``check_blob_file``: bounded memory whatever it
    claims); only ``decode`` reads the payload into memory, once its length is known to
    match the file. Raises
    BlobFileError when the file cannot be checked."""
    try:
        enc = check_blob_file(path)
    except CodecError as e:
        return {
            "path": path,
            "valid": False,
            "error": type(e).__name__,
            "rule": e.rule,
            "message": str(e),
        }
    record: dict[str, Any] = {"path": path, "valid": True, "header": header_record(enc)}
    if decode:
        from .blob_stats import blob_stats  # loads torch

        try:
            record["stats"] = blob_stats(Path(path).read_bytes())
        except CodecError as e:  # a valid blob whose layout this reader cannot shape
            record["stats_error"] = f"{type(e).__name__}: {e}"
    return record
