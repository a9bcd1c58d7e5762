"""Codec vector helpers: parse requests, encode requests, cached encodes, blob sections."""

from __future__ import annotations

from typing import Any

from ..core.blob_model import Sections, cut_from_end
from ..core.golden_vectors import golden_file, vectors
from ..core.operations import EXPECT_PREFIX, OPS, field_type
from ..core.wire import FieldType
from ..drivers.base import Driver

#: The codec.encode request fields an encode vector gives inline (the operations table's
#: request fields less the tensors, which the vector names by file).
ENCODE_FIELDS = tuple(
    name for name in OPS["codec.encode"].request if field_type(name) is not FieldType.BYTES
)
#: The codec.encode request fields read from the vector's files: ``<name>_file``.
ENCODE_FILES = tuple(
    name for name in OPS["codec.encode"].request if field_type(name) is FieldType.BYTES
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
        req[EXPECT_PREFIX + name] = value
    return req


def encode_request(vector: dict[str, Any]) -> dict[str, Any]:
    """The codec.encode fields of an encode vector (inputs read from their files)."""
    enc = vector["encode"]
    req = {name: enc[name] for name in ENCODE_FIELDS if name in enc}
    req |= {
        name: golden_file(enc[f"{name}_file"]) for name in ENCODE_FILES if f"{name}_file" in enc
    }
    return req


def encode_capabilities(vector: dict[str, Any]) -> list[str]:
    """codec.encode, and each flag covering a field the vector gives (the operations table)."""
    enc = vector["encode"]
    given = {name.removesuffix("_file") for name in enc}
    flags = OPS["codec.encode"].flags
    return ["codec.encode", *(flag for flag, names in flags.items() if given & set(names))]


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
