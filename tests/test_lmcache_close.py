"""Closing what LMCache builds, bounded (conformance/store/lmcache_close.py)."""

from __future__ import annotations

import threading
import time

from lmckv.conformance.store.lmcache_close import close_bounded


def test_a_close_that_never_returns_is_left_after_its_bound() -> None:
    """LMCache 0.5.6's FS adapter closed right after it was built can wait forever in its
    close (conformance/store/lmcache_close.py): building a spec must still end."""
    release = threading.Event()

    class Stuck:
        def close(self) -> None:
            release.wait(30)

    class Raises:
        def close(self) -> None:
            raise RuntimeError("already closed")

    start = time.monotonic()
    assert close_bounded(Stuck(), 0.3) is False
    assert time.monotonic() - start < 5
    release.set()
    assert close_bounded(Raises(), 5) is True  # it returned; its error is dropped
