"""Writing blobs: re-encoding the stored inputs of every encode vector must give the golden
blob, checked section by section so a failure names the rule and the byte."""

from __future__ import annotations

import zlib
from typing import Any

import pytest
import torch

from ..core import blob_model
from ..core.dtype_names import dtype_from_name
from ..drivers.base import Driver
from .codec_cases import (
    blob_of,
    codec_vectors,
    encode_cached,
    encode_capabilities,
    encode_request,
    sections,
)
from .verdicts import describe_tensor_diff, expect_error, expect_ok, require

ENCODED = [v for v in codec_vectors() if "encode" in v and v["result"] == "valid"]
REFUSED = [v for v in codec_vectors() if "encode" in v and v["result"] == "invalid"]
HEADER_RULES = {"KV-HASHES", "KV-IDS", "KV-GEOMETRY", "KV-LEN"}


def _param(v: dict[str, Any], rule: str) -> Any:
    return pytest.param(v, id=v["id"], marks=pytest.mark.rule(rule))


def _value_rule(v: dict[str, Any], default: str) -> str:
    if "nonfinite" in v["flags"]:
        return "Q-NONFINITE"
    if v["encode"]["scale_scope"] == 3:
        return "Q-EXTERNAL"
    return default


def _encoded(impl: Driver, vector: dict[str, Any]) -> bytes:
    require(impl, *encode_capabilities(vector))
    res = expect_ok(encode_cached(impl, vector), f"encode {vector['id']}")
    blob: bytes = res["blob"]
    return blob


def _field_at(golden: bytes, offset: int) -> str:
    for name, (start, size) in blob_model.parse(golden).offsets.items():
        if start <= offset < start + size:
            return f"{name} (offset {start}, {size} bytes)"
    return "past the golden header"


@pytest.mark.parametrize(
    "vector",
    [_param(v, v["rule"] if v["rule"] in HEADER_RULES else "KV-LAYOUT") for v in ENCODED],
)
def test_encode_header(impl: Driver, vector: dict[str, Any]) -> None:
    """Header bytes (everything before the CRC) equal the golden header."""
    golden = blob_of(vector)
    got = sections(_encoded(impl, vector), vector["expected"]["header"])
    want = sections(golden, vector["expected"]["header"])
    if got.header == want.header:
        return
    first = next(
        (i for i, (a, b) in enumerate(zip(got.header, want.header, strict=False)) if a != b),
        min(len(got.header), len(want.header)),
    )
    pytest.fail(
        f"encode {vector['id']}: header is {len(got.header)} bytes (golden {len(want.header)}); "
        f"first difference at byte {first}, in {_field_at(golden, first)}: got "
        f"{got.header[first : first + 8].hex()}, expected {want.header[first : first + 8].hex()}",
        pytrace=False,
    )


@pytest.mark.parametrize("vector", [_param(v, "KV-CRC") for v in ENCODED])
def test_encode_crc(impl: Driver, vector: dict[str, Any]) -> None:
    """The CRC field is the little-endian zlib CRC-32 of the written payload."""
    blob = _encoded(impl, vector)
    got = sections(blob, vector["expected"]["header"])
    payload = got.k + got.v + got.scales
    want = (zlib.crc32(payload) & 0xFFFFFFFF).to_bytes(4, "little")
    if got.crc != want:
        pytest.fail(
            f"encode {vector['id']}: CRC field {got.crc.hex()}, CRC-32 of the payload is "
            f"{want.hex()} (little-endian)",
            pytrace=False,
        )


@pytest.mark.parametrize("vector", [_param(v, "KV-PAYLOAD") for v in ENCODED])
def test_encode_k(impl: Driver, vector: dict[str, Any]) -> None:
    """K is stored as its own C-order bytes, bit-exactly."""
    got = sections(_encoded(impl, vector), vector["expected"]["header"])
    want = sections(blob_of(vector), vector["expected"]["header"])
    if got.k != want.k:
        dtype = dtype_from_name(vector["encode"]["dtype"])
        assert dtype is not None
        diff = describe_tensor_diff(got.k, want.k, dtype)
        pytest.fail(f"encode {vector['id']}: K payload differs: {diff}", pytrace=False)


@pytest.mark.parametrize("vector", [_param(v, _value_rule(v, "Q-SCALE")) for v in ENCODED])
def test_encode_scales(impl: Driver, vector: dict[str, Any]) -> None:
    """The stored scales are the golden ones (Q-SCALE), bit-exactly."""
    got = sections(_encoded(impl, vector), vector["expected"]["header"])
    want = sections(blob_of(vector), vector["expected"]["header"])
    if got.scales != want.scales:
        dtype = dtype_from_name(vector["expected"]["header"]["scale_dtype"])
        assert dtype is not None
        diff = describe_tensor_diff(got.scales, want.scales, dtype)
        pytest.fail(f"encode {vector['id']}: scales differ: {diff}", pytrace=False)


@pytest.mark.parametrize("vector", [_param(v, _value_rule(v, "Q-ROUND")) for v in ENCODED])
def test_encode_v(impl: Driver, vector: dict[str, Any]) -> None:
    """The FP8 V bytes are the golden ones (Q-ROUND), bit-exactly."""
    got = sections(_encoded(impl, vector), vector["expected"]["header"])
    want = sections(blob_of(vector), vector["expected"]["header"])
    if got.v != want.v:
        diff = describe_tensor_diff(got.v, want.v, torch.float8_e4m3fn)
        pytest.fail(f"encode {vector['id']}: FP8 V differs: {diff}", pytrace=False)


@pytest.mark.parametrize("vector", [_param(v, v["rule"]) for v in REFUSED])
def test_encode_refuses(impl: Driver, vector: dict[str, Any]) -> None:
    """encode refuses inputs it cannot write as a valid blob, with the exact error."""
    require(impl, *encode_capabilities(vector))
    res = impl.call("codec.encode", **encode_request(vector))
    expect_error(res, vector["expected"]["error"], f"encode {vector['id']} ({vector['comment']})")
