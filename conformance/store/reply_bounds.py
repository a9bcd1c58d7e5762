"""Bounds in bytes on what a store's server may send (SPEC.md "A store": every read of fsck is
bounded in time and in bytes).

redis-py reads a bulk reply of the length the server declares and a status line until its
CRLF, and botocore reads a whole ListObjectsV2 page before it parses it: a hostile or broken
server that declares 5 GiB, or never ends a line or a page, makes either client buffer all it
sends. Here both are held to a bound set per request: :func:`reply_limit` around a read sets
the most bytes one reply may take (a range read: the bytes asked for and the reply's framing),
and :data:`REPLY_BYTES` bounds every other reply (a listing page). A reply past its bound
raises :class:`ReplyTooLarge` as soon as the bound is passed, before more is read.

The hooks are redis-py's ``parser_class`` (its RESP2 parser over a bounded socket buffer) and
botocore's ``before-send`` event (the listing is sent unread and read through a bound).
"""

from __future__ import annotations

import contextlib
import contextvars
import io
from collections.abc import Iterator
from typing import Any

#: Bytes one reply may take unless a read sets its own bound: a listing page of
#: PAGE_SLACK * PAGE_SIZE names of a kilobyte each, with their framing.
REPLY_BYTES = 32 << 20
#: Bytes of framing a range read's reply may add to the bytes it asked for (a RESP bulk
#: header and its CRLFs).
FRAMING_BYTES = 4096

_limit: contextvars.ContextVar[int] = contextvars.ContextVar("reply_limit", default=REPLY_BYTES)


class ReplyTooLarge(Exception):
    """A server's reply passed the bytes it may take (the message is one line). No OSError
    nor ValueError: the clients would take either for a dropped connection and ask again."""

    def __init__(self, limit: int, declared: int | None = None) -> None:
        what = f"declares {declared} bytes" if declared is not None else "goes on"
        super().__init__(f"the server's reply {what}, larger than the {limit} bytes it may take")


@contextlib.contextmanager
def reply_limit(payload: int) -> Iterator[None]:
    """Replies within the block may take ``payload`` bytes and their framing."""
    token = _limit.set(payload + FRAMING_BYTES)
    try:
        yield
    finally:
        _limit.reset(token)


def resp_parser_class() -> type[Any]:
    """redis-py's RESP2 parser over a socket buffer that refuses a reply past the bound: a
    bulk length is checked before it is read, and every read from the socket is checked
    against what the buffer already holds (a line that never ends, a deep array)."""
    from redis._parsers import _RESP2Parser
    from redis._parsers.socket import SERVER_CLOSED_CONNECTION_ERROR, SocketBuffer
    from redis.exceptions import ConnectionError as ServerClosed
    from redis.utils import SENTINEL

    class BoundedBuffer(SocketBuffer):
        def _held(self) -> int:
            """Bytes the buffer holds: the reply so far (and any read before it that was
            not purged yet)."""
            buf = self._live_buffer()
            at = buf.tell()
            end = buf.seek(0, io.SEEK_END)
            buf.seek(at)
            return int(end)

        def _read_from_socket(
            self, length: int | None = None, timeout: object = SENTINEL,
            raise_on_timeout: bool | None = True,
        ) -> bool:  # fmt: skip
            limit = _limit.get()
            if self._held() + (length or 0) > limit:
                raise ReplyTooLarge(limit)
            return bool(super()._read_from_socket(length, timeout, raise_on_timeout))

        def readline(self, timeout: object = SENTINEL) -> bytes:
            """A line up to its CRLF, gathered in one growing buffer: redis-py's own joins
            the line so far with each socket read, which a line that never ends makes
            quadratic (seconds of CPU before the bound is reached)."""
            buf = self._live_buffer()
            try:
                line = bytearray(buf.readline())
                while not line.endswith(b"\r\n"):
                    self._read_from_socket(timeout=timeout)
                    line += buf.readline()
            except ValueError:  # the buffer was closed under it, as redis-py says it
                raise ServerClosed(SERVER_CLOSED_CONNECTION_ERROR) from None
            return bytes(line[:-2])

        def read(self, length: int, timeout: object = SENTINEL) -> bytes:
            limit = _limit.get()
            if length > limit:
                raise ReplyTooLarge(limit, length)
            return bytes(super().read(length, timeout))

    class BoundedParser(_RESP2Parser):
        def on_connect(self, connection: Any) -> None:
            super().on_connect(connection)  # type: ignore[no-untyped-call]
            self._buffer = BoundedBuffer(
                connection._sock, self.socket_read_size, connection.socket_timeout
            )

    return BoundedParser


def bound_s3_listings(client: Any) -> None:
    """Reads ``client``'s ListObjectsV2 pages through the bound: botocore sends the request
    without reading the reply (``stream_output``), and its parser then reads the body from a
    stream that refuses to pass :data:`REPLY_BYTES`."""

    def send(request: Any, **_: Any) -> Any:
        request.stream_output = True  # the session returns with the body unread
        response = client._endpoint.http_session.send(request)
        response.raw = _BoundedRaw(response.raw, _limit.get())
        return response

    client.meta.events.register("before-send.s3.ListObjectsV2", send)


class _BoundedRaw:
    """A urllib3 response whose ``stream`` ends in :class:`ReplyTooLarge` past ``limit``."""

    def __init__(self, raw: Any, limit: int) -> None:
        self._raw, self._limit = raw, limit

    def stream(self, amt: int = 1 << 16, decode_content: bool | None = None) -> Iterator[bytes]:
        held = 0
        for chunk in self._raw.stream(amt, decode_content=decode_content):
            held += len(chunk)
            if held > self._limit:
                self._raw.close()  # the rest is never read: the connection is not reused
                raise ReplyTooLarge(self._limit)
            yield chunk

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)
