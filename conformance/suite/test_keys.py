"""CacheEngineKey strings, ObjectKey invariants and forms, kv_rank, EncodedObjectKey JSON
and IPC fan-out (golden_blobs/v1/keys.json)."""

from __future__ import annotations

from typing import Any

import pytest

from lmckv.conformance.core.golden_vectors import vectors
from lmckv.conformance.drivers.base import Driver
from lmckv.conformance.suite.op_cases import run_vector
from lmckv.conformance.suite.params import params


@pytest.mark.parametrize("vector", params(vectors("keys")))
def test_keys(impl: Driver, vector: dict[str, Any]) -> None:
    """One key vector: the operation's result or error family."""
    run_vector(impl, vector)
