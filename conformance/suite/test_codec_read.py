"""Reading golden blobs: header fields or the exact error, payload sections, dequantized V,
and the logical shape of K and V. The v1 half of the compatibility matrix: every reader, v1
or v2, reads every golden_blobs/v1 vector as it says (test_codec_versions.py: the v2 half)."""

from __future__ import annotations

from typing import Any

import pytest

from ..core.digests import sha256
from ..core.dtype_names import dtype_from_name
from ..core.golden_vectors import golden_file
from ..drivers.base import Driver
from .codec_cases import blob_of, codec_vectors
from .params import params
from .verdicts import (
    dequantized_difference,
    expect_error,
    expect_fields,
    expect_ok,
    judge_parse,
    require,
)

pytestmark = pytest.mark.vector_set("v1")

ALL = [v for v in codec_vectors() if "blob" in v]
DECODED = [v for v in ALL if "decode" in v]


def _decode_rule(vector: dict[str, Any], part: str, default: str) -> str:
    """Rule of a decode check: the vector's own rule when the expected outcome is an error."""
    if "error" in vector["decode"][part]:
        return "KV-LAYOUT-NAME" if "foreign-layout" in vector["flags"] else vector["rule"]
    return default


def _parse_rule(vector: dict[str, Any]) -> str:
    """Parsing an encode vector checks the header layout, not the quantization rule."""
    return "KV-LAYOUT" if vector["rule"].startswith("Q-") else vector["rule"]


@pytest.mark.parametrize(
    "vector",
    [pytest.param(v, id=v["id"], marks=pytest.mark.rule(_parse_rule(v))) for v in ALL],
)
def test_parse(impl: Driver, vector: dict[str, Any]) -> None:
    """codec.parse returns the header fields of a valid blob and the exact error otherwise."""
    caps = ["codec.parse"]
    if vector["parse"].get("expected_hashes"):
        caps.append("codec.hash_gate")
    require(impl, *caps)
    judge_parse(impl, vector, "a valid blob")


@pytest.mark.parametrize(
    "vector",
    [
        pytest.param(
            v, id=v["id"], marks=pytest.mark.rule(_decode_rule(v, "payload", "KV-PAYLOAD"))
        )
        for v in DECODED
    ],
)
def test_decode_payload(impl: Driver, vector: dict[str, Any]) -> None:
    """codec.decode without dequantization returns the stored K, V and scale bytes."""
    require(impl, "codec.decode")
    res = impl.call("codec.decode", blob=blob_of(vector), out_v_dtype=None)
    want = vector["decode"]["payload"]
    what = f"decode {vector['id']}"
    if "error" in want:
        expect_error(res, want["error"], what)
        return
    expect_ok(res, what)
    problems = []
    for name in ("k", "v", "scales"):
        dtype_key = "scales_dtype" if name == "scales" else f"{name}_dtype"
        if res[dtype_key] != want[name]["dtype"]:
            problems.append(f"{name} dtype {res[dtype_key]}, expected {want[name]['dtype']}")
        if sha256(res[name]) != want[name]["sha256"]:
            problems.append(
                f"{name} bytes differ ({len(res[name])} bytes, expected {want[name]['nbytes']})"
            )
    if list(res["scales_shape"]) != want["scales"]["shape"]:
        problems.append(f"scales shape {res['scales_shape']}, expected {want['scales']['shape']}")
    if problems:
        pytest.fail(f"{what}: " + "; ".join(problems), pytrace=False)


@pytest.mark.parametrize(
    "vector",
    [
        pytest.param(v, id=v["id"], marks=pytest.mark.rule(_decode_rule(v, "dequant", "Q-DEQUANT")))
        for v in DECODED
    ],
)
def test_decode_dequant(impl: Driver, vector: dict[str, Any]) -> None:
    """codec.decode with out_v_dtype returns V' = out_dtype(float32(q) * scale), any scope."""
    require(impl, "codec.decode", "codec.dequant")
    want = vector["decode"]["dequant"]
    res = impl.call("codec.decode", blob=blob_of(vector), out_v_dtype=want["out_v_dtype"])
    what = f"decode {vector['id']} to {want['out_v_dtype']}"
    if "error" in want:
        expect_error(res, want["error"], what)
        return
    expect_ok(res, what)
    if res["v_dtype"] != want["dtype"]:
        pytest.fail(f"{what}: V dtype {res['v_dtype']}, expected {want['dtype']}", pytrace=False)
    dtype = dtype_from_name(want["dtype"])
    assert dtype is not None
    diff = dequantized_difference(res["v"], golden_file(want["file"]), dtype)
    if diff is not None:
        pytest.fail(f"{what}: dequantized V differs: {diff}", pytrace=False)


@pytest.mark.parametrize(
    "vector", params([v for v in DECODED if "logical-shape" in v["flags"]], "KV-LOGICAL-SHAPE")
)
def test_decode_logical_shape(impl: Driver, vector: dict[str, Any]) -> None:
    """codec.decode returns K and V in the logical shape the header describes."""
    require(impl, "codec.decode")
    res = expect_ok(impl.call("codec.decode", blob=blob_of(vector), out_v_dtype=None), "decode")
    want = vector["decode"]["payload"]
    expect_fields(
        {"k_shape": list(res["k_shape"]), "v_shape": list(res["v_shape"])},
        {"k_shape": want["k"]["shape"], "v_shape": want["v"]["shape"]},
        f"decode {vector['id']}",
    )
