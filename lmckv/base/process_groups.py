"""The harness owns its children: each one leads its own process group, and every group
still alive is killed whole when the harness ends, however it ends; so are the processes
that escaped those groups.

A testee started as ``sh -c 'prog'`` (a wrapper that does not ``exec``) leaves ``prog``
running when only ``sh`` is killed; killing the process group ends both. Groups are
registered here while they may have members; they are killed (SIGKILL) at interpreter exit
(``atexit``) and on SIGTERM, SIGINT and SIGHUP, whose handlers then hand the signal on to
the handler that was installed before (re-raising it with the default action when that
was the default), so the harness still stops the way it would have.

A process can leave its group (``setsid``, ``setpgid``) and its parent can exit (a double
fork), so that killing the group misses it and it is re-parented away. :func:`adopt_orphans`
makes the harness a *child subreaper* (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``): such
orphans are re-parented to the harness instead of ``init``, where :func:`sweep` finds them
(our children that were not there before the owner started, outside our session and outside
every group still registered), kills them with their own groups and every process below
them, and reaps them. The sweep repeats while it finds live ones (an orphan's children are
re-parented to us when it dies), at most :data:`SWEEP_ROUNDS` times within
:data:`SWEEP_SECONDS`. An orphan that left every group cannot be told from another owner's:
a sweep ends every unregistered one that appeared since its owner started.

The process table a sweep reads is psutil's (each process's parent, status and identity)
with each one's group and session (``os.getpgid``, ``os.getsid``). Without ``prctl`` (not
Linux), :func:`adopt_orphans` returns False: orphans go to ``init``, out of a sweep's reach,
and only the groups and the processes still below a killed leader are killed. A sweep could
take a child that other code started in a new session, in another thread, at the instant
between its start and its :func:`register`, for an orphan; owners register at once and start
from one thread.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Collection, Iterable
from types import FrameType
from typing import NamedTuple

import psutil

#: ``prctl`` option making this process the reaper of its descendants' orphans (Linux).
PR_SET_CHILD_SUBREAPER = 36
#: A sweep scans at most this many times, within this many seconds.
SWEEP_ROUNDS = 50
SWEEP_SECONDS = 2.0
#: At exit or on a signal, the sweep gets this long.
EXIT_SWEEP_SECONDS = 1.0
_SWEEP_PAUSE = 0.01

_groups: set[int] = set()
_lock = threading.RLock()  # a signal handler may run while this thread holds it
_installed = False
_previous: dict[int, signal.Handlers | int | object] = {}
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_subreaper: bool | None = None  # None: not tried yet
_before_adopting: frozenset[tuple[int, int]] = frozenset()


class _Stat(NamedTuple):
    """What a sweep needs of a process."""

    exited: bool  # a zombie (or dead): only reaping is left
    ppid: int
    pgrp: int
    session: int
    #: psutil's identity of the process, the hash of its pid and start time (what
    #: ``psutil.Process`` objects compare): tells a reused pid apart
    start: int


#: psutil statuses of a process that has exited (and awaits its reaping).
_EXITED = frozenset({psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD})


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
    """Kill every group still owned, then what escaped them (atexit and the signal handlers
    call this)."""
    with _lock:
        groups = list(_groups)
        _groups.clear()
    for pgid in groups:
        kill_group(pgid)
    if groups or _subreaper:
        sweep(_before_adopting, groups, seconds=EXIT_SWEEP_SECONDS)


# -- orphans ----------------------------------------------------------------------------------


def adopt_orphans() -> bool:
    """Make this process the child subreaper, once: descendants whose parent exits are
    re-parented to it, so :func:`sweep` can end them. True when it is one (Linux); False
    elsewhere or when the kernel refuses, and then only process groups are killed."""
    global _subreaper, _before_adopting
    with _lock:
        if _subreaper is None:
            _subreaper = False
            if sys.platform.startswith("linux"):
                _before_adopting = children()
                with contextlib.suppress(OSError, AttributeError):
                    libc = ctypes.CDLL(None, use_errno=True)
                    _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            _install()
        return _subreaper


def children() -> frozenset[tuple[int, int]]:
    """Our child processes now, as (pid, identity) pairs (``_Stat.start``): what an owner
    records before it starts its process, so that its sweep leaves them alone."""
    me = os.getpid()
    return frozenset((pid, st.start) for pid, st in _scan().items() if st.ppid == me)


def sweep(
    before: Collection[tuple[int, int]],
    leaders: Iterable[int] = (),
    *,
    seconds: float = SWEEP_SECONDS,
) -> int:
    """Kill what the processes ``leaders`` (whose groups were just killed) left behind: their
    descendants, and every orphan re-parented to us that is not in ``before`` (see
    :func:`children`), not in our session and not in a registered group or its session,
    with its group and its descendants; reap the orphans. Scans again while any of them
    lives, at most :data:`SWEEP_ROUNDS` times within ``seconds``. The number killed."""
    me, leaders = os.getpid(), set(leaders)
    try:
        my_session = os.getsid(0)
    except OSError:
        return 0
    killed: set[tuple[int, int]] = set()
    deadline = time.monotonic() + seconds
    for _ in range(SWEEP_ROUNDS):
        table = _scan()
        if not table:
            break
        with _lock:
            owned = set(_groups)
        roots = [
            pid
            for pid, st in table.items()
            if (
                st.ppid == me
                and pid not in leaders
                and (pid, st.start) not in before
                and st.session != my_session
                and not owned.intersection((pid, st.pgrp, st.session))
            )
        ]
        targets = _descendants(table, [*roots, *leaders]) - leaders
        live = [pid for pid in targets if not table[pid].exited]
        for pid in roots:  # our children: neither pid nor group can be reused before the reap
            if table[pid].pgrp not in (os.getpgid(0), *owned):
                kill_group(table[pid].pgrp)
        for pid in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add((pid, table[pid].start))
        waiting = [pid for pid in roots if not _reap(pid)]
        if (not live and not waiting) or time.monotonic() >= deadline:
            break
        time.sleep(_SWEEP_PAUSE)
    return len(killed)


def reap_orphans(before: Collection[tuple[int, int]]) -> int:
    """Reap the orphans re-parented to us that have exited (see :func:`sweep`; another
    owner's orphans too: nobody else will), without killing any; how many were reaped."""
    me, reaped = os.getpid(), 0
    try:
        my_session = os.getsid(0)
    except OSError:
        return 0
    with _lock:
        owned = set(_groups)
    for pid, st in _scan().items():
        if (
            st.ppid == me
            and st.exited
            and pid not in owned
            and (pid, st.start) not in before
            and st.session != my_session
        ):
            reaped += _reap(pid)
    return reaped


def _reap(pid: int) -> bool:
    """Reap our child ``pid`` if it has exited; True when it is gone."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def _descendants(table: dict[int, _Stat], roots: Iterable[int]) -> set[int]:
    """``roots`` (those in ``table``) and every process below them."""
    below: dict[int, list[int]] = {}
    for pid, st in table.items():
        below.setdefault(st.ppid, []).append(pid)
    found: set[int] = set()
    todo = [pid for pid in roots if pid in table]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(below.get(pid, ()))
    return found


def _scan() -> dict[int, _Stat]:
    """Every process psutil shows (empty where it cannot list them)."""
    table: dict[int, _Stat] = {}
    try:
        pids = psutil.pids()
    except (psutil.Error, OSError):
        return table
    for pid in pids:
        if pid <= 0:  # os.getpgid(0) would be ours
            continue
        try:
            # a fresh Process each (not process_iter's shared cache: a signal handler may
            # sweep while this thread is inside a sweep)
            process = psutil.Process(pid)
            with process.oneshot():
                status, ppid = process.status(), process.ppid()
            group, session = os.getpgid(pid), os.getsid(pid)
            table[pid] = _Stat(status in _EXITED, ppid, group, session, hash(process))
        except (psutil.Error, OSError):
            continue  # gone meanwhile (NoSuchProcess), or not readable
    return table


# -- exit hooks -------------------------------------------------------------------------------


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
    with _lock:
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
