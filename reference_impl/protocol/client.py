"""The reference cache client (SPEC "The protocol on a connection").

A blocking client on one TCP connection. It reads whole reply frames however the bytes
are split (PROTO-CLI-WHOLE-FRAMES), treats a connection that ends inside a frame as an
error (PROTO-CLI-EARLY-CLOSE), checks every reply header and a GET's length against shape,
dtype and ``max_value_bytes`` before it allocates anything (PROTO-CLI-REPLY-CHECK), and
closes the connection after any such error, since its framing is lost.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

import torch

from .cache_key import (
    CacheEngineKey,
    LayerCacheEngineKey,
    parse_cache_key,
)
from .client_message import ClientMetaMessage
from .commands import ClientCommand, ServerReturnCode
from .errors import ProtocolError
from .framing import CONTROL_KEY, MAX_WIRE_LENGTH, expected_length
from .memory_format import MemoryFormat
from .server_message import SERVER_META_STRUCT, ServerMetaMessage

#: Payload bytes received per read call at most.
READ_PIECE = 1 << 20


class ReplyError(ProtocolError):
    """A reply could not be read or was refused; the connection is closed."""


@dataclass(frozen=True)
class Value:
    """A value as a GET returns it."""

    fmt: MemoryFormat
    dtype: torch.dtype | None
    shape: torch.Size
    data: bytes


KeyLike = CacheEngineKey | LayerCacheEngineKey | str


def _key(key: KeyLike) -> CacheEngineKey | LayerCacheEngineKey:
    return parse_cache_key(key) if isinstance(key, str) else key


class CacheClient:
    """One connection to a cache server. Not thread-safe: one request at a time."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float | None = 10.0,
        max_value_bytes: int = MAX_WIRE_LENGTH,
    ) -> None:
        self.max_value_bytes = max_value_bytes
        self._sock: socket.socket | None = socket.create_connection((host, port), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # -- requests -------------------------------------------------------------------------

    def put(
        self,
        key: KeyLike,
        data: bytes | bytearray | memoryview,
        fmt: MemoryFormat,
        dtype: torch.dtype | None,
        shape: Sequence[int],
    ) -> None:
        """Send a PUT (no reply comes)."""
        payload = memoryview(data).cast("B")
        header = ClientMetaMessage(
            ClientCommand.PUT, _key(key), len(payload), fmt, dtype, torch.Size(shape)
        ).serialize()
        self._send(header, payload)

    def get(self, key: KeyLike) -> Value | None:
        """The stored value, or None when the server answers 400."""
        meta = self._request(ClientCommand.GET, _key(key))
        if meta.code != ServerReturnCode.SUCCESS:
            self._expect_empty(meta)
            return None
        wanted = expected_length(meta.fmt, meta.dtype, meta.shape)
        if wanted is not None and wanted != meta.length:
            self._fail(f"reply length {meta.length} but shape x dtype is {wanted}")
        if meta.length > self.max_value_bytes:
            self._fail(f"reply length {meta.length} above max_value_bytes {self.max_value_bytes}")
        return Value(meta.fmt, meta.dtype, meta.shape, self._read_exactly(meta.length))

    def exists(self, key: KeyLike) -> bool:
        meta = self._request(ClientCommand.EXIST, _key(key))
        self._expect_empty(meta)
        return meta.code == ServerReturnCode.SUCCESS

    def health(self) -> bool:
        meta = self._request(ClientCommand.HEALTH, parse_cache_key(CONTROL_KEY))
        self._expect_empty(meta)
        return meta.code == ServerReturnCode.SUCCESS

    def list_keys(self) -> list[str] | None:
        """The server's keys, or None from a server that does not list (400)."""
        meta = self._request(ClientCommand.LIST, parse_cache_key(CONTROL_KEY))
        if meta.code != ServerReturnCode.SUCCESS:
            self._expect_empty(meta)
            return None
        if meta.length > self.max_value_bytes:
            self._fail(f"LIST length {meta.length} above max_value_bytes")
        raw = self._read_exactly(meta.length)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            self._fail("LIST payload is not UTF-8")
        return text.split("\n") if text else []

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> CacheClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- framing --------------------------------------------------------------------------

    def _request(
        self, command: ClientCommand, key: CacheEngineKey | LayerCacheEngineKey
    ) -> ServerMetaMessage:
        header = ClientMetaMessage(
            command, key, 0, MemoryFormat.KV_2LTD, torch.float16, torch.Size([0, 0, 0, 0])
        ).serialize()
        self._send(header)
        raw = self._read_exactly(SERVER_META_STRUCT.size)
        try:
            return ServerMetaMessage.deserialize(raw)
        except ProtocolError as exc:
            self._fail(f"bad reply header: {exc}")

    def _expect_empty(self, meta: ServerMetaMessage) -> None:
        if meta.length != 0:
            self._fail(f"reply {int(meta.code)} announces {meta.length} payload bytes")

    def _send(self, *parts: bytes | memoryview) -> None:
        sock = self._live()
        try:
            for part in parts:
                sock.sendall(part)
        except OSError as exc:
            self._fail(f"send failed: {exc!r}")

    def _read_exactly(self, n: int) -> bytes:
        """Exactly ``n`` bytes (``n`` already checked), through any number of reads; the
        buffer grows with what arrives, one piece at a time."""
        sock = self._live()
        buf = bytearray()
        while len(buf) < n:
            try:
                piece = sock.recv(min(READ_PIECE, n - len(buf)))
            except OSError as exc:
                self._fail(f"read failed after {len(buf)} of {n} bytes: {exc!r}")
            if not piece:
                self._fail(f"connection closed after {len(buf)} of {n} bytes")
            buf += piece
        return bytes(buf)

    def _live(self) -> socket.socket:
        if self._sock is None:
            raise ReplyError("the connection is closed")
        return self._sock

    def _fail(self, message: str) -> NoReturn:
        self.close()
        raise ReplyError(message)
