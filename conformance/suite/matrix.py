"""The producer x consumer matrix: who encodes, who decodes, which inputs.

Every implementation that declares ``codec.encode`` encodes each canonical input (the
golden encode vectors flagged ``canonical``); every implementation that declares
``codec.decode`` decodes every producer's blob; both checks of test_matrix.py compare the
result with the golden expectation. The plugin asserts that exactly
``matrix_checks`` checks ran: the payload check for every pair and case, and the dequantized-V
check where the consumer declares ``codec.dequant``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.golden_vectors import vectors
from ..drivers.base import Driver


def matrix_cases() -> list[dict[str, Any]]:
    """The canonical encode vectors."""
    return [v for v in vectors("codec") if "canonical" in v["flags"] and "encode" in v]


def matrix_pairs(drivers: Mapping[str, Driver]) -> list[tuple[str, str]]:
    """(producer, consumer) names, producers first in --impl order."""
    producers = [n for n, d in drivers.items() if d.supports("codec.encode")]
    consumers = [n for n, d in drivers.items() if d.supports("codec.decode")]
    return [(p, c) for p in producers for c in consumers]


def matrix_checks(drivers: Mapping[str, Driver]) -> int:
    """How many matrix checks a run must execute (none may be skipped or lost)."""
    per_case = sum(
        1 + drivers[consumer].supports("codec.dequant") for _, consumer in matrix_pairs(drivers)
    )
    return per_case * len(matrix_cases())
