"""CacheEngineKey strings, ObjectKey invariants and forms, kv_rank, EncodedObjectKey JSON
and IPC fan-out (golden_blobs/v1/keys.json)."""

from __future__ import annotations

from typing import Any

import pytest

from ..core.golden_vectors import vectors
from ..drivers.base import Driver
from .op_cases import run_vector
from .params import params


@pytest.mark.parametrize("vector", params(vectors("keys")))
def test_keys(impl: Driver, vector: dict[str, Any]) -> None:
    """One key vector: the operation's result or error family."""
    run_vector(impl, vector)
