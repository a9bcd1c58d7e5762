"""The producer x consumer matrix: who encodes, who decodes, which inputs.

Every implementation that declares ``codec.encode`` encodes each canonical input (the
golden encode vectors flagged ``canonical``); every implementation that declares
``codec.decode`` decodes every producer's blob; both checks of test_matrix.py compare the
result with the golden expectation. The plugin asserts that exactly
pairs x cases x MATRIX_TESTS checks ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from conformance.drivers.base import Driver
from conformance.vectors import vectors

#: Checks per (producer, consumer, case): decoded payload, dequantized V.
MATRIX_TESTS = 2


def matrix_cases() -> list[dict[str, Any]]:
    """The canonical encode vectors."""
    return [v for v in vectors("codec") if "canonical" in v["flags"] and "encode" in v]


def matrix_pairs(drivers: Mapping[str, Driver]) -> list[tuple[str, str]]:
    """(producer, consumer) names, producers first in --impl order."""
    producers = [n for n, d in drivers.items() if d.supports("codec.encode")]
    consumers = [n for n, d in drivers.items() if d.supports("codec.decode")]
    return [(p, c) for p in producers for c in consumers]
