"""The harness owns its children: each one leads its own process group, and every group
still alive is killed whole when the harness ends, however it ends.

A testee started as ``sh -c 'prog'`` (a wrapper that does not ``exec``) leaves ``prog``
running when only ``sh`` is killed; killing the process group ends both. Groups are
registered here while they may have members; they are killed (SIGKILL) at interpreter exit
(``atexit``) and on SIGTERM, SIGINT and SIGHUP, whose handlers then hand the signal on to
the handler that was installed before (re-raising it with the default action when that
was the default), so the harness still stops the way it would have.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from types import FrameType

_groups: set[int] = set()
_lock = threading.Lock()
_installed = False
_previous: dict[int, signal.Handlers | int | object] = {}
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def kill_group(pgid: int) -> None:
    """SIGKILL every process of group ``pgid`` (nothing when none is left)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still there (zombies count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def register(pgid: int) -> None:
    """Own group ``pgid`` until :func:`release`; installs the exit hooks on first use."""
    _install()
    with _lock:
        _groups.add(pgid)


def release(pgid: int) -> None:
    """Kill group ``pgid`` and stop owning it."""
    kill_group(pgid)
    with _lock:
        _groups.discard(pgid)


def kill_all() -> None:
    """Kill every group still owned (atexit and the signal handlers call this)."""
    with _lock:
        groups = list(_groups)
        _groups.clear()
    for pgid in groups:
        kill_group(pgid)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    kill_all()
    previous = _previous.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
        return
    if previous == signal.SIG_IGN:
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install() -> None:
    """Register the atexit hook and, from the main thread, the signal handlers."""
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(kill_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in _SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            _previous[signum] = signal.getsignal(signum)
            signal.signal(signum, _on_signal)
