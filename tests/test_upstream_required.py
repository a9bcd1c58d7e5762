"""A test that needs upstream skips with its reason, or fails when the run requires upstream."""

from __future__ import annotations

import pytest
from upstream_required import REQUIRE_UPSTREAM, upstream_missing


def test_missing_upstream_skips_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_UPSTREAM, raising=False)
    with pytest.raises(pytest.skip.Exception, match="lmcache is not here"):
        upstream_missing("lmcache is not here")


def test_missing_upstream_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_UPSTREAM, "1")
    with pytest.raises(pytest.fail.Exception, match=f"lmcache is not here .*{REQUIRE_UPSTREAM}"):
        upstream_missing("lmcache is not here")


def test_import_upstream_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import import_upstream

    monkeypatch.setenv(REQUIRE_UPSTREAM, "1")
    with pytest.raises(pytest.fail.Exception, match=r"lmcache\.no_such_module"):
        import_upstream("lmcache.no_such_module")
