"""Loading the committed golden vectors (golden_blobs/v1/*.json) for the tests.

Set ``LMCKV_GOLDEN_DIR`` to read another golden_blobs directory.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from conformance.core.schemas import validate

GOLDEN_DIR = Path(
    os.environ.get("LMCKV_GOLDEN_DIR", Path(__file__).resolve().parents[1] / "golden_blobs")
)


@functools.cache
def manifest(name: str) -> dict[str, Any]:
    """golden_blobs/v1/<name>.json, parsed."""
    path = GOLDEN_DIR / "v1" / f"{name}.json"
    with path.open(encoding="ascii") as f:
        data: dict[str, Any] = json.load(f)
    validate(data, "vectors")
    return data


def vectors(name: str) -> list[dict[str, Any]]:
    return list(manifest(name)["vectors"])


@functools.cache
def golden_file(path: str) -> bytes:
    """A binary file named by a manifest (relative to golden_blobs/)."""
    return (GOLDEN_DIR / path).read_bytes()


def params(items: list[dict[str, Any]], rule: str | None = None, extra_id: str = "") -> list[Any]:
    """pytest params over vectors, each marked with its rule (the vector's, unless given)."""
    return [
        pytest.param(v, id=v["id"] + extra_id, marks=pytest.mark.rule(rule or v["rule"]))
        for v in items
    ]
