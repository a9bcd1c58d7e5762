"""Holding one object of a store so that it is removed only as the bytes judged (SPEC.md
"Repairing a store", FSCK-REPAIR-CONDITIONAL).

``fsck --repair`` removes an object only when the bytes it removes are bytes proven damaged:
it takes a hold on the object, judges the bytes the hold reads, and removes them under the
hold's condition, which fails when a writer has changed the object since the hold was taken.
Each adapter's client gives the condition its own way:

- files: the file is renamed away from its name first (a rename is atomic, and LMCache's file
  adapters write a new object as a new file renamed over the name, so the hold keeps exactly
  the inode judged); it is removed, or left in the quarantine folder, only when its inode,
  size and change time are still those it was judged with, and put back under its name
  otherwise (unless a newer object took the name meanwhile);
- Redis: ``WATCH`` the key, read it, then ``MULTI``/``DEL``/``EXEC`` (the transaction is
  refused when any client wrote the key after the ``WATCH``);
- S3: ``GetObject`` gives the bytes and their ETag; ``DeleteObject`` with ``If-Match`` that
  ETag (refused with 412 when another version is stored under the key).

A hold reads its bytes as a :class:`.sources.Source` reads an entry (``open(entry, limit)``),
so the judgement of the held bytes is fsck's own. Outcomes: :data:`REMOVED`,
:data:`QUARANTINED`, :data:`CHANGED` (the object changed since its judgement: left as it is
now), :data:`GONE` (no object under the name any more).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import stat
from dataclasses import dataclass
from io import BufferedIOBase
from pathlib import Path
from typing import Any, Protocol

from .reply_bounds import ReplyTooLarge, reply_limit
from .sources import (
    Entry,
    FileSource,
    ObjectGone,
    ObjectUnreadable,
    RedisSource,
    S3Source,
    Source,
    StoreUnreachable,
)

REMOVED, QUARANTINED, CHANGED, GONE, FAILED = (
    "removed", "quarantined", "changed", "gone", "failed"
)  # fmt: skip
#: Every way a repair of one object ends; FAILED: the removal itself failed (the object is
#: left and stays a problem).
OUTCOMES = (REMOVED, QUARANTINED, CHANGED, GONE, FAILED)
#: Outcomes after which the store no longer serves the damaged bytes under the name.
CORRECTED = frozenset({REMOVED, QUARANTINED, CHANGED, GONE})


class HeldChanged(LookupError):
    """The object changed while the hold was being taken (it is left as it is now)."""


class Held(Protocol):
    """One object held: its entry as held (size, time), its bytes read as a source reads
    them, and the conditional removal."""

    entry: Entry

    def open(self, entry: Entry, limit: int) -> BufferedIOBase:
        """The held bytes' first ``limit`` bytes."""
        ...

    def remove(self) -> str:
        """Remove the held bytes if they are still what the name holds: REMOVED (or
        QUARANTINED), else CHANGED or GONE."""
        ...

    def release(self) -> None:
        """Leave the object as it is (called on every way out; after ``remove``, nothing)."""
        ...


_held_names = itertools.count()


@dataclass
class _HeldFile:
    """A file renamed away from its name (into the quarantine folder, or beside itself under a
    name no adapter reads), judged from its own descriptor."""

    entry: Entry
    path: str
    held: str
    fd: int
    identity: tuple[int, int, int, int]
    quarantined: bool
    done: bool = False

    def open(self, entry: Entry, limit: int) -> BufferedIOBase:
        f = os.fdopen(os.dup(self.fd), "rb")  # the duplicate shares the offset: rewound
        f.seek(0)
        return f

    def remove(self) -> str:
        if _identity(os.fstat(self.fd)) != self.identity:  # written in place meanwhile
            return self._put_back()
        self.done = True
        os.close(self.fd)
        if self.quarantined:
            return QUARANTINED
        os.unlink(self.held)
        return REMOVED

    def release(self) -> None:
        if not self.done:
            self._put_back()

    def _put_back(self) -> str:
        """The held file under its name again, unless a newer object has it now (then the
        held one is superseded, and dropped)."""
        self.done = True
        os.close(self.fd)
        with contextlib.suppress(FileExistsError):
            os.link(self.held, self.path)
        os.unlink(self.held)
        return CHANGED


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns)


def _hold_file(source: FileSource, entry: Entry, quarantine: Path | None) -> Held:
    base = str(source.location.base_path)
    path = os.path.join(base, entry.name)
    if quarantine is not None:
        held = _free_name(quarantine / entry.name.replace("/", "_"))
    else:  # beside the object, named as no adapter's object (no .data suffix)
        folder, name = os.path.split(path)
        held = os.path.join(folder, f".lmckv-fsck-held-{os.getpid()}-{next(_held_names)}-{name}")
        held = held.removesuffix(".data")
    try:
        os.rename(path, held)  # never os.replace: the held name must be new
    except FileNotFoundError:
        raise ObjectGone(entry.name) from None
    try:
        fd = os.open(held, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        os.rename(held, path)
        raise ObjectUnreadable(exc.errno, exc.strerror) from None
    st = os.fstat(fd)
    hold = _HeldFile(
        Entry(entry.name, st.st_size, entry.kind, st.st_mtime), path, held, fd, _identity(st),
        quarantine is not None,
    )  # fmt: skip
    if not stat.S_ISREG(st.st_mode):
        hold.release()
        raise ObjectUnreadable(0, "not a regular file any more")
    return hold


def _free_name(path: Path) -> str:
    """``path``, or ``path.N`` for the first N not taken (a quarantine keeps every copy)."""
    if not path.exists():
        return str(path)
    for n in itertools.count(1):
        candidate = path.with_name(f"{path.name}.{n}")
        if not candidate.exists():
            return str(candidate)
    raise AssertionError("unreachable")


@dataclass
class _HeldKey:
    """A Redis key under ``WATCH`` on a connection of its own, its first bytes read."""

    entry: Entry
    pipe: Any
    key: bytes
    data: bytes
    done: bool = False

    def open(self, entry: Entry, limit: int) -> BufferedIOBase:
        return io.BytesIO(self.data[:limit])

    def remove(self) -> str:
        import redis

        self.done = True
        try:
            self.pipe.multi()
            self.pipe.delete(self.key)
            (deleted,) = self.pipe.execute()
        except redis.WatchError:
            return CHANGED
        except redis.RedisError as exc:
            raise StoreUnreachable(f"removing {self.entry.name!r} failed: {exc}") from None
        finally:
            self.pipe.reset()
        return REMOVED if deleted else GONE

    def release(self) -> None:
        if not self.done:
            self.done = True
            self.pipe.reset()


def _hold_key(source: RedisSource, entry: Entry, limit: int) -> Held:
    import redis

    key = entry.name.encode("utf-8", "surrogateescape")
    pipe: Any = source.client.pipeline(transaction=True)  # redis-py's watch() is untyped
    try:
        pipe.watch(key)
        size = pipe.strlen(key)
        if not isinstance(size, int) or size < 0:
            raise ObjectUnreadable(0, f"STRLEN answered {str(size)[:40]!r}, not a size")
        if size == 0 and not pipe.exists(key):
            raise ObjectGone(entry.name)
        wanted = min(size, limit)
        with reply_limit(wanted):
            data = pipe.getrange(key, 0, wanted - 1) if wanted else b""
        if not isinstance(data, bytes) or len(data) > wanted:
            raise ObjectUnreadable(0, "GETRANGE answered something else than the bytes asked")
    except BaseException as exc:
        pipe.reset()
        if isinstance(exc, redis.ResponseError | ReplyTooLarge):
            raise ObjectUnreadable(0, str(exc)) from None
        if isinstance(exc, ValueError | TypeError | AttributeError):  # redis-py's parse of it
            raise ObjectUnreadable(0, f"the server's reply is malformed: {exc}") from None
        if isinstance(exc, redis.RedisError):
            raise StoreUnreachable(f"holding {entry.name!r} failed: {exc}") from None
        raise
    return _HeldKey(Entry(entry.name, size, entry.kind), pipe, key, data)


@dataclass
class _HeldObject:
    """An S3 object's first bytes and the ETag of the version they were read from."""

    entry: Entry
    source: S3Source
    etag: str
    data: bytes

    def open(self, entry: Entry, limit: int) -> BufferedIOBase:
        return io.BytesIO(self.data[:limit])

    def remove(self) -> str:
        import botocore.exceptions

        try:
            self.source.client.delete_object(
                Bucket=self.source.location.bucket, Key=self.source.prefix + self.entry.name,
                IfMatch=self.etag,
            )  # fmt: skip
        except botocore.exceptions.ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                return CHANGED
            if code in ("NoSuchKey", "404"):
                return GONE
            raise ObjectUnreadable(0, str(exc)) from None
        except botocore.exceptions.BotoCoreError as exc:
            raise StoreUnreachable(f"removing {self.entry.name!r} failed: {exc}") from None
        return REMOVED

    def release(self) -> None:
        pass


def _hold_object(source: S3Source, entry: Entry, limit: int) -> Held:
    import botocore.exceptions

    kwargs: dict[str, Any] = {"Bucket": source.location.bucket, "Key": source.prefix + entry.name}
    try:
        head = source.client.head_object(**kwargs)
        etag, size = head.get("ETag"), head.get("ContentLength")
        if not isinstance(etag, str) or not isinstance(size, int) or size < 0:
            raise ObjectUnreadable(0, "HeadObject answered no ETag or no size")
        data = b""
        if min(size, limit) > 0:  # the bytes of that version only (If-Match), at most limit
            reply = source.client.get_object(
                **kwargs, Range=f"bytes=0-{min(size, limit) - 1}", IfMatch=etag
            )
            body = reply["Body"]
            try:
                data = body.read(min(size, limit))
            finally:
                body.close()
    except botocore.exceptions.ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if code in ("NoSuchKey", "404", "NotFound"):
            raise ObjectGone(entry.name) from None
        if code in ("PreconditionFailed", "412"):  # rewritten between the two requests
            raise HeldChanged(entry.name) from None
        raise ObjectUnreadable(0, str(exc)) from None
    except botocore.exceptions.BotoCoreError as exc:
        raise StoreUnreachable(f"holding {entry.name!r} failed: {exc}") from None
    return _HeldObject(Entry(entry.name, size, entry.kind), source, etag, data)


def hold(source: Source, entry: Entry, limit: int, quarantine: Path | None = None) -> Held:
    """A hold on the object listed as ``entry`` whose bytes are read up to ``limit``;
    ObjectGone when there is none. ``quarantine`` (files only): the folder the object is
    moved to instead of being removed."""
    if isinstance(source, FileSource):
        return _hold_file(source, entry, quarantine)
    if quarantine is not None:
        raise ValueError("a quarantine folder is for a file store")
    if isinstance(source, RedisSource):
        return _hold_key(source, entry, limit)
    if isinstance(source, S3Source):
        return _hold_object(source, entry, limit)
    raise TypeError(f"no conditional removal for {type(source).__name__}")
