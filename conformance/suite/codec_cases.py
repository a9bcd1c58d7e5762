"""Codec vector helpers: parse requests, encode requests, cached encodes, blob sections."""

from __future__ import annotations

from typing import Any

from lmckv.conformance.core.blob_model import HASH_KEYS, Sections, cut_from_end
from lmckv.conformance.core.golden_vectors import golden_file, vectors
from lmckv.conformance.drivers.base import Driver

ENCODE_FIELDS = (
    "dtype",
    "shape",
    "scale_scope",
    "head_axis",
    "page_axis",
    "scale_dtype",
    "layer_id",
    "chunk_id",
    "chunk_size",
    "page_size",
    "kv_head_count",
    "head_dim",
    "scales_shape",
    *HASH_KEYS,
)


def codec_vectors() -> list[dict[str, Any]]:
    return vectors("codec")


def blob_of(vector: dict[str, Any]) -> bytes:
    return golden_file(vector["blob"])


def parse_request(vector: dict[str, Any]) -> dict[str, Any]:
    """The codec.parse fields a vector asks for."""
    req: dict[str, Any] = {"blob": blob_of(vector)}
    parse = vector.get("parse", {})
    if parse.get("allow_trailing"):
        req["allow_trailing"] = True
    for name, value in parse.get("expected_hashes", {}).items():
        req[f"expect_{name}"] = value
    return req


def encode_request(vector: dict[str, Any]) -> dict[str, Any]:
    """The codec.encode fields of an encode vector (inputs read from their files)."""
    enc = vector["encode"]
    req = {name: enc[name] for name in ENCODE_FIELDS if name in enc}
    req["k"] = golden_file(enc["k_file"])
    req["v"] = golden_file(enc["v_file"])
    if "v_scales_file" in enc:
        req["v_scales"] = golden_file(enc["v_scales_file"])
    return req


def encode_capabilities(vector: dict[str, Any]) -> list[str]:
    caps = ["codec.encode"]
    if "v_scales_file" in vector["encode"]:
        caps.append("codec.encode_scales")
    return caps


_ENCODED: dict[tuple[str, str], dict[str, Any]] = {}


def encode_cached(impl: Driver, vector: dict[str, Any]) -> dict[str, Any]:
    """impl's codec.encode result for a vector, computed once per process."""
    key = (impl.name, vector["id"])
    if key not in _ENCODED:
        _ENCODED[key] = impl.call("codec.encode", **encode_request(vector))
    return _ENCODED[key]


def sections(blob: bytes, golden_header: dict[str, Any]) -> Sections:
    """Split ``blob`` using the golden header's payload lengths, counting from the end."""
    return cut_from_end(
        blob,
        golden_header["k_payload_len"],
        golden_header["v_payload_len"],
        golden_header["scale_payload_len"],
    )
