"""ClientMetaMessage, ServerMetaMessage and RemoteMetadata: golden bytes written and read,
malformed messages rejected with ProtocolError (golden_blobs/v1/protocol.json)."""

from __future__ import annotations

from typing import Any

import pytest

from ..core.golden_vectors import vectors
from ..drivers.base import Driver
from .op_cases import run_vector
from .params import params


@pytest.mark.parametrize("vector", params(vectors("protocol")))
def test_protocol(impl: Driver, vector: dict[str, Any]) -> None:
    """One protocol vector: the operation's result or error family."""
    run_vector(impl, vector)
