"""The reference's typed errors name the SPEC rule they enforce (``err.rule``), and for every
invalid golden vector that rule is the vector's own (or one of its ``alt_rules``, listed
where two rules genuinely apply and the vector's comment says why).

So the reference rejects each invalid vector because of the rule the vector is about, not
because some other check happens to fire first. The v1 vectors' rules are a v1 reader's:
they are checked on the reference's v1-only reader, and on its v2 reader too, except for a
blob whose header says version 2, which a v2 reader refuses under a v2 rule. Every v2
vector names its v2 reader's rule (``rule``, ``alt_rules``) and its v1 reader's
(``v1_reader``).
"""

from __future__ import annotations

from typing import Any

import pytest

import lmckv.reference_impl.keys as keys
import lmckv.reference_impl.kv_codec as kv_codec
import lmckv.reference_impl.protocol as protocol
from lmckv.conformance.core import blob_model
from lmckv.conformance.core.golden_vectors import golden_file, vectors
from lmckv.conformance.drivers.python_driver import PythonDriver
from lmckv.conformance.drivers.v1_reader import V1ReaderDriver
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


class _RecordingV1(V1ReaderDriver):
    """The reference's v1-only reader, keeping the last exception it classified."""

    last: BaseException | None = None

    def classify(self, exc: BaseException, op: str) -> str:
        self.last = exc
        return super().classify(exc, op)  # type: ignore[arg-type]


DRIVER = _Recording("reference", kv_codec, protocol, keys)
V1_READER = _RecordingV1("reference-v1", kv_codec, protocol, keys)


def _invalid(name: str, vector_set: str = "v1") -> list[dict[str, Any]]:
    return [v for v in vectors(name, vector_set) if v["result"] == "invalid"]


def _rule_of_call(
    op: str, request: dict[str, Any], driver: _Recording | _RecordingV1 = DRIVER
) -> str | None:
    driver.last = None
    got = driver.call(op, **request)
    assert not got["ok"], f"the reference accepts an invalid vector: {got}"
    exc = driver.last
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
        _check(vec, _rule_of_call("codec.parse", parse_request(vec), V1_READER))
        rule = _rule_of_call("codec.parse", parse_request(vec))
        found = blob_model.layout(golden_file(vec["blob"])).get("version")
        if found is not None and found.value == 2:  # a v2 reader reads it as a v2 header
            assert rule is not None and rule.startswith("KV2-"), (vec["id"], rule)
            return
    else:
        rule = _rule_of_call("codec.encode", encode_request(vec))
    _check(vec, rule)


@pytest.mark.parametrize("vec", vectors("codec", "v2"), ids=lambda v: v["id"])
def test_codec_v2_errors_name_the_vectors_rules(vec: dict[str, Any]) -> None:
    """The v2 reader refuses an invalid v2 vector under its rule; the v1-only reader refuses
    every v2 vector, valid or not, under the rule ``v1_reader`` names."""
    assert _rule_of_call("codec.parse", parse_request(vec), V1_READER) == vec["v1_reader"]["rule"]
    if vec["result"] == "invalid":
        _check(vec, _rule_of_call("codec.parse", parse_request(vec)))


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
