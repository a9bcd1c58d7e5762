"""Closing what LMCache builds (an L2 adapter, a serde processor, a StorageManager), bounded.

LMCache's closes can wait forever: 0.5.6's FS adapter, closed right after it was built, stops
its event loop only if the loop is already running, then joins the loop's thread without a
timeout (``fs_l2_adapter.py`` ``close``; seen once in CI, the report's serde choice hanging
there), and the mock and nixl adapters join the same way. A caller that must end closes
through :func:`close_bounded`.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

#: How long a close may take before it is left to its thread.
CLOSE_S = 10.0


def close_bounded(obj: Any, timeout_s: float = CLOSE_S) -> bool:
    """Close an LMCache object in a daemon thread and wait for it at most ``timeout_s``:
    whether its close returned. Closing is best effort, so its errors are dropped; a close
    that never returns is left to its daemon thread."""
    closed = threading.Event()

    def run() -> None:
        with contextlib.suppress(Exception):
            obj.close()
        closed.set()

    threading.Thread(target=run, name="lmckv-close", daemon=True).start()
    return closed.wait(timeout_s)
