"""lmckv.conformance.store.drop_proxy: the loopback proxy that resets one connection in the
middle of a response (SPEC.md rule STORE-LOAD-DROP), against a line server of the test's own.

The server reads lines ``N PAYLOAD``: N > 0 answers N bytes of a fixed pattern, N == 0 echoes
``PAYLOAD`` and the newline. Everything runs on 127.0.0.1 and is stopped on every exit path.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from lmckv.conformance.store.drop_proxy import DropProxy, DropProxyError

NEEDLE = b"kv-object-0042"
BIG = 100_000
CUT = 10_000
TIMEOUT_S = 1.5


def pattern(n: int) -> bytes:
    return bytes(i % 251 for i in range(n))


class LineServer:
    """A loopback server thread answering ``N PAYLOAD`` lines (module docstring)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.stop_flag = threading.Event()
        self.threads = [threading.Thread(target=self.accept_loop, daemon=True)]
        self.threads[0].start()

    def accept_loop(self) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(self.listener, selectors.EVENT_READ)
            while not self.stop_flag.is_set():
                if not sel.select(0.05):
                    continue
                conn, _ = self.listener.accept()
                thread = threading.Thread(target=self.serve, args=(conn,), daemon=True)
                self.threads.append(thread)
                thread.start()

    def serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.05)
        buf = b""
        with conn, contextlib.suppress(OSError):
            while not self.stop_flag.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    count, payload = line.split(b" ", 1)
                    conn.settimeout(TIMEOUT_S)
                    conn.sendall(pattern(int(count)) if int(count) else payload + b"\n")
                    conn.settimeout(0.05)

    def close(self) -> None:
        self.stop_flag.set()
        for thread in self.threads:
            thread.join(2.0)
        self.listener.close()


@pytest.fixture
def server() -> Iterator[LineServer]:
    srv = LineServer()
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def proxy(server: LineServer) -> Iterator[Callable[..., DropProxy]]:
    with contextlib.ExitStack() as stack:

        def make(cut_after: int = CUT, max_drops: int = 1) -> DropProxy:
            proxy = DropProxy(server.port, NEEDLE, cut_after, max_drops=max_drops)
            return stack.enter_context(proxy)

        yield make


@contextlib.contextmanager
def connect(p: DropProxy) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", p.port), timeout=TIMEOUT_S) as sock:
        yield sock


def receive(sock: socket.socket, limit: int) -> tuple[bytes, str]:
    """Up to ``limit`` bytes, and how reading ended: 'limit', 'eof' or 'reset'."""
    data = bytearray()
    deadline = time.monotonic() + TIMEOUT_S
    while len(data) < limit and time.monotonic() < deadline:
        try:
            chunk = sock.recv(limit - len(data))
        except ConnectionResetError:
            return bytes(data), "reset"
        if not chunk:
            return bytes(data), "eof"
        data += chunk
    assert len(data) == limit, f"timed out after {len(data)} of {limit} bytes"
    return bytes(data), "limit"


def test_forwards_both_ways_without_the_needle(proxy: Callable[..., DropProxy]) -> None:
    p = proxy()
    big_payload = b"x" * 300_000
    with connect(p) as sock:
        sock.sendall(b"0 hello\n")
        assert receive(sock, 6) == (b"hello\n", "limit")
        sock.sendall(b"0 " + big_payload + b"\n")
        assert receive(sock, len(big_payload) + 1) == (big_payload + b"\n", "limit")
        sock.sendall(b"%d other-key\n" % BIG)
        assert receive(sock, BIG) == (pattern(BIG), "limit")
        sock.shutdown(socket.SHUT_WR)
        assert receive(sock, 1) == (b"", "eof")
    assert p.drops == 0


def test_cuts_the_response_after_exactly_cut_after_bytes(
    proxy: Callable[..., DropProxy],
) -> None:
    p = proxy()
    with connect(p) as sock:
        sock.sendall(b"%d %s\n" % (BIG, NEEDLE))
        data, end = receive(sock, BIG)
    assert (data, end in ("reset", "eof")) == (pattern(CUT), True)
    assert p.drops == 1


def test_a_needle_split_across_two_sends_arms(proxy: Callable[..., DropProxy]) -> None:
    p = proxy()
    with connect(p) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(b"%d %s" % (BIG, NEEDLE[:5]))
        time.sleep(0.1)
        sock.sendall(NEEDLE[5:] + b"\n")
        data, end = receive(sock, BIG)
    assert (data, end in ("reset", "eof")) == (pattern(CUT), True)
    assert p.drops == 1


def test_after_max_drops_it_is_a_plain_proxy(proxy: Callable[..., DropProxy]) -> None:
    p = proxy(max_drops=1)
    with connect(p) as sock:
        sock.sendall(b"%d %s\n" % (BIG, NEEDLE))
        assert len(receive(sock, BIG)[0]) == CUT
    with connect(p) as sock:
        for _ in range(2):
            sock.sendall(b"%d %s\n" % (BIG, NEEDLE))
            assert receive(sock, BIG) == (pattern(BIG), "limit")
    assert p.drops == 1


def test_a_small_reply_passes_and_the_next_big_one_is_cut(
    proxy: Callable[..., DropProxy],
) -> None:
    p = proxy()
    with connect(p) as sock:
        sock.sendall(b"5 %s\n" % NEEDLE)
        assert receive(sock, 5) == (pattern(5), "limit")
        assert p.drops == 0
        sock.sendall(b"%d plain\n" % BIG)
        data, end = receive(sock, BIG)
    # cut_after counts every server->client byte since the connection was armed
    assert (data, end in ("reset", "eof")) == (pattern(CUT - 5), True)
    assert p.drops == 1


def test_stop_is_prompt_with_an_open_connection_and_idempotent(server: LineServer) -> None:
    p = DropProxy(server.port, NEEDLE, CUT)
    with p, connect(p) as sock:
        sock.sendall(b"0 ping\n")
        assert receive(sock, 5) == (b"ping\n", "limit")
        started = time.monotonic()
        p.stop()
        assert time.monotonic() - started < 2.0
        assert receive(sock, 1)[1] in ("eof", "reset")
        p.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("drop-proxy")]
    with pytest.raises(DropProxyError):
        p.start()


@pytest.mark.parametrize(
    ("needle", "cut_after", "max_drops"), [(b"", 1, 1), (NEEDLE, 0, 1), (NEEDLE, 1, -1)]
)
def test_bad_arguments_raise_value_error(needle: bytes, cut_after: int, max_drops: int) -> None:
    with pytest.raises(ValueError):
        DropProxy(1, needle, cut_after, max_drops=max_drops)


def test_an_unreachable_upstream_closes_that_connection_only() -> None:
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        dead_port = spare.getsockname()[1]  # bound, never listening: connects are refused
        with DropProxy(dead_port, NEEDLE, CUT) as p:
            for _ in range(2):
                with connect(p) as sock:
                    assert receive(sock, 1)[1] in ("eof", "reset")
