"""Shared fixtures: the upstream codec when installed, a hypothesis profile for CI."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest
from hypothesis import HealthCheck, settings
from upstream_required import upstream_missing

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def import_upstream(module: str) -> ModuleType:
    """Import an lmcache module or skip the test, naming what is missing (a failure when
    LMCKV_REQUIRE_UPSTREAM is set: tests/upstream_required.py)."""
    try:
        return importlib.import_module(module)
    except Exception as e:  # lmcache's import chain can fail in many ways without CUDA deps
        upstream_missing(f"upstream {module} (lmcache==0.5.6) is not importable here: {e!r}")


@pytest.fixture(scope="session")
def upstream_kv_codec() -> ModuleType:
    """lmcache.v1.kv_codec from lmcache 0.5.6, or a skip with the reason."""
    return import_upstream("lmcache.v1.kv_codec")
