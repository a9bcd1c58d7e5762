"""The compatibility matrix, v2 half: every implementation's reader x golden_blobs/v2.

A reader that declares ``codec.v2`` must give each v2 vector's ``expected`` (and its decode
outcome); a reader that does not is a v1 reader and must refuse every v2 blob with a typed
error, never read one (``v1_reader``; SPEC.md **KV-VERSION**). The v1 half is
test_codec_read.py: every reader, of either version, reads every v1 vector as it says.
The run's results count both halves per reader (``versions`` in the results file).
"""

from __future__ import annotations

from typing import Any

import pytest

from ..core.digests import sha256
from ..core.golden_vectors import vectors
from ..drivers.base import Driver
from .codec_cases import blob_of, parse_request
from .params import params
from .verdicts import expect_error, expect_fields, expect_ok, judge_parse, require

pytestmark = pytest.mark.vector_set("v2")

V2 = vectors("codec", "v2")
DECODED = [v for v in V2 if "decode" in v]


def _v2_reader(impl: Driver, *capabilities: str) -> None:
    """Skip unless ``impl`` reads v2 (and declares ``capabilities``)."""
    require(impl, *capabilities, "codec.v2")


def _v1_reader(impl: Driver, *capabilities: str) -> None:
    """Skip unless ``impl`` is a v1 reader (declares ``capabilities`` but not codec.v2)."""
    require(impl, *capabilities)
    if impl.supports("codec.v2"):
        pytest.skip(f"{impl.name} declares codec.v2: a v2 reader, held to 'expected'")


@pytest.mark.parametrize("vector", params(V2))
def test_v2_parse(impl: Driver, vector: dict[str, Any]) -> None:
    """A v2 reader returns a valid v2 blob's header fields and refuses an invalid one."""
    _v2_reader(
        impl, "codec.parse", *(["codec.hash_gate"] if "expected_hashes" in vector["parse"] else [])
    )
    judge_parse(impl, vector, "a valid v2 blob")


@pytest.mark.parametrize(
    "vector",
    [pytest.param(v, id=v["id"], marks=pytest.mark.rule(v["v1_reader"]["rule"])) for v in V2],
)
def test_v1_reader_refuses_v2(impl: Driver, vector: dict[str, Any]) -> None:
    """A v1 reader refuses every v2 blob with a typed error: the rule v1_reader names,
    KV-VERSION for every blob whose magic is right and whose version says 2."""
    _v1_reader(impl, "codec.parse")
    res = impl.call("codec.parse", **parse_request(vector))
    expect_error(res, vector["v1_reader"]["error"], f"a v1 reader reading v2 {vector['id']}")


@pytest.mark.parametrize("vector", params(DECODED, "KV2-RAW-BYTES"))
def test_v2_decode(impl: Driver, vector: dict[str, Any]) -> None:
    """A v2 reader's decode returns K and the V codes as stored and no scale; it refuses to
    widen V, for which the blob records no scale."""
    _v2_reader(impl, "codec.decode")
    want = vector["decode"]
    res = expect_ok(impl.call("codec.decode", blob=blob_of(vector), out_v_dtype=None), "decode")
    got = {
        name: {
            "dtype": res[f"{name}_dtype"],
            "nbytes": len(res[name]),
            "sha256": sha256(res[name]),
            "shape": list(res[f"{name}_shape"]),
        }
        for name in ("k", "v", "scales")
    }
    expect_fields(got, want["payload"], f"decode {vector['id']}")
    if impl.supports("codec.dequant"):
        dq = want["dequant"]
        res = impl.call("codec.decode", blob=blob_of(vector), out_v_dtype=dq["out_v_dtype"])
        expect_error(res, dq["error"], f"decode {vector['id']} to {dq['out_v_dtype']}")


@pytest.mark.parametrize("vector", params(DECODED, "KV-VERSION"))
def test_v1_reader_decode_refuses_v2(impl: Driver, vector: dict[str, Any]) -> None:
    """A v1 reader's decode refuses a valid v2 blob too: it never hands out its bytes."""
    _v1_reader(impl, "codec.decode")
    res = impl.call("codec.decode", blob=blob_of(vector), out_v_dtype=None)
    expect_error(res, vector["v1_reader"]["error"], f"a v1 reader decoding v2 {vector['id']}")
