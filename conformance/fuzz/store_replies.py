"""Fuzz targets for what fsck reads from a store's server (issue: fsck against hostile
stores): the replies of a RESP server to fsck's listing and reads, parsed by redis-py as fsck
runs it, and an S3 ListObjectsV2 body parsed by botocore as fsck's client does. The input
goes through :class:`..store.sources.RedisSource` and :class:`..store.sources.S3Source`
unchanged; the only errors they may raise are the store's (``StoreUnreachable``) and an
object's (``ObjectUnreadable``, ``ObjectGone``).
"""

from __future__ import annotations

import functools
import socket
import warnings
from typing import Any

import botocore.parsers
import botocore.session
import redis
import redis.backoff
import redis.retry

from ..store.locations import RedisLocation, S3Location
from ..store.reply_bounds import resp_parser_class
from ..store.sources import (
    Entry,
    ObjectGone,
    ObjectUnreadable,
    RedisSource,
    S3Source,
    StoreUnreachable,
)

#: The errors fsck's sources may raise on any reply.
ALLOWED: tuple[type[BaseException], ...] = (StoreUnreachable, ObjectUnreadable, ObjectGone)
#: Bytes of an object fsck reads in one target run, and objects read per page.
READ_BYTES, READS_PER_PAGE = 64, 4
#: Listing calls one S3 run makes at most (a stub client answers every call with the input).
S3_CALLS = 8

OBJECT = b"m@01000100@0@" + b"ab" * 32
RESP_SEEDS = [
    # SCAN (cursor 0, one key), STRLEN's pipeline, GETRANGE, EXISTS
    b"*2\r\n$1\r\n0\r\n*1\r\n$%d\r\n%s\r\n:16\r\n$16\r\n%s\r\n:1\r\n"
    % (len(OBJECT), OBJECT, b"\0" * 16),
    # two pages: cursor 7, then 0
    b"*2\r\n$1\r\n7\r\n*1\r\n$1\r\na\r\n:3\r\n*2\r\n$1\r\n0\r\n*0\r\n",
    b"-ERR no such thing\r\n",
]
RESP_TOKENS = (b"\r\n", b"*", b"$", b":", b"+OK", b"-ERR ", b"$-1\r\n", b"*-1\r\n", b"*2\r\n")
S3_SEEDS = [
    b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>'
    b"<IsTruncated>false</IsTruncated><Contents><Key>" + OBJECT + b"</Key><Size>16</Size>"
    b"</Contents></ListBucketResult>",
    b"<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t"
    b"</NextContinuationToken><Contents><Key>a</Key><Size>1</Size></Contents>"
    b"</ListBucketResult>",
]
S3_TOKENS = (b"<Contents>", b"</Contents>", b"<Key>", b"<Size>", b"<IsTruncated>true",
             b"<NextContinuationToken>", b"&amp;", b"<![CDATA[")  # fmt: skip


def run_resp(data: bytes) -> list[Entry]:
    """fsck's listing and first reads of a RESP store whose server sends ``data`` (then
    closes): what it listed."""
    ours, theirs = socket.socketpair()
    try:
        theirs.sendall(data)
        theirs.shutdown(socket.SHUT_WR)

        class _Paired(redis.Connection):
            """The one connection: the socket pair's end, every reply read in order (the
            pool's check for unread data would drop the replies still to come)."""

            def _connect(self) -> socket.socket:
                return ours

            def can_read(self, timeout: float | None = 0) -> bool:
                return False

        with warnings.catch_warnings():  # lib_name=None: no CLIENT SETINFO to reply to
            warnings.simplefilter("ignore", DeprecationWarning)
            pool = redis.ConnectionPool(
                connection_class=_Paired, protocol=2, socket_timeout=0.5,
                lib_name=None, lib_version=None, parser_class=resp_parser_class(),
                retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0),  # one socket, no retry
            )  # fmt: skip
        source = RedisSource.__new__(RedisSource)
        source.location = RedisLocation("fuzz", 0)
        source.client = redis.Redis(connection_pool=pool)
        return _listed(source)
    finally:
        ours.close()
        theirs.close()


def run_s3(data: bytes) -> list[Entry]:
    """fsck's listing of an S3 bucket whose server answers every ListObjectsV2 with
    ``data``: what it listed."""
    source = S3Source.__new__(S3Source)
    source.location = S3Location("fuzz", None)
    source.prefix = ""
    source.client = _ListingStub(data)
    return _listed(source, read=False)


class _ListingStub:
    """A boto3 client whose ``list_objects_v2`` parses ``body`` with botocore's parser, as
    the client parses a reply (at most :data:`S3_CALLS` times)."""

    def __init__(self, body: bytes) -> None:
        self.parser, self.shape = _listing_parser()
        self.body, self.calls = body, 0

    def list_objects_v2(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls > S3_CALLS:
            raise AssertionError(f"fsck listed past {S3_CALLS} pages of a repeating listing")
        reply = {"body": self.body, "headers": {}, "status_code": 200}
        parsed: dict[str, Any] = self.parser.parse(reply, self.shape)
        return parsed


@functools.cache
def _listing_parser() -> tuple[Any, Any]:
    """botocore's REST-XML parser and the ListObjectsV2 output shape (loaded once: the
    service model is megabytes)."""
    model = botocore.session.get_session().get_service_model("s3")
    return botocore.parsers.create_parser("rest-xml"), model.operation_model(
        "ListObjectsV2"
    ).output_shape


def _listed(source: RedisSource | S3Source, *, read: bool = True) -> list[Entry]:
    entries: list[Entry] = []
    for page in source.pages():
        entries += page
        for entry in page[:READS_PER_PAGE] if read else ():
            if entry.kind == "object":
                try:
                    with source.open(entry, READ_BYTES) as f:
                        if len(f.read(READ_BYTES + 1)) > READ_BYTES:
                            raise AssertionError("a read gave more than it asked for")
                except (ObjectUnreadable, ObjectGone):
                    continue
    return entries
