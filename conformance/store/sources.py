"""Reading a store with independent, well-kept clients, never through LMCache's adapter code
(which is what a check checks): the file system's own calls, redis-py, boto3.

Each client both reads (fsck) and writes (the tests that damage a store, the store-path
benchmark's direct limits): ``get``, ``put`` and ``delete`` one entry by name, ``sizes`` of
every entry. A store is listed in pages (a directory read in pieces, Redis ``SCAN`` cursors, S3
``ListObjectsV2`` continuation tokens), so that memory does not grow with the number of
objects and a page is a unit of work for a pool of processes or a Dask cluster. An object that
vanishes between its listing and its reading (LMCache evicts while a check runs) raises
:class:`ObjectGone`; one that cannot be read, :class:`ObjectUnreadable`.
"""

from __future__ import annotations

import io
import ipaddress
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from io import BufferedIOBase
from typing import Any, Protocol

from .locations import FileLocation, RedisLocation, S3Location
from .names import ADAPTER_FILES, TEMP_SUFFIX, is_object_file
from .reply_bounds import ReplyTooLarge, bound_s3_listings, reply_limit, resp_parser_class

#: Entries per page of a listing, at most.
PAGE_SIZE = 1000
#: A listing page with more entries than this many times PAGE_SIZE is no answer to what was
#: asked (a server may return somewhat more than COUNT keys, never this many).
PAGE_SLACK = 10
#: Listed bytes per page of a file listing, at most (a page of large objects is cut short, so
#: that a pool of workers shares a store of few large files).
PAGE_BYTES = 128 << 20
#: Bytes ``get`` reads of one object at most (the tests' and benchmarks' reads of stores they
#: wrote; fsck reads through ``open``, bounded by what it asks for).
GET_BYTES = 4 << 30
#: Seconds a server may take to answer one request.
REQUEST_TIMEOUT = 30.0


class StoreUnreachable(OSError):
    """The store cannot be listed at all (the message is one line)."""


class ObjectGone(LookupError):
    """The object was listed and is gone now."""


class ObjectUnreadable(OSError):
    """The object is there and cannot be read."""


@dataclass(frozen=True)
class Entry:
    """One listed entry: its name (relative to the store), its size in bytes, and what the
    listing alone says it is: ``object`` (named like one), ``temp`` (an unfinished write),
    ``adapter`` (the adapter's own file), ``directory``, ``foreign``, or ``unreadable`` (the
    server's answer about it was malformed: ``why`` says how)."""

    name: str
    size: int
    kind: str = "object"
    #: Seconds since the epoch of its last change, where the store says (files).
    mtime: float | None = None
    why: str = ""


class Readable(Protocol):
    """What judging an object reads through: its first bytes by its entry."""

    def open(self, entry: Entry, limit: int) -> BufferedIOBase:
        """The object's first ``limit`` bytes (or all of them, when it is smaller) as a
        stream; a server is asked for no more than that."""
        ...


class Source(Readable, Protocol):
    """A store's listing and its objects' bytes, read and written by name."""

    def pages(self) -> Iterator[list[Entry]]: ...

    def get(self, name: str) -> bytes:
        """Every byte stored under ``name``; ObjectGone when there is none."""
        ...

    def put(self, name: str, data: bytes) -> None:
        """Store ``data`` under ``name``."""
        ...

    def delete(self, name: str) -> None:
        """Remove ``name``."""
        ...

    def close(self) -> None: ...


def sizes(source: Source) -> dict[str, int]:
    """Every entry's name and size but directories (an unfinished write's too)."""
    return {e.name: e.size for page in source.pages() for e in page if e.kind != "directory"}


class FileSource:
    """An fs or fs_native store: the files of ``base_path`` (and of its ``relative_tmp_dir``,
    whose files are unfinished writes)."""

    def __init__(self, location: FileLocation) -> None:
        self.location = location
        try:
            if not stat.S_ISDIR(os.stat(location.base_path).st_mode):
                raise StoreUnreachable(f"{location.base_path} is not a directory")
        except OSError as exc:
            if isinstance(exc, StoreUnreachable):
                raise
            raise StoreUnreachable(f"cannot read {location.base_path}: {exc.strerror}") from None

    def _entry(self, item: os.DirEntry[str], prefix: str = "") -> Entry:
        name = prefix + item.name
        info = item.stat(follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            return Entry(name, 0, "directory", info.st_mtime)
        if not stat.S_ISREG(info.st_mode):
            why = "not a regular file (a link, socket, device or pipe)"
            return Entry(name, info.st_size, "foreign", info.st_mtime, why)
        if prefix or item.name.endswith(TEMP_SUFFIX):
            return Entry(name, info.st_size, "temp", info.st_mtime)
        if item.name in ADAPTER_FILES:
            return Entry(name, info.st_size, "adapter", info.st_mtime)
        if not is_object_file(item.name):
            why = "no .data suffix: not an object file of the FS adapters"
            return Entry(name, info.st_size, "foreign", info.st_mtime, why)
        return Entry(name, info.st_size, "object", info.st_mtime)

    def _scan(self, folder: str, prefix: str) -> Iterator[Entry]:
        try:
            with os.scandir(folder) as items:
                for item in items:
                    try:
                        yield self._entry(item, prefix)
                    except FileNotFoundError:
                        continue  # gone between the directory read and its stat
        except OSError as exc:
            raise StoreUnreachable(f"cannot list {folder}: {exc.strerror}") from None

    def _entries(self) -> Iterator[Entry]:
        base = str(self.location.base_path)
        tmp = self.location.tmp_dir
        for entry in self._scan(base, ""):
            if tmp and entry.kind == "directory" and entry.name == tmp.strip("/"):
                yield from self._scan(os.path.join(base, entry.name), entry.name + "/")
            else:
                yield entry

    def pages(self) -> Iterator[list[Entry]]:
        yield from _paged(self._entries())

    def open(self, entry: Entry, limit: int) -> BufferedIOBase:
        """Opened without following a link and without blocking (a pipe put in the file's
        place after the listing cannot hang the check), then held to a regular file."""
        path = os.path.join(self.location.base_path, entry.name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise ObjectGone(entry.name) from None
        except OSError as exc:
            raise ObjectUnreadable(exc.errno, exc.strerror) from None
        f = os.fdopen(fd, "rb")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            f.close()
            raise ObjectUnreadable(0, "not a regular file any more")
        return f

    def get(self, name: str) -> bytes:
        with self.open(Entry(name, 0), 0) as f:
            return f.read()

    def put(self, name: str, data: bytes) -> None:
        """Whole, as LMCache's file adapters write: a temporary file renamed over ``name``,
        so that a reader opens the old bytes or the new, never a part."""
        path = os.path.join(self.location.base_path, name)
        temp = f"{path}.lmckv-put-{os.getpid()}-{threading.get_ident()}"
        with open(temp, "wb") as f:
            f.write(data)
        os.replace(temp, path)

    def delete(self, name: str) -> None:
        try:
            os.unlink(os.path.join(self.location.base_path, name))
        except FileNotFoundError:
            raise ObjectGone(name) from None

    def close(self) -> None:
        pass


class RedisSource:
    """A resp or valkey store: the string keys of one database (under ``key_prefix@`` when
    the adapter writes a prefix), read with redis-py."""

    def __init__(self, location: RedisLocation) -> None:
        import redis

        self.location = location
        pool = redis.ConnectionPool(
            host=location.host, port=location.port, db=location.db,
            username=location.username, password=location.password,
            socket_timeout=REQUEST_TIMEOUT, socket_connect_timeout=REQUEST_TIMEOUT,
            protocol=2,  # RESP2, as LMCache's clients speak: no HELLO, no fallback warning
            parser_class=resp_parser_class(),  # every reply within its bound in bytes
        )  # fmt: skip
        self.client = redis.Redis(connection_pool=pool)
        try:
            self.client.ping()
        except redis.RedisError as exc:
            raise StoreUnreachable(f"{location.host}:{location.port}: {exc}") from None

    def pages(self) -> Iterator[list[Entry]]:
        import redis

        match = f"{self.location.key_prefix}@*" if self.location.key_prefix else None
        cursor, seen = 0, set()
        while True:
            try:
                cursor, found = self.client.scan(cursor, match=match, count=PAGE_SIZE)
                keys = [k if isinstance(k, bytes) else k.encode() for k in found]
            except redis.RedisError as exc:
                raise StoreUnreachable(f"listing the keys failed: {exc}") from None
            except ReplyTooLarge as exc:
                raise StoreUnreachable(f"the server's SCAN reply is malformed: {exc}") from None
            except (ValueError, TypeError, AttributeError) as exc:  # redis-py's parse of it
                raise StoreUnreachable(f"the server's SCAN reply is malformed: {exc}") from None
            if len(keys) > PAGE_SLACK * PAGE_SIZE:
                why = f"a SCAN page of {len(keys)} keys, asked for {PAGE_SIZE}"
                raise StoreUnreachable(f"the server's listing is malformed: {why}")
            if keys:
                yield self._sized(keys)
            if cursor == 0:
                return
            if cursor in seen:  # a SCAN that comes back to a cursor never ends
                raise StoreUnreachable(f"the server repeated SCAN cursor {cursor}")
            seen.add(cursor)

    def _sized(self, keys: list[bytes]) -> list[Entry]:
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.strlen(key)
        import redis

        try:
            sizes = pipe.execute(raise_on_error=False)
        except redis.RedisError as exc:
            raise StoreUnreachable(f"sizing the keys failed: {exc}") from None
        except ReplyTooLarge as exc:
            raise StoreUnreachable(f"the server's STRLEN replies are malformed: {exc}") from None
        except (ValueError, TypeError, AttributeError) as exc:  # redis-py's parse of a reply
            raise StoreUnreachable(f"the server's STRLEN replies are malformed: {exc}") from None
        if len(sizes) != len(keys):
            raise StoreUnreachable(f"{len(sizes)} STRLEN replies to {len(keys)} keys")
        page = []
        for key, size in zip(keys, sizes, strict=True):
            name = key.decode("utf-8", "surrogateescape")
            if isinstance(size, redis.ResponseError):
                page.append(Entry(name, 0, "foreign", why="not a string value"))
            elif isinstance(size, int) and not isinstance(size, bool) and size >= 0:
                page.append(Entry(name, size))
            else:
                why = f"STRLEN answered {str(size)[:40]!r}, not a size"
                page.append(Entry(name, 0, "unreadable", why=why))
        return page

    def open(self, entry: Entry, limit: int) -> BufferedIOBase:
        import redis

        key = entry.name.encode("utf-8", "surrogateescape")
        try:
            # GETRANGE answers "" for a key that is gone: EXISTS tells an empty read apart.
            with reply_limit(limit):
                data = self.client.getrange(key, 0, limit - 1) if limit > 0 else b""
            if not data and not self.client.exists(key):
                raise ObjectGone(entry.name)
        except ReplyTooLarge as exc:  # refused before it was read; the connection is dropped
            raise ObjectUnreadable(0, str(exc)) from None
        except redis.ResponseError as exc:
            raise ObjectUnreadable(0, str(exc)) from None
        except redis.RedisError as exc:  # the server went away: the check cannot go on
            raise StoreUnreachable(f"reading {entry.name!r} failed: {exc}") from None
        except (ValueError, TypeError, AttributeError) as exc:  # redis-py's parse of a reply
            raise ObjectUnreadable(0, f"the server's reply is malformed: {exc}") from None
        if not isinstance(data, bytes):
            raise ObjectUnreadable(0, f"GETRANGE answered {type(data).__name__}, not bytes")
        if len(data) > limit:
            raise ObjectUnreadable(0, f"GETRANGE answered {len(data)} bytes, asked for {limit}")
        return io.BytesIO(data)

    def get(self, name: str) -> bytes:
        with reply_limit(GET_BYTES):
            data = self.client.get(name.encode("utf-8", "surrogateescape"))
        if not isinstance(data, bytes):
            raise ObjectGone(name)
        return data

    def put(self, name: str, data: bytes) -> None:
        self.client.set(name.encode("utf-8", "surrogateescape"), data)

    def delete(self, name: str) -> None:
        self.client.delete(name.encode("utf-8", "surrogateescape"))

    def close(self) -> None:
        self.client.close()


class S3Source:
    """An s3 store: the objects of one bucket (under ``prefix/``), read with boto3."""

    def __init__(self, location: S3Location) -> None:
        import boto3
        import botocore.config
        import botocore.exceptions

        self.location = location
        self.prefix = f"{location.prefix}/" if location.prefix else ""
        config = botocore.config.Config(
            s3={"addressing_style": _addressing_style(location)},
            connect_timeout=REQUEST_TIMEOUT, read_timeout=REQUEST_TIMEOUT,
            retries={"max_attempts": 3},
        )  # fmt: skip
        self.client: Any = boto3.client(
            "s3", endpoint_url=location.endpoint_url, region_name=location.region or "us-east-1",
            aws_access_key_id=location.access_key_id,
            aws_secret_access_key=location.secret_access_key, config=config,
        )  # fmt: skip
        bound_s3_listings(self.client)
        try:
            self.client.head_bucket(Bucket=location.bucket)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise StoreUnreachable(f"bucket {location.bucket}: {exc}") from None

    def pages(self) -> Iterator[list[Entry]]:
        import botocore.exceptions
        import botocore.parsers

        kwargs: dict[str, Any] = {"Bucket": self.location.bucket, "MaxKeys": PAGE_SIZE}
        if self.prefix:
            kwargs["Prefix"] = self.prefix
        seen: set[str] = set()
        while True:
            try:
                reply = self.client.list_objects_v2(**kwargs)
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
                raise StoreUnreachable(f"listing the bucket failed: {exc}") from None
            except (
                botocore.parsers.ResponseParserError,
                ReplyTooLarge,
                ValueError,
                TypeError,
            ) as exc:
                # botocore's parse of a malformed listing (a Size that is no number: int())
                raise StoreUnreachable(f"the server's listing is malformed: {exc}") from None
            page = _s3_page(reply, self.prefix)
            if page:
                yield page
            if not reply.get("IsTruncated"):
                return
            token = reply.get("NextContinuationToken")
            if not isinstance(token, str) or not token:
                raise StoreUnreachable("a truncated listing without a continuation token")
            if token in seen:  # botocore's paginator stops on a repeated token, as this does
                raise StoreUnreachable(f"the server repeated continuation token {token[:40]!r}")
            seen.add(token)
            kwargs["ContinuationToken"] = token

    def open(self, entry: Entry, limit: int) -> BufferedIOBase:
        import botocore.exceptions

        if limit <= 0:
            return io.BytesIO(b"")
        try:
            reply = self.client.get_object(
                Bucket=self.location.bucket, Key=self.prefix + entry.name,
                Range=f"bytes=0-{limit - 1}",
            )  # fmt: skip
        except botocore.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise ObjectGone(entry.name) from None
            raise ObjectUnreadable(0, str(exc)) from None
        except botocore.exceptions.BotoCoreError as exc:  # the endpoint went away
            raise StoreUnreachable(f"reading {entry.name!r} failed: {exc}") from None
        body = reply["Body"]
        try:
            return io.BytesIO(body.read(limit))
        finally:
            body.close()

    def get(self, name: str) -> bytes:
        import botocore.exceptions

        try:
            reply = self.client.get_object(Bucket=self.location.bucket, Key=self.prefix + name)
        except botocore.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise ObjectGone(name) from None
            raise ObjectUnreadable(0, str(exc)) from None
        data: bytes = reply["Body"].read()
        return data

    def put(self, name: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.location.bucket, Key=self.prefix + name, Body=data)

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=self.location.bucket, Key=self.prefix + name)

    def close(self) -> None:
        self.client.close()


def _s3_page(reply: dict[str, Any], prefix: str) -> list[Entry]:
    """The entries of one ListObjectsV2 reply; StoreUnreachable when it is malformed (an item
    without a Key or a size, a page far larger than asked)."""
    items = reply.get("Contents", [])
    if not isinstance(items, list) or len(items) > PAGE_SLACK * PAGE_SIZE:
        raise StoreUnreachable(f"the server's listing is malformed: a page of {len(items)} items")
    page = []
    for item in items:
        key, size = item.get("Key"), item.get("Size")
        if not isinstance(key, str) or not isinstance(size, int) or size < 0:
            why = f"an item with Key {str(key)[:40]!r} and Size {str(size)[:40]!r}"
            raise StoreUnreachable(f"the server's listing is malformed: {why}")
        page.append(Entry(key[len(prefix) :], size))
    return page


def _addressing_style(location: S3Location) -> str:
    """The spec's style; else path-style for an endpoint at an address or ``localhost`` (a
    local S3 server), and what boto3 chooses otherwise."""
    if location.addressing != "auto" or location.endpoint_url is None:
        return location.addressing
    host = location.endpoint_url.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return "path" if host == "localhost" else "auto"
    return "path"


def _paged(entries: Iterator[Entry]) -> Iterator[list[Entry]]:
    page: list[Entry] = []
    listed = 0
    for entry in entries:
        page.append(entry)
        listed += entry.size
        if len(page) == PAGE_SIZE or listed >= PAGE_BYTES:
            yield page
            page, listed = [], 0
    if page:
        yield page
