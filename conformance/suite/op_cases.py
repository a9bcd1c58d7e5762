"""Running operation vectors (protocol.json, keys.json) against a driver."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ..core.golden_vectors import golden_file
from ..core.wire import from_manifest
from ..drivers.base import Driver
from .verdicts import expect_error, expect_fields, expect_ok, require


def _load(fields: dict[str, Any]) -> dict[str, Any]:
    """Manifest fields -> suite values, reading ``<name>_file`` references."""
    inline = {
        name: value for name, value in fields.items() if not name.endswith(("_file", "_sha256"))
    }
    out = from_manifest(inline)
    for name, value in fields.items():
        if name.endswith("_file"):
            out[name.removesuffix("_file")] = golden_file(value)
    return out


def run_vector(impl: Driver, vector: dict[str, Any]) -> None:
    """Call the vector's operation; compare the result fields or the error family."""
    op = vector["op"]
    require(impl, op)
    what = f"{vector['id']} ({vector['comment']})"
    if "distinct" in vector["expected"]:
        output = vector["expected"]["distinct"]
        results = [impl.call(op, **_load(r)) for r in vector["requests"]]
        names = [r[output] for r in results if r["ok"]]
        if len(set(names)) != len(names):
            pytest.fail(f"{what}: different keys share the {output} {names[0]!r}", pytrace=False)
        return
    res = impl.call(op, **_load(vector["request"]))
    expected = vector["expected"]
    if "error" in expected:
        expect_error(res, expected["error"], what)
        return
    expect_ok(res, what)
    want = _load(expected["fields"])
    if "json_text" in want:
        want["json_text"] = json.loads(want["json_text"])
        res = {**res, "json_text": _json_or_text(res.get("json_text"))}
    expect_fields(res, want, what)


def _json_or_text(text: Any) -> Any:
    """JSON results compare as parsed documents; unparsable text stays text (and differs)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text
