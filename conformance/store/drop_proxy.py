"""A loopback TCP proxy that drops the server's connection in the middle of one object's
transfer, for lmckv's store-fault conformance tests (SPEC.md rule STORE-LOAD-DROP).

LMCache's RESP client (to redis-server) and its S3 client (HTTP/1.1 over awscrt, to moto)
connect to the proxy instead of the server; it forwards bytes both ways unchanged. A connection
whose client->server bytes contain ``needle`` (the object's key as the request spells it: raw
key bytes for RESP, the URL-quoted key in the path for S3; a match may span two chunks) is
*armed*. Once it has forwarded ``cut_after`` server->client bytes since arming, the proxy sends
exactly that many, waits (bounded) for the client's ACK, and resets both sockets (SO_LINGER on,
linger 0, close: a TCP RST). Smaller replies (EXISTS, HEAD) pass and the connection stays armed.
At most ``max_drops`` connections are cut; after that it is a plain proxy, so reconnects work.

Standard library only; listens on 127.0.0.1 only; every loop is bounded in count and time and
notices :meth:`DropProxy.stop` within ``POLL_S``; connections and the bytes each one buffers
are capped; an error on one connection closes that connection only.
"""

from __future__ import annotations

import contextlib
import fcntl
import selectors
import socket
import struct
import termios
import threading
import time
from types import TracebackType
from typing import Self

HOST = "127.0.0.1"
MAX_CONNECTIONS = 64  # served at once; more are closed at once
MAX_ACCEPTS = 10_000  # over the proxy's lifetime
PROXY_MAX_S = 3600.0  # the accept loop's lifetime
CONN_MAX_S = 900.0  # one connection's lifetime
CHUNK = 1 << 16  # bytes read at once
MAX_BUFFERED = 1 << 20  # bytes queued towards one side before reading from the other pauses
POLL_S = 0.05  # how often loops look at the stop flag
CONNECT_TIMEOUT_S = 2.0
DRAIN_S = 2.0  # longest wait for the client's ACK of a cut response
JOIN_S = 1.5  # longest stop() waits for all threads together


class DropProxyError(RuntimeError):
    """The proxy could not start (port not bound, or started twice or after stop)."""


def _abort(sock: socket.socket) -> None:
    """Close ``sock`` with a TCP RST (SO_LINGER on, linger 0)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _unacked(sock: socket.socket) -> int:
    """Bytes ``sock`` has sent that its peer has not acknowledged (0 where unknown)."""
    try:
        out = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    except (OSError, ValueError):
        return 0
    count: int = struct.unpack("i", out)[0]
    return count


def _want(sel: selectors.BaseSelector, sock: socket.socket, events: int) -> None:
    """Make ``sel`` watch ``sock`` for exactly ``events`` (none: not at all)."""
    key = sel.get_map().get(sock.fileno())
    if not events:
        if key is not None:
            sel.unregister(sock)
    elif key is None:
        sel.register(sock, events)
    elif key.events != events:
        sel.modify(sock, events)


class _Conn:
    """One client connection and its upstream connection, pumped by one thread."""

    def __init__(self, proxy: DropProxy, client: socket.socket) -> None:
        self.proxy, self.client = proxy, client
        self.upstream: socket.socket | None = None
        self.armed = False
        self.cutting = False
        self.since_armed = 0
        self.tail = b""
        self.thread = threading.Thread(target=self.run, name="drop-proxy-conn", daemon=True)

    def run(self) -> None:
        """Pump until either side ends, the connection is cut, or the proxy stops."""
        try:
            self._pump()
        except (OSError, ValueError):
            pass  # this connection only; the proxy keeps serving others
        finally:
            self.close()

    def close(self) -> None:
        """Close both sockets (safe to repeat, from any thread)."""
        for sock in (self.client, self.upstream):
            if sock is not None:
                sock.close()

    def _from_client(self, data: bytes) -> bytes:
        needle = self.proxy.needle
        if not self.armed and self.proxy.drops < self.proxy.max_drops:
            hay = self.tail + data
            self.armed = needle in hay
            self.since_armed = 0
            self.tail = hay[-(len(needle) - 1) :] if len(needle) > 1 else b""
        return data

    def _from_server(self, data: bytes) -> bytes:
        if not self.armed:
            return data
        remaining = self.proxy.cut_after - self.since_armed
        if len(data) < remaining:
            self.since_armed += len(data)
            return data
        self.armed = False
        if self.proxy._take_drop():
            self.cutting = True
            return data[:remaining]
        return data

    def _pump(self) -> None:
        stop = self.proxy._stop
        client = self.client
        up = socket.create_connection(
            (self.proxy.upstream_host, self.proxy.upstream_port), timeout=CONNECT_TIMEOUT_S
        )
        self.upstream = up
        if stop.is_set():
            return
        client.setblocking(False)
        up.setblocking(False)
        peer = {client: up, up: client}
        by_fd = {client.fileno(): client, up.fileno(): up}
        pending = {client: bytearray(), up: bytearray()}  # bytes waiting to be sent TO the key
        eof = {client: False, up: False}
        shut: set[socket.socket] = set()
        deadline = time.monotonic() + CONN_MAX_S
        with selectors.DefaultSelector() as sel:
            while not stop.is_set() and time.monotonic() < deadline:
                if self.cutting and not pending[client]:
                    self._finish_cut()
                    return
                if all(eof.values()) and not any(pending.values()):
                    return
                for sock in (client, up):
                    readable = not eof[sock] and not self.cutting
                    readable = readable and len(pending[peer[sock]]) < MAX_BUFFERED
                    events = (selectors.EVENT_READ if readable else 0) | (
                        selectors.EVENT_WRITE if pending[sock] else 0
                    )
                    _want(sel, sock, events)
                for key, events in sel.select(POLL_S):
                    sock = by_fd[key.fd]
                    with contextlib.suppress(BlockingIOError):
                        if events & selectors.EVENT_WRITE:
                            del pending[sock][: sock.send(pending[sock])]
                        if events & selectors.EVENT_READ and not self.cutting:
                            data = sock.recv(CHUNK)
                            eof[sock] = not data
                            filt = self._from_client if sock is client else self._from_server
                            pending[peer[sock]] += filt(data)
                for sock in (client, up):
                    if eof[sock] and not pending[peer[sock]] and peer[sock] not in shut:
                        shut.add(peer[sock])
                        peer[sock].shutdown(socket.SHUT_WR)

    def _finish_cut(self) -> None:
        """Wait (bounded) until the client acknowledged the cut response, then reset both."""
        deadline = time.monotonic() + DRAIN_S
        while _unacked(self.client) and time.monotonic() < deadline:
            if self.proxy._stop.wait(0.005):
                break
        _abort(self.client)
        if self.upstream is not None:
            _abort(self.upstream)


class DropProxy:
    """A loopback proxy to ``upstream_host:upstream_port`` that resets the connection whose
    request contained ``needle`` after ``cut_after`` response bytes, at most ``max_drops``
    times. ``port`` is the proxy's own port on 127.0.0.1, bound by :meth:`start`."""

    def __init__(
        self,
        upstream_port: int,
        needle: bytes,
        cut_after: int,
        *,
        max_drops: int = 1,
        upstream_host: str = "127.0.0.1",
    ) -> None:
        if not needle:
            raise ValueError("needle must be non-empty")
        if cut_after < 1:
            raise ValueError(f"cut_after must be >= 1, not {cut_after}")
        if max_drops < 0:
            raise ValueError(f"max_drops must be >= 0, not {max_drops}")
        self.upstream_port, self.upstream_host = upstream_port, upstream_host
        self.needle, self.cut_after, self.max_drops = bytes(needle), cut_after, max_drops
        self.port = 0
        self._drops = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stopped = False
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._conns: list[_Conn] = []

    @property
    def drops(self) -> int:
        """Connections cut so far."""
        with self._lock:
            return self._drops

    def _take_drop(self) -> bool:
        """Claim one drop from the budget; False once ``max_drops`` are spent."""
        with self._lock:
            if self._drops >= self.max_drops:
                return False
            self._drops += 1
            return True

    def start(self) -> Self:
        """Bind 127.0.0.1 on a free port and start accepting; raises DropProxyError."""
        if self._thread is not None or self._stopped:
            raise DropProxyError("a DropProxy starts once")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind((HOST, 0))
            listener.listen(MAX_CONNECTIONS)
            listener.setblocking(False)
        except OSError as exc:
            listener.close()
            raise DropProxyError(f"cannot listen on {HOST}: {exc}") from exc
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="drop-proxy-accept", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        assert self._listener is not None
        deadline = time.monotonic() + PROXY_MAX_S
        with selectors.DefaultSelector() as sel:
            sel.register(self._listener, selectors.EVENT_READ)
            for _ in range(MAX_ACCEPTS):
                while not self._stop.is_set() and time.monotonic() < deadline:
                    if sel.select(POLL_S):
                        break
                else:
                    return
                try:
                    client, _ = self._listener.accept()
                except OSError:
                    continue
                with self._lock:
                    self._conns = [c for c in self._conns if c.thread.is_alive()]
                    if len(self._conns) >= MAX_CONNECTIONS or self._stop.is_set():
                        client.close()
                        continue
                    conn = _Conn(self, client)
                    conn.thread.start()
                    self._conns.append(conn)

    def stop(self) -> None:
        """Close the listener and every connection; join the threads (bounded). Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._stop.set()
        deadline = time.monotonic() + JOIN_S
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            conn.thread.join(max(0.0, deadline - time.monotonic()))
        for conn in conns:
            if conn.thread.is_alive():
                conn.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
