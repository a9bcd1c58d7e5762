"""Skipping a test that needs upstream lmcache, unless the run asked for upstream.

``LMCKV_REQUIRE_UPSTREAM=1`` (set by ``nox -s tests``) says the run must exercise upstream:
a test that needs lmcache and cannot import it then fails instead of skipping, so CI cannot
go green by silently leaving out every comparison with upstream.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

REQUIRE_UPSTREAM = "LMCKV_REQUIRE_UPSTREAM"


def upstream_required() -> bool:
    """Whether this run asked for upstream (``LMCKV_REQUIRE_UPSTREAM`` set and not ``0``)."""
    return os.environ.get(REQUIRE_UPSTREAM, "") not in ("", "0")


def upstream_missing(reason: str, *, allow_module_level: bool = False) -> NoReturn:
    """Skip with ``reason``; fail with it when :func:`upstream_required`."""
    if upstream_required():
        pytest.fail(f"{reason} ({REQUIRE_UPSTREAM} is set: upstream is required)", pytrace=False)
    pytest.skip(reason, allow_module_level=allow_module_level)
