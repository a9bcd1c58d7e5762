"""The codec vector builder: runs the reference on each vector and records the outcome.

Three families use it (golden_blobs/v1/codec.json and codec/):

- encode vectors (codec_encode): stored K/V inputs, the reference's blob, its header and its
  decoded outputs. Re-encoding the inputs must give the blob byte for byte.
- blob vectors (codec_blobs), built by hand from a valid blob: every header field
  corrupted, truncation at every field boundary, CRC variants, redundant fields that
  disagree while the CRC is valid, trailing bytes, odd but valid hash sections.
- hash-gate vectors (codec_blobs): one blob read with different expected hashes.

Every vector's outcome is what the reference does, and the builder fails if the reference
does not do what the vector's ``result`` says (so a reference bug cannot become golden).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ...reference_impl.kv_codec import ScaleScope, quant_rules
from ..core import blob_model as bl
from ..core.digests import sha256
from ..core.dtype_names import dtype_from_name, dtype_name
from ..core.tensor_bytes import tensor_bytes
from ..drivers.python_driver import PythonDriver
from .common import FileSet, GenerationError

PER_TENSOR, PER_LAYER_HEAD, PER_PAGE_HEAD, EXTERNAL = 0, 1, 2, 3
SCOPE_NAMES = {int(scope): scope.name.lower() for scope in ScaleScope}
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
CORRUPT = "CorruptEncodedKVError"
MISMATCH = "CodecMismatchError"
UNSUPPORTED = "UnsupportedConfigError"

NOTES = {
    "canonical": "One of the canonical inputs of the producer x consumer matrix.",
    "logical-shape": "Decode must return K and V in the logical shape recorded here.",
    "nhd": "Token-major layout [pages, page_size, heads, head_dim] (kv_layout '' or NHD).",
    "hnd": "Head-major layout [pages, heads, page_size, head_dim] (kv_layout HND).",
    "unpaged": "No page axis: [tokens, heads, head_dim].",
    "foreign-layout": "Axis order no kv_layout name describes; decode cannot shape it.",
    "all-zero": "V is zero everywhere: every scale is the sentinel 1.0.",
    "zero-group": "One page or head of V is all zero: its scale is the sentinel 1.0.",
    "nonfinite": "V holds NaN or Inf (Q-NONFINITE).",
    "k-nonfinite": "K holds NaN (including a signalling payload) or Inf, stored bit-exactly.",
    "saturate": "Static scales smaller than amax: quantized values clamp to +-448.",
    "fp8-subnormal": "Quantized values fall into the e4m3fn subnormal range (or to zero).",
    "input-subnormal": "V holds float16/bfloat16 subnormals.",
    "scale-subnormal": "The float32 scale itself is subnormal (bfloat16 values near 1e-38).",
    "huge": "Values near the dtype's maximum.",
    "dynamic-range": "Pages or heads differ by orders of magnitude.",
    "static-scales": "Scales supplied by the caller (precomputed_v_scales).",
    "scale-dtype": "Scales stored in a dtype other than float32.",
    "empty": "Zero tokens: empty K, V and scale-free payload.",
    "hashes": "Hash strings set (UTF-8, multi-byte, long).",
    "ids": "layer_id/chunk_id/geometry at their extreme values.",
    "field-corrupt": "One header field overwritten with a value the rule forbids.",
    "redundant-disagree": "Redundant fields disagree while the payload CRC stays valid.",
    "truncated": "The buffer ends early: inside the header or inside the payload.",
    "crc": "The CRC field or the payload it covers is wrong.",
    "crc32c": "The CRC field holds CRC-32C (Castagnoli) instead of CRC-32 (IEEE).",
    "trailing": "Bytes follow the payload.",
    "allow-trailing": "Read with allow_trailing=True.",
    "header-not-covered": "A header edit the CRC cannot see (the CRC covers the payload "
    "only); the blob is valid but means something else.",
    "byte-order": "Fields written big-endian.",
    "hash-section": "Unusual but valid, or malformed, hash section.",
    "hash-gate": "Read with expected hashes (KV-HASH-GATE).",
    "allocation": "A length field an unchecked reader would allocate or seek by.",
    "encode-refused": "An encode request the writer must refuse (no blob is produced).",
    "k-absent": "A K-less blob (k_payload_len 0, k_dtype recorded): V and its scales only, as "
    "upstream's V-only serializer writes them (KV-K-ABSENT).",
    "int64-overflow": "A product or sum of header fields exceeds 2^63 - 1: exact arithmetic "
    "rejects the blob; a reader computing in 64 bits must check for overflow.",
}


def reference_driver() -> PythonDriver:
    from ...reference_impl import keys as keys
    from ...reference_impl import kv_codec as kv_codec
    from ...reference_impl import protocol as protocol

    return PythonDriver("reference", kv_codec, protocol, keys)


@dataclass
class Layout:
    """A tensor layout: the shape of K/V and where the axes are."""

    tag: str
    shape: list[int]
    head_axis: int
    page_axis: int | None
    kv_layout: str
    flags: list[str]

    @property
    def heads(self) -> int:
        return self.shape[self.head_axis]

    def geometry(self) -> dict[str, int]:
        d = self.shape[-1]
        if self.page_axis is None:
            return {"kv_head_count": self.heads, "head_dim": d}
        tokens = math.prod(self.shape) // (self.heads * d)
        per_page = tokens // self.shape[self.page_axis]
        return {
            "kv_head_count": self.heads,
            "head_dim": d,
            "page_size": per_page,
            "chunk_size": tokens,
        }


LAYOUTS = {
    "nhd-2x4x2x8": Layout("nhd-2x4x2x8", [2, 4, 2, 8], -2, 0, "", ["nhd"]),
    "nhd-3x8x4x16": Layout("nhd-3x8x4x16", [3, 8, 4, 16], -2, 0, "NHD", ["nhd"]),
    "nhd-1x16x1x32": Layout("nhd-1x16x1x32", [1, 16, 1, 32], -2, 0, "", ["nhd"]),
    "hnd-2x4x4x8": Layout("hnd-2x4x4x8", [2, 4, 4, 8], 1, 0, "HND", ["hnd"]),
    "tok-8x2x8": Layout("tok-8x2x8", [8, 2, 8], -2, None, "", ["unpaged"]),
    "hptd-2x2x4x8": Layout("hptd-2x2x4x8", [2, 2, 4, 8], 0, 1, "HPTD", ["foreign-layout"]),
}


@dataclass
class EncodeSpec:
    """Everything one encode vector needs."""

    id: str
    rule: str
    comment: str
    layout: Layout
    dtype: torch.dtype
    scope: int
    k: torch.Tensor
    v: torch.Tensor
    flags: list[str] = field(default_factory=list)
    meta: dict[str, int] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)
    v_scales: torch.Tensor | None = None
    scale_dtype: str = "float32"


def _check_normative_quantization(spec: EncodeSpec, parsed: bl.Parsed) -> None:
    """The blob's V and scale sections are what the plain rules (``quant_rules``: Q-SCALE,
    Q-ROUND) give for the vector's inputs: the codec's fast path cannot make a golden
    vector that the normative path disagrees with."""
    scope = ScaleScope(spec.scope)
    lay = spec.layout
    head_axis = lay.head_axis
    page_axis = lay.page_axis if spec.scope == PER_PAGE_HEAD else None
    if spec.v_scales is not None:
        scales = spec.v_scales.to(torch.float32)
    else:
        scales = quant_rules.v_scales(spec.v, scope, head_axis=head_axis, page_axis=page_axis)
    stored = scales.to(dtype_from_name(spec.scale_dtype) or torch.float32)
    v_quant = quant_rules.quantize(spec.v, stored, scope, head_axis=head_axis, page_axis=page_axis)
    h = parsed.header
    v_section = parsed.payload[h.k_payload_len : h.k_payload_len + h.v_payload_len]
    s_section = parsed.payload[h.k_payload_len + h.v_payload_len :]
    if tensor_bytes(v_quant) != v_section or tensor_bytes(stored) != s_section:
        raise GenerationError(f"{spec.id}: the blob's V or scales differ from quant_rules'")


class CodecVectors:
    """Accumulates codec vectors and their files."""

    def __init__(self, files: FileSet) -> None:
        self.files = files
        self.driver = reference_driver()
        self.vectors: list[dict[str, Any]] = []
        self.base_blobs: dict[str, bytes] = {}
        #: The vector id of each base blob: the parent named by vectors edited from it.
        self.base_ids: dict[str, str] = {}
        #: Valid blobs built from scratch, by vector id (codec_blobs.unset_parents).
        self.unset_parents: dict[str, bytes] = {}
        self.encode_vectors: dict[str, dict[str, Any]] = {}

    # -- running the reference ------------------------------------------------------------

    def _call(self, op: str, **fields: Any) -> dict[str, Any]:
        return self.driver.call(op, **fields)

    def _decode_expectations(self, vid: str, blob: bytes, out_dtype: str) -> dict[str, Any]:
        fp8 = self._call("codec.decode", blob=blob, out_v_dtype=None)
        out: dict[str, Any] = {}
        if fp8["ok"]:
            out["payload"] = {
                name: {
                    "sha256": sha256(fp8[name]),
                    "dtype": fp8[f"{name}_dtype" if name != "scales" else "scales_dtype"],
                    "shape": fp8[f"{name}_shape" if name != "scales" else "scales_shape"],
                    "nbytes": len(fp8[name]),
                }
                for name in ("k", "v", "scales")
            }
        else:
            out["payload"] = {"error": fp8["error"]}
        dq = self._call("codec.decode", blob=blob, out_v_dtype=out_dtype)
        if dq["ok"]:
            path = self.files.add(f"v1/codec/{vid}.v-{out_dtype}.bin", dq["v"])
            out["dequant"] = {
                "out_v_dtype": out_dtype,
                "file": path,
                "sha256": sha256(dq["v"]),
                "dtype": dq["v_dtype"],
                "shape": dq["v_shape"],
            }
        else:
            out["dequant"] = {"out_v_dtype": out_dtype, "error": dq["error"]}
        return out

    def _parse(self, blob: bytes, parse_args: dict[str, Any]) -> dict[str, Any]:
        return self._call("codec.parse", blob=blob, **parse_args)

    def add_blob(
        self,
        vid: str,
        rule: str,
        comment: str,
        blob: bytes,
        *,
        result: str,
        flags: list[str],
        error: str | None = None,
        parse_args: dict[str, Any] | None = None,
        decode: bool | None = None,
        out_dtype: str = "float16",
        blob_path: str | None = None,
        parent: str | None = None,
        edit: dict[str, Any] | None = None,
        alt_rules: list[str] | None = None,
    ) -> dict[str, Any]:
        """One vector over ``blob``; checks that the reference agrees with ``result``.

        ``parent`` names the valid vector ``blob`` was edited from and ``edit`` describes the
        edit (vectors.schema.json, "edit"); every invalid blob vector has both, and
        tests/test_vector_edits.py checks the description against the bytes. ``alt_rules``:
        other rules a reader may name for the error, when the comment explains why more
        than one rule genuinely applies (rare)."""
        if result == "invalid" and (parent is None or edit is None):
            raise GenerationError(f"{vid}: an invalid vector needs a parent and an edit")
        parse_args = parse_args or {}
        got = self._parse(blob, parse_args)
        if result == "valid" and not got["ok"]:
            raise GenerationError(f"{vid}: reference rejects a valid vector: {got}")
        if result == "invalid" and (got["ok"] or got["error"] != error):
            raise GenerationError(f"{vid}: reference gives {got}, vector expects {error}")
        path = blob_path or self.files.add(f"v1/codec/{vid}.bin", blob)
        vec: dict[str, Any] = {
            "id": vid,
            "rule": rule,
            "comment": comment,
            "flags": sorted(set(flags)),
            "result": result,
            "blob": path,
            "blob_sha256": sha256(blob),
            "parse": parse_args_to_json(parse_args),
        }
        if parent is not None:
            vec["parent"] = parent
            vec["edit"] = edit
        if alt_rules:
            vec["alt_rules"] = sorted(alt_rules)
        if got["ok"]:
            header = {k: v for k, v in got.items() if k != "ok"}
            vec["expected"] = {"header": header}
        else:
            vec["expected"] = {"error": got["error"]}
        if decode is None:
            decode = result == "valid" and not parse_args
        if decode:
            vec["decode"] = self._decode_expectations(vid, blob, out_dtype)
        self.vectors.append(vec)
        return vec

    def add_encode(self, spec: EncodeSpec) -> bytes:
        """An encode vector: inputs, the reference's blob, header and decode outputs."""
        lay = spec.layout
        meta = {"layer_id": -1, "chunk_id": -1, **lay.geometry(), **spec.meta}
        hashes = dict(spec.hashes)
        if lay.kv_layout and "kv_layout" not in hashes:
            hashes["kv_layout"] = lay.kv_layout
        request: dict[str, Any] = {
            "k": tensor_bytes(spec.k),
            "v": tensor_bytes(spec.v),
            "dtype": dtype_name(spec.dtype),
            "shape": list(lay.shape),
            "scale_scope": spec.scope,
            "head_axis": lay.head_axis,
            "page_axis": lay.page_axis if spec.scope == PER_PAGE_HEAD else None,
            "scale_dtype": spec.scale_dtype,
            **meta,
            **hashes,
        }
        if spec.v_scales is not None:
            request["v_scales"] = tensor_bytes(spec.v_scales.to(torch.float32))
            request["scales_shape"] = list(spec.v_scales.shape)
        got = self._call("codec.encode", **request)
        if not got["ok"]:
            raise GenerationError(f"{spec.id}: reference cannot encode: {got}")
        blob: bytes = got["blob"]
        parsed = bl.parse(blob)
        if bl.pack(parsed.header, parsed.payload) != blob:
            raise GenerationError(f"{spec.id}: reference header does not re-pack identically")
        _check_normative_quantization(spec, parsed)
        k_path = self.files.add(f"v1/codec/{spec.id}.k.bin", request["k"])
        v_path = self.files.add(f"v1/codec/{spec.id}.v.bin", request["v"])
        encode_in: dict[str, Any] = {
            key: value for key, value in request.items() if key not in ("k", "v", "v_scales")
        }
        encode_in["k_file"] = k_path
        encode_in["v_file"] = v_path
        if spec.v_scales is not None:
            encode_in["v_scales_file"] = self.files.add(
                f"v1/codec/{spec.id}.scales.bin", request["v_scales"]
            )
        flags = [*spec.flags, *lay.flags]
        vec = self.add_blob(
            spec.id,
            spec.rule,
            spec.comment,
            blob,
            result="valid",
            flags=flags,
            out_dtype=dtype_name(spec.dtype) or "float16",
        )
        vec["encode"] = encode_in
        self.encode_vectors[spec.id] = vec
        return blob

    def add_refusal(
        self,
        vid: str,
        rule: str,
        comment: str,
        base_id: str,
        changes: dict[str, Any],
        *,
        error: str = UNSUPPORTED,
        v_scales: torch.Tensor | None = None,
    ) -> None:
        """An encode request the writer must refuse: ``base_id``'s inputs with ``changes``.
        ``vid`` starts with the rule it breaks."""
        base_in = self.encode_vectors[base_id]["encode"]
        encode_in = {**base_in, **changes}
        request = {k: v for k, v in encode_in.items() if not k.endswith("_file")}
        request["k"] = self.files.files[encode_in["k_file"]]
        request["v"] = self.files.files[encode_in["v_file"]]
        if v_scales is not None:
            request["v_scales"] = tensor_bytes(v_scales)
            request["scales_shape"] = list(v_scales.shape)
            encode_in["scales_shape"] = list(v_scales.shape)
            encode_in["v_scales_file"] = self.files.add(
                f"v1/codec/{vid}.scales.bin", request["v_scales"]
            )
        got = self._call("codec.encode", **request)
        if got["ok"] or got["error"] != error:
            raise GenerationError(f"{vid}: reference gives {got}, vector expects {error}")
        self.vectors.append(
            {
                "id": vid,
                "rule": rule,
                "comment": comment,
                "flags": ["encode-refused"],
                "result": "invalid",
                "parent": base_id,
                "edit": {
                    "encode": sorted(
                        k for k in {*base_in, *encode_in} if base_in.get(k) != encode_in.get(k)
                    )
                },
                "encode": encode_in,
                "expected": {"error": error},
            }
        )


def parse_args_to_json(parse_args: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if parse_args.get("allow_trailing"):
        out["allow_trailing"] = True
    expected = {
        k.removeprefix("expect_"): v for k, v in parse_args.items() if k.startswith("expect_")
    }
    if expected:
        out["expected_hashes"] = expected
    return out
