"""pytest parameters over golden vectors, each marked with the rule it checks."""

from __future__ import annotations

from typing import Any

import pytest


def params(items: list[dict[str, Any]], rule: str | None = None, extra_id: str = "") -> list[Any]:
    """One param per vector, with the vector's id and a ``rule`` marker (the vector's own
    rule unless ``rule`` is given)."""
    return [
        pytest.param(v, id=v["id"] + extra_id, marks=pytest.mark.rule(rule or v["rule"]))
        for v in items
    ]
