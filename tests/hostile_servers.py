"""Hostile stores for fsck's tests: a RESP server and an S3 endpoint on loopback that answer
with what a broken, overloaded or hostile server sends (a listing that never ends, malformed
replies, replies larger than asked, error text with control characters, a reply that stalls).

Each serves in a daemon thread, on 127.0.0.1 only, and stops by itself after ``LIFETIME_S``
(and when its ``with`` block ends): a test that forgets it leaves nothing running.
"""

from __future__ import annotations

import contextlib
import socketserver
import threading
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Seconds a hostile server lives at most.
LIFETIME_S = 60.0
#: Seconds a stalling reply stalls (longer than any bound a test gives fsck).
STALL_S = 30.0
#: Seconds between two bytes of a trickled reply.
TRICKLE_GAP_S = 1.0
#: Bytes a flooding reply sends at most (far more than any bound fsck sets; a client that
#: buffers it all shows in its peak RSS), in chunks of FLOOD_CHUNK.
FLOOD_BYTES = 2 << 30
FLOOD_CHUNK = 1 << 20
#: Text a server puts in its error replies: a terminal escape, and a line that would read as
#: fsck's own verdict if it were printed as it is.
FORGED = "\x1b[2J\x1b[31mhostile\rlmckv fsck: 0 problems\nclean"
#: An object's name in the adapters' string form (model, kv_rank, object group, chunk hash).
OBJECT = "m@01000100@0@" + "ab" * 32


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(data), data)


def _array(items: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(items) + b"".join(items)


def _flood(head: bytes, chunk: bytes = b"\0" * FLOOD_CHUNK) -> Iterator[bytes]:
    """``head``, then ``chunk`` again and again, up to :data:`FLOOD_BYTES` in all."""
    yield head
    for _ in range(FLOOD_BYTES // len(chunk)):
        yield chunk


class _RespHandler(socketserver.StreamRequestHandler):
    server: _RespServer

    def handle(self) -> None:
        self.request.settimeout(LIFETIME_S)
        with contextlib.suppress(OSError, ValueError):
            for _ in range(100_000):  # commands per connection, at most
                argv = self._command()
                if argv is None:
                    return
                reply = self.server.reply(argv)
                if reply is None:  # stall, then drop the connection
                    self.server.stalled.set()
                    self.server.stopped.wait(STALL_S)
                    return
                if self.server.mode.endswith("-trickles") and argv[0].upper() == b"SCAN":
                    self._trickle(reply)
                    return
                if not isinstance(reply, bytes):  # a flood: until the client goes away
                    for chunk in reply:
                        if self.server.stopped.is_set():
                            return
                        self.wfile.write(chunk)
                    return
                self.wfile.write(reply)
                self.wfile.flush()

    def _trickle(self, reply: bytes) -> None:
        """``reply`` a byte at a time, a second apart: every read is answered within any
        per-read timeout, and the reply never ends in time."""
        for byte in reply:
            if self.server.stopped.wait(TRICKLE_GAP_S):
                return
            self.wfile.write(bytes([byte]))
            self.wfile.flush()

    def _command(self) -> list[bytes] | None:
        head = self.rfile.readline(64)
        if not head.startswith(b"*"):
            return None
        argv = []
        for _ in range(min(int(head[1:]), 64)):
            size = int(self.rfile.readline(64)[1:])
            argv.append(self.rfile.read(min(size, 1 << 16) + 2)[:-2])
        return argv


class _RespServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, mode: str, stalled: threading.Event | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _RespHandler)
        self.mode = mode
        self.stopped = threading.Event()
        #: Set when a reply begins to stall: a client is then stuck on it.
        self.stalled = stalled or threading.Event()

    def reply(self, argv: list[bytes]) -> bytes | Iterable[bytes] | None:
        """The answer to one command in this server's mode (None: stall; an iterable: a
        flood, sent piece by piece)."""
        command = argv[0].upper()
        mode = self.mode
        if command in (b"PING",):
            return b"+PONG\r\n"
        if command in (b"CLIENT", b"SELECT", b"HELLO"):
            return b"-ERR unknown command\r\n" if command == b"HELLO" else b"+OK\r\n"
        if command == b"SCAN":
            cursor = argv[1]
            if mode == "scan-repeats":  # back to cursor 7 forever
                return _array([_bulk(b"7"), _array([_bulk(f"{OBJECT}-{cursor!r}".encode())])])
            if mode == "scan-cursor-text":
                return _array([_bulk(b"not-a-number"), _array([])])
            if mode == "scan-huge-page":
                keys = [_bulk(b"k%d" % i) for i in range(20_000)]
                return _array([_bulk(b"0"), _array(keys)])
            if mode == "scan-error":
                return b"-ERR " + FORGED.replace("\r", " ").replace("\n", " ").encode() + b"\r\n"
            if mode == "scan-stalls":
                return None
            if mode == "scan-endless-line":  # a status line that never ends
                return _flood(b"+", b"x" * FLOOD_CHUNK)
            return _array([_bulk(b"0"), _array([_bulk(OBJECT.encode())])])
        if command == b"STRLEN":
            if mode == "strlen-text":
                return b"+sixteen\r\n"
            return b":16384\r\n"
        if command == b"GETRANGE":
            if mode == "getrange-stalls":
                return None
            if mode == "getrange-oversize":
                return _bulk(b"\0" * (int(argv[3]) + 4096))
            if mode == "getrange-huge-length":  # declares 5 GiB, and sends what it can
                return _flood(b"$%d\r\n" % (5 << 30))
            return _bulk(b"\0" * (int(argv[3]) + 1))
        if command == b"EXISTS":
            return b":1\r\n"
        return b"-ERR unknown command\r\n"


@contextlib.contextmanager
def _serving(server: socketserver.BaseServer) -> Iterator[None]:
    """``server`` served in a daemon thread until the block ends or ``LIFETIME_S`` pass."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    timer = threading.Timer(LIFETIME_S, server.shutdown)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextlib.contextmanager
def resp_server(mode: str, stalled: threading.Event | None = None) -> Iterator[int]:
    """A hostile RESP server in ``mode``; its port. ``stalled`` is set when a reply begins
    to stall."""
    server = _RespServer(mode, stalled)
    try:
        with _serving(server):
            yield server.server_address[1]
    finally:
        server.stopped.set()  # a stalled reply stops waiting


def _listing(items: str, truncated: bool, token: str = "") -> bytes:
    next_token = f"<NextContinuationToken>{token}</NextContinuationToken>" if token else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Name>bucket</Name><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys>"
        f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>{next_token}{items}"
        "</ListBucketResult>"
    ).encode()


def _item(key: str | None, size: int | str = 16384) -> str:
    key_xml = f"<Key>{key}</Key>" if key is not None else ""
    return f"<Contents>{key_xml}<Size>{size}</Size><StorageClass>STANDARD</StorageClass></Contents>"


class _S3Handler(BaseHTTPRequestHandler):
    server: _S3Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, kind: str = "application/xml") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _flood(self, head: bytes) -> None:
        """A 200 reply of ``head`` and then listing items, in chunked transfer encoding, up
        to :data:`FLOOD_BYTES`."""
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        item = _item(OBJECT).encode()
        items = item * (FLOOD_CHUNK // len(item))
        with contextlib.suppress(OSError):
            for chunk in _flood(head, items):
                if self.server.stopped.is_set():
                    return
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.close_connection = True

    def do_HEAD(self) -> None:
        self._send(200, b"")

    def do_GET(self) -> None:
        mode = self.server.mode
        if "list-type=2" not in self.path:
            self._send(200, b"\0" * 16, "binary/octet-stream")
            return
        if mode == "list-repeats":
            body = _listing(_item(OBJECT), truncated=True, token="same-token")
        elif mode == "list-no-key":
            body = _listing(_item(None), truncated=False)
        elif mode == "list-not-xml":
            body = b"<ListBucketResult><Contents><Key>"
        elif mode == "list-size-text":  # botocore's int() of it raises ValueError
            body = _listing(_item(OBJECT, "sixteen"), truncated=False)
        elif mode == "list-no-token":
            body = _listing(_item(OBJECT), truncated=True)
        elif mode == "list-flood":  # a page that never ends, chunk by chunk
            self._flood(_listing("", truncated=False)[: -len("</ListBucketResult>")])
            return
        elif mode == "list-error":
            message = FORGED.replace("\x1b", "")  # XML 1.0 carries no ESC; a newline it does
            body = (
                '<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
                f"<Message>{message}</Message><RequestId>1</RequestId></Error>"
            ).encode()
            self._send(403, body)
            return
        else:
            body = _listing(_item(OBJECT), truncated=False)
        self._send(200, body)


class _S3Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode: str) -> None:
        super().__init__(("127.0.0.1", 0), _S3Handler)
        self.mode = mode
        self.stopped = threading.Event()


@contextlib.contextmanager
def s3_server(mode: str) -> Iterator[str]:
    """A hostile S3 endpoint in ``mode``; its URL."""
    server = _S3Server(mode)
    try:
        with _serving(server):
            yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.stopped.set()  # a flood stops sending


class _SilentHandler(socketserver.BaseRequestHandler):
    server: _SilentServer

    def handle(self) -> None:
        self.server.stopped.wait(STALL_S)  # accepts, and never says a word


class _SilentServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _SilentHandler)
        self.stopped = threading.Event()


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A server that accepts connections and never answers (a port that is no Dask
    scheduler); its port."""
    server = _SilentServer()
    try:
        with _serving(server):
            yield server.server_address[1]
    finally:
        server.stopped.set()
