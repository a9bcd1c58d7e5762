"""Loading the committed golden vectors (golden_blobs/v1/*.json, golden_blobs/v2/codec.json).

Read through ``importlib.resources`` (the ``golden_blobs`` data package); set
``LMCKV_GOLDEN_DIR`` to read another golden_blobs directory.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from lmckv.base.resources import golden_dir, package_path
from lmckv.base.schemas import validate

#: The golden_blobs folder (the ``golden_blobs`` package, or ``$LMCKV_GOLDEN_DIR``).
GOLDEN_DIR = golden_dir()


@functools.cache
def manifest(name: str, vector_set: str = "v1") -> dict[str, Any]:
    """golden_blobs/<vector_set>/<name>.json, parsed; held to the ``vectors`` schema when
    ``LMCKV_GOLDEN_DIR`` names another folder. The packaged manifests are checked where they
    are made and tested (``python -m lmckv.conformance.golden --check``,
    tests/test_schemas.py), not again in every process that collects the suite: that costs
    about half a second of CPU per manifest."""
    path = GOLDEN_DIR / vector_set / f"{name}.json"
    with path.open(encoding="ascii") as f:
        data: dict[str, Any] = json.load(f)
    if GOLDEN_DIR.resolve() != package_path("lmckv.golden_blobs").resolve():
        validate(data, "vectors")
    return data


def vectors(name: str, vector_set: str = "v1") -> list[dict[str, Any]]:
    """The vectors of ``name`` in the set ``vector_set`` (``v2``: the encoded-KV v2 draft's,
    ``codec`` only)."""
    return list(manifest(name, vector_set)["vectors"])


@functools.cache
def golden_file(path: str) -> bytes:
    """A binary file named by a manifest (relative to golden_blobs/)."""
    return (GOLDEN_DIR / path).read_bytes()
