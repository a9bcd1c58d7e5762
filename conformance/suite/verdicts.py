"""Assertions shared by the conformance tests, with messages an implementer can act on."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from lmckv.base.untrusted_text import bare

from ..core import observations
from ..core.error_names import is_raw, matches
from ..drivers.base import Driver
from .codec_cases import parse_request


def require(impl: Driver, *capabilities: str) -> None:
    """Skip, naming the capability and why it is missing, when the implementation does not
    declare it."""
    for cap in capabilities:
        if not impl.supports(cap):
            pytest.skip(impl.unsupported_reason(cap))


def _error_text(res: dict[str, Any]) -> str:
    # The error and message come from the implementation: data on one line (a testee's
    # message may hold line breaks or terminal escapes).
    return f"{bare(str(res.get('error')))}: {bare(str(res.get('message', '')))}"


def expect_ok(res: dict[str, Any], what: str) -> dict[str, Any]:
    """The call must succeed."""
    if not res["ok"]:
        kind = "crashed with untyped" if is_raw(str(res["error"])) else "raised"
        observations.record(str(res["error"]), str(res.get("message", "")))
        pytest.fail(f"{what}: {kind} {_error_text(res)}", pytrace=False)
    return res


def expect_error(res: dict[str, Any], expected: str, what: str) -> None:
    """The call must fail with the canonical error ``expected`` (or, for a family name such
    as ProtocolError, any member of the family). A raw error (``raw:...``) never matches:
    an untyped rejection is a failure whatever was expected."""
    if res["ok"]:
        observations.record("accepted")
        shown = {k: v for k, v in res.items() if k != "ok"}
        pytest.fail(
            f"{what}: accepted, expected {expected}; returned {_short(shown)}", pytrace=False
        )
    if matches(str(res["error"]), expected):
        return
    observations.record(str(res["error"]), str(res.get("message", "")))
    if is_raw(str(res["error"])):
        pytest.fail(
            f"{what}: rejected with untyped {_error_text(res)}; expected {expected}",
            pytrace=False,
        )
    pytest.fail(f"{what}: raised {_error_text(res)}; expected {expected}", pytrace=False)


def _short(value: Any, limit: int = 400) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def expect_fields(got: dict[str, Any], expected: dict[str, Any], what: str) -> None:
    """Every expected field present and equal; lists every difference at once."""
    diffs = []
    for name, want in expected.items():
        if name not in got:
            diffs.append(f"{name}: missing (expected {_short(want, 80)})")
        elif got[name] != want:
            diffs.append(f"{name}: got {_short(got[name], 80)}, expected {_short(want, 80)}")
    if diffs:
        differing = [name for name, want in expected.items() if got.get(name, diffs) != want]
        observations.record("fields", ", ".join(differing))
        pytest.fail(f"{what}: " + "; ".join(diffs), pytrace=False)


def dequantized_difference(got: bytes, want: bytes, dtype: torch.dtype) -> str | None:
    """How dequantized V differs from the expected values, or None when it does not.

    Q-DEQUANT fixes every output bit except a NaN's: SPEC.md leaves the payload and sign of
    a NaN in the output dtype open (x86 and CUDA casts produce different ones), so an
    element that is NaN on both sides matches whatever its bits.
    """
    if got == want:
        return None
    diff = describe_tensor_diff(got, want, dtype, nan_matches_nan=True)
    return None if diff == "identical" else diff


def describe_tensor_diff(
    got: bytes, want: bytes, dtype: torch.dtype, *, nan_matches_nan: bool = False
) -> str:
    """How two tensors' bytes differ: count, first index, values there (with
    ``nan_matches_nan``, elements NaN on both sides count as equal)."""
    size = torch.empty(0, dtype=dtype).element_size()
    if len(got) != len(want):
        return f"{len(got)} bytes, expected {len(want)}"
    g = torch.frombuffer(bytearray(got), dtype=dtype) if got else torch.empty(0, dtype=dtype)
    w = torch.frombuffer(bytearray(want), dtype=dtype) if want else torch.empty(0, dtype=dtype)
    gi = g.view(torch.uint8).reshape(-1, size)
    wi = w.view(torch.uint8).reshape(-1, size)
    unequal = (gi != wi).any(dim=1)
    if nan_matches_nan:
        unequal &= ~(torch.isnan(g) & torch.isnan(w))
    differ = unequal.nonzero().flatten()
    if differ.numel() == 0:
        return "identical"
    first = int(differ[0])
    return (
        f"{differ.numel()} of {g.numel()} {str(dtype).removeprefix('torch.')} elements "
        f"differ; first at flat index {first}: got {float(g[first].float())!r} "
        f"(0x{bytes(gi[first].tolist())[::-1].hex()}), expected {float(w[first].float())!r} "
        f"(0x{bytes(wi[first].tolist())[::-1].hex()})"
    )


def judge_parse(impl: Driver, vector: dict[str, Any], valid: str) -> None:
    """``impl``'s codec.parse of ``vector``: the vector's exact error, or (``valid`` names
    what the blob is) its header fields."""
    res = impl.call("codec.parse", **parse_request(vector))
    what = f"{vector['id']} ({vector['comment']})"
    if "error" in vector["expected"]:
        expect_error(res, vector["expected"]["error"], what)
        return
    expect_ok(res, f"{what}: {valid}")
    expect_fields(res, vector["expected"]["header"], what)
