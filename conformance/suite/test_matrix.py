"""Producer x consumer: each producer encodes the canonical inputs, each consumer decodes
each producer's blob, and both results are compared with the golden expectation.

The plugin asserts how many checks ran (conformance/suite/matrix.py, ``matrix_checks``).
"""

from __future__ import annotations

from typing import Any

import pytest

from ..core.digests import sha256
from ..core.dtype_names import dtype_from_name
from ..core.golden_vectors import golden_file
from ..drivers.base import Driver
from .codec_cases import encode_cached
from .matrix import matrix_cases
from .verdicts import dequantized_difference, expect_ok

CASES = matrix_cases()


def _produced(producer: Driver, case: dict[str, Any]) -> bytes:
    res = encode_cached(producer, case)
    if not res["ok"]:
        pytest.fail(
            f"producer {producer.name} cannot encode {case['id']}: {res['error']}: "
            f"{res.get('message', '')}",
            pytrace=False,
        )
    blob: bytes = res["blob"]
    return blob


@pytest.mark.rule("KV-PAYLOAD")
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_matrix_payload(pair: tuple[Driver, Driver], case: dict[str, Any]) -> None:
    """The consumer reads the producer's blob back to the golden K, V and scale bytes."""
    producer, consumer = pair
    blob = _produced(producer, case)
    res = expect_ok(
        consumer.call("codec.decode", blob=blob, out_v_dtype=None),
        f"{consumer.name} decoding {producer.name}'s {case['id']}",
    )
    want = case["decode"]["payload"]
    bad = [name for name in ("k", "v", "scales") if sha256(res[name]) != want[name]["sha256"]]
    if bad:
        pytest.fail(
            f"{consumer.name} decoding {producer.name}'s {case['id']}: "
            f"{', '.join(bad)} differ from the golden payload",
            pytrace=False,
        )


@pytest.mark.rule("Q-DEQUANT")
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_matrix_dequant(pair: tuple[Driver, Driver], case: dict[str, Any]) -> None:
    """The consumer dequantizes the producer's V to the golden values."""
    producer, consumer = pair
    if not consumer.supports("codec.dequant"):
        pytest.skip(f"{consumer.name} does not declare codec.dequant")
    blob = _produced(producer, case)
    want = case["decode"]["dequant"]
    res = expect_ok(
        consumer.call("codec.decode", blob=blob, out_v_dtype=want["out_v_dtype"]),
        f"{consumer.name} dequantizing {producer.name}'s {case['id']}",
    )
    dtype = dtype_from_name(want["dtype"])
    assert dtype is not None
    diff = dequantized_difference(res["v"], golden_file(want["file"]), dtype)
    if diff is not None:
        pytest.fail(
            f"{consumer.name} dequantizing {producer.name}'s {case['id']}: {diff}",
            pytrace=False,
        )
