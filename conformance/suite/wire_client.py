"""The suite as a client of a server under test: raw frames (valid or not), connections
whose every read has a deadline, and the canary check that ends every hostile test.

Headers are packed here with ``struct`` directly, not with a reference writer, so that the
suite can send what no conforming writer would (negative lengths, unknown ids).
"""

from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..drivers.server_driver import ServerDriver

CLIENT_HEADER = struct.Struct("<9i150s")
SERVER_HEADER = struct.Struct("<9i")
PUT, GET, EXIST, LIST, HEALTH = 1, 2, 3, 4, 5
SUCCESS, FAIL = 200, 400
#: Seconds any single read or write may take.
IO_TIMEOUT = 3.0
CONTROL_KEY = "lmckv@1@0@0@half"
#: Dtype id -> size in bytes.
DTYPE_SIZE = {1: 2, 2: 2, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 1}


def header(
    command: int,
    length: int = 0,
    fmt: int = 1,
    dtype: int = 2,
    location: int = 0,
    slots: Sequence[int] = (0, 0, 0, 0),
    key: str | bytes = CONTROL_KEY,
) -> bytes:
    raw = key.encode("utf-8") if isinstance(key, str) else key
    return CLIENT_HEADER.pack(command, length, fmt, dtype, location, *slots, raw.ljust(150))


_rng = random.Random()


def unique_key(tag: str = "t") -> str:
    """A fresh, well-formed cache key (a random hash), so tests never share values."""
    return f"lmckv-{tag}@1@0@{_rng.getrandbits(60):x}@half"


def payload(n: int, seed: int | None = None) -> bytes:
    return random.Random(seed).randbytes(n) if seed is not None else _rng.randbytes(n)


@dataclass(frozen=True)
class Reply:
    code: int
    length: int
    fmt: int
    dtype: int
    slots: tuple[int, int, int, int]
    location: int
    data: bytes = b""


class ConnectionClosed(AssertionError):
    """The server closed the connection."""


class Conn:
    """One connection to the server under test; every operation has a deadline."""

    def __init__(self, address: tuple[str, int], timeout: float = IO_TIMEOUT) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            piece = self.sock.recv(min(1 << 20, n - len(buf)))
            if not piece:
                raise ConnectionClosed(f"connection closed after {len(buf)} of {n} bytes")
            buf += piece
        return bytes(buf)

    def reply(self, with_payload: bool = False) -> Reply:
        code, length, fmt, dtype, s0, s1, s2, s3, loc = SERVER_HEADER.unpack(self.recv_exact(36))
        data = b""
        if with_payload and code == SUCCESS:
            assert length >= 0, f"reply announces a negative length {length}"
            data = self.recv_exact(length)
        return Reply(code, length, fmt, dtype, (s0, s1, s2, s3), loc, data)

    def put(
        self,
        key: str,
        data: bytes,
        fmt: int = 1,
        dtype: int = 3,
        slots: Sequence[int] | None = None,
    ) -> None:
        if slots is None:
            slots = (len(data) // DTYPE_SIZE[dtype], 0, 0, 0)
        self.send(header(PUT, len(data), fmt, dtype, 0, slots, key) + data)

    def get(self, key: str) -> Reply:
        self.send(header(GET, key=key))
        return self.reply(with_payload=True)

    def exists(self, key: str) -> bool:
        self.send(header(EXIST, key=key))
        r = self.reply()
        assert r.code in (SUCCESS, FAIL) and r.length == 0, f"EXIST reply {r}"
        return r.code == SUCCESS

    def health(self) -> Reply:
        self.send(header(HEALTH))
        return self.reply()

    def closed_by_peer(self, within: float) -> bool:
        """True when the server closes the connection within ``within`` seconds (bytes it
        sends meanwhile are read and dropped)."""
        deadline = time.monotonic() + within
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                if not self.sock.recv(65536):
                    return True
            except TimeoutError:
                return False
            except OSError:
                return True
        return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def canary(server: ServerDriver) -> None:
    """A separate client checks that the server still serves correctly: PUT a fresh value,
    GET it back byte for byte, EXIST, a missing key, HEALTH (PROTO-SRV-ISOLATION)."""
    assert server.alive(), f"the server process died: {server.stderr_tail()}"
    key, value = unique_key("canary"), payload(4096)
    with Conn(server.address) as conn:
        conn.put(key, value, 1, 3, (2, 1, 16, 64))
        got = conn.get(key)
        assert (got.code, got.data) == (SUCCESS, value), f"canary GET returned {got.code}"
        assert conn.exists(key), "canary EXIST of a stored key is not 200"
        assert not conn.exists(unique_key("absent")), "canary EXIST of a missing key is 200"
        assert conn.health().code == SUCCESS, "canary HEALTH is not 200"
