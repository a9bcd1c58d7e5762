"""The reference's typed errors name the SPEC rule they enforce (``err.rule``), and for every
invalid golden vector that rule is the vector's own (or one of its ``alt_rules``, listed
where two rules genuinely apply and the vector's comment says why).

So the reference rejects each invalid vector because of the rule the vector is about, not
because some other check happens to fire first.
"""

from __future__ import annotations

from typing import Any

import pytest

import lmckv.reference_impl.keys as keys
import lmckv.reference_impl.kv_codec as kv_codec
import lmckv.reference_impl.protocol as protocol
from lmckv.conformance.core.golden_vectors import vectors
from lmckv.conformance.drivers.python_driver import PythonDriver
from lmckv.conformance.suite.codec_cases import encode_request, parse_request
from lmckv.conformance.suite.op_cases import _load
from lmckv.reference_impl.keys.errors import KeyFormatError
from lmckv.reference_impl.kv_codec.errors import CodecError
from lmckv.reference_impl.protocol.errors import ProtocolError


class _Recording(PythonDriver):
    """The reference driver, keeping the last exception it classified."""

    last: BaseException | None = None

    def classify(self, exc: BaseException, op: str) -> str:
        self.last = exc
        return super().classify(exc, op)  # type: ignore[arg-type]


DRIVER = _Recording("reference", kv_codec, protocol, keys)


def _invalid(name: str) -> list[dict[str, Any]]:
    return [v for v in vectors(name) if v["result"] == "invalid"]


def _rule_of_call(op: str, request: dict[str, Any]) -> str | None:
    DRIVER.last = None
    got = DRIVER.call(op, **request)
    assert not got["ok"], f"the reference accepts an invalid vector: {got}"
    exc = DRIVER.last
    if not isinstance(exc, CodecError | ProtocolError | KeyFormatError):
        # The reader rejected without raising (a key reader returning None): the driver
        # made the error, and no raise site of the reference is involved.
        pytest.skip(f"no typed error to read a rule from: {exc!r}")
    return exc.rule


def _check(vec: dict[str, Any], rule: str | None) -> None:
    allowed = {vec["rule"], *vec.get("alt_rules", [])}
    assert rule in allowed, f"{vec['id']}: the reference raises for {rule}, not {vec['rule']}"


@pytest.mark.parametrize("vec", _invalid("codec"), ids=lambda v: v["id"])
def test_codec_error_names_the_vectors_rule(vec: dict[str, Any]) -> None:
    if "blob" in vec:
        rule = _rule_of_call("codec.parse", parse_request(vec))
    else:
        rule = _rule_of_call("codec.encode", encode_request(vec))
    _check(vec, rule)


def _op_vectors() -> list[dict[str, Any]]:
    return [v for name in ("protocol", "keys") for v in _invalid(name) if "request" in v]


@pytest.mark.parametrize("vec", _op_vectors(), ids=lambda v: v["id"])
def test_op_error_names_the_vectors_rule(vec: dict[str, Any]) -> None:
    _check(vec, _rule_of_call(vec["op"], _load(vec["request"])))


def test_rule_defaults_to_none_and_is_keyword_only() -> None:
    for cls in (CodecError, ProtocolError, KeyFormatError):
        assert cls("x").rule is None
        err = cls("x", rule="KV-LEN")
        assert err.rule == "KV-LEN" and str(err) == "x"
