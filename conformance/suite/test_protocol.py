"""ClientMetaMessage, ServerMetaMessage and RemoteMetadata: golden bytes written and read,
malformed messages rejected with ProtocolError (golden_blobs/v1/protocol.json)."""

from __future__ import annotations

from typing import Any

import pytest

from lmckv.conformance.core.golden_vectors import vectors
from lmckv.conformance.drivers.base import Driver
from lmckv.conformance.suite.op_cases import run_vector
from lmckv.conformance.suite.params import params


@pytest.mark.parametrize("vector", params(vectors("protocol")))
def test_protocol(impl: Driver, vector: dict[str, Any]) -> None:
    """One protocol vector: the operation's result or error family."""
    run_vector(impl, vector)
