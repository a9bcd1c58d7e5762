"""The reference cache server (SPEC "The protocol on a connection"): ``lmckv serve``.

One asyncio event loop serves every connection. Each request header is read and checked
with the ClientMetaMessage reader (PROTO-SRV-BAD-HEADER); a PUT's payload is read in
pieces of at most :data:`READ_PIECE` bytes and stored only once complete
(PROTO-SRV-NO-PARTIAL, PROTO-SRV-UNTRUSTED-LENGTH); the store holds at most
``capacity_bytes`` payload bytes and evicts least recently used values to make room
(PROTO-SRV-CAPACITY). A connection stalled mid-frame past ``idle_timeout`` is closed, and at
most ``max_connections`` are open at once (PROTO-SRV-IDLE).

:func:`handle_requests` serves one connection from any ``asyncio.StreamReader`` and any
object with ``write``/``drain``/``close``, so tests and the fuzzer drive it without sockets.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
import sys
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from lmckv.reference_impl.protocol.client_message import CLIENT_META_STRUCT, ClientMetaMessage
from lmckv.reference_impl.protocol.commands import ClientCommand, ServerReturnCode
from lmckv.reference_impl.protocol.errors import ProtocolError
from lmckv.reference_impl.protocol.framing import MAX_WIRE_LENGTH, empty_reply, expected_length
from lmckv.reference_impl.protocol.memory_format import MemoryFormat
from lmckv.reference_impl.protocol.server_message import ServerMetaMessage

#: The most payload bytes read (and held beyond those already received) at once.
READ_PIECE = 256 * 1024
#: The stream reader's buffer: how far the transport reads ahead of the handler.
READ_AHEAD = 1 << 20
DEFAULT_CAPACITY = 1 << 30
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_IDLE_TIMEOUT = 30.0
HEADER_SIZE = CLIENT_META_STRUCT.size
#: What a value costs beyond its payload (its key and bookkeeping), so that many empty
#: values are bounded too.
ENTRY_OVERHEAD = 256


@dataclass
class ServerConfig:
    """What ``lmckv serve`` is started with."""

    host: str = "127.0.0.1"
    port: int = 0
    capacity_bytes: int = DEFAULT_CAPACITY
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT

    def __post_init__(self) -> None:
        if self.capacity_bytes < 0:
            raise ValueError("capacity_bytes must be >= 0")
        if self.max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        if not self.idle_timeout > 0:
            raise ValueError("idle_timeout must be > 0")

    @property
    def max_value_bytes(self) -> int:
        """The largest PUT accepted: the capacity, at most what a length field can say."""
        return max(0, min(self.capacity_bytes - ENTRY_OVERHEAD, MAX_WIRE_LENGTH))


@dataclass(frozen=True)
class Entry:
    """One stored value: the PUT's fmt, dtype and four shape slots, and its bytes."""

    fmt: MemoryFormat
    dtype: torch.dtype | None
    slots: tuple[int, int, int, int]
    data: bytes
    #: The GET reply header, written once at PUT time.
    reply: bytes = b""


@dataclass
class Store:
    """Values by key string, least recently used first; ``size`` (payload bytes plus
    :data:`ENTRY_OVERHEAD` per value) stays at most ``capacity``."""

    capacity: int
    entries: OrderedDict[str, Entry] = field(default_factory=OrderedDict)
    size: int = 0
    evictions: int = 0

    def put(self, key: str, entry: Entry) -> bool:
        """Store ``entry`` (replacing ``key``'s value), evicting LRU values to fit; False
        (nothing changed) when the value alone exceeds the capacity."""
        cost = len(entry.data) + ENTRY_OVERHEAD
        if cost > self.capacity:
            return False
        old = self.entries.pop(key, None)
        if old is not None:
            self.size -= len(old.data) + ENTRY_OVERHEAD
        while self.size + cost > self.capacity:
            _, evicted = self.entries.popitem(last=False)
            self.size -= len(evicted.data) + ENTRY_OVERHEAD
            self.evictions += 1
        self.entries[key] = entry
        self.size += cost
        return True

    def get(self, key: str) -> Entry | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
        return entry

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def keys(self) -> list[str]:
        return list(self.entries)


class ReplySink(Protocol):
    """The part of ``asyncio.StreamWriter`` the handler uses."""

    def write(self, data: bytes | bytearray | memoryview) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class CloseConnection(Exception):
    """Internal: the request cannot be served; the connection is closed (no reply)."""


_EMPTY_REPLIES = {code: empty_reply(code) for code in ServerReturnCode}


def _reply(code: ServerReturnCode, entry: Entry | None = None) -> bytes:
    if entry is None:
        return _EMPTY_REPLIES[code]
    return ServerMetaMessage(
        code, len(entry.data), entry.fmt, entry.dtype, torch.Size(entry.slots)
    ).serialize()


def _list_reply(keys: list[str]) -> tuple[bytes, bytes]:
    payload = "\n".join(keys).encode("utf-8")
    header = ServerMetaMessage(
        ServerReturnCode.SUCCESS,
        len(payload),
        MemoryFormat.BINARY,
        None,
        torch.Size([len(payload), 0, 0, 0]),
    ).serialize()
    return header, payload


async def _read_header(reader: asyncio.StreamReader, idle: float) -> bytes | None:
    """The next 186-byte header; None at a clean end of stream (between requests). A
    connection idle between requests may stay; one stalled inside a header may not."""
    first = await reader.read(1)
    if not first:
        return None
    try:
        async with asyncio.timeout(idle):
            rest = await reader.readexactly(HEADER_SIZE - 1)
    except (asyncio.IncompleteReadError, TimeoutError) as exc:
        raise CloseConnection("header cut short or stalled") from exc
    return first + rest


async def _read_payload(reader: asyncio.StreamReader, length: int, idle: float) -> bytes:
    """Exactly ``length`` bytes, read in pieces of at most READ_PIECE: memory grows with
    what arrives, never by the length field (PROTO-SRV-UNTRUSTED-LENGTH)."""
    pieces: list[bytes] = []
    left = length
    while left > 0:
        try:
            async with asyncio.timeout(idle):
                piece = await reader.readexactly(min(READ_PIECE, left))
        except TimeoutError as exc:
            raise CloseConnection("payload stalled") from exc
        except asyncio.IncompleteReadError as exc:
            raise CloseConnection("payload cut short") from exc
        pieces.append(piece)
        left -= len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


async def handle_requests(
    reader: asyncio.StreamReader,
    writer: ReplySink,
    store: Store,
    config: ServerConfig,
) -> str:
    """Serve one connection until it ends; returns why it ended. Raises only for bugs:
    every malformed input ends the connection (CloseConnection, ProtocolError)."""
    try:
        while True:
            header = await _read_header(reader, config.idle_timeout)
            if header is None:
                return "end of stream"
            meta = ClientMetaMessage.deserialize(header)  # PROTO-SRV-BAD-HEADER
            slots = CLIENT_META_STRUCT.unpack(header)[5:9]
            key = meta.key.to_string()
            if meta.command != ClientCommand.PUT and meta.length != 0:
                raise CloseConnection(f"{meta.command.name} with length {meta.length}")
            if meta.command == ClientCommand.PUT:
                if meta.length > config.max_value_bytes:
                    raise CloseConnection(f"length {meta.length} above the largest value")
                wanted = expected_length(meta.fmt, meta.dtype, meta.shape)
                if wanted is not None and wanted != meta.length:
                    raise CloseConnection(f"length {meta.length} but shape x dtype {wanted}")
                data = await _read_payload(reader, meta.length, config.idle_timeout)
                entry = Entry(meta.fmt, meta.dtype, (slots[0], slots[1], slots[2], slots[3]), data)
                entry = dataclasses.replace(entry, reply=_reply(ServerReturnCode.SUCCESS, entry))
                store.put(key, entry)
                continue
            if meta.command == ClientCommand.GET:
                found = store.get(key)
                if found is None:
                    writer.write(_reply(ServerReturnCode.FAIL))
                else:
                    writer.write(found.reply or _reply(ServerReturnCode.SUCCESS, found))
                    writer.write(found.data)
            elif meta.command == ClientCommand.EXIST:
                code = ServerReturnCode.SUCCESS if key in store else ServerReturnCode.FAIL
                writer.write(_reply(code))
            elif meta.command == ClientCommand.HEALTH:
                writer.write(_reply(ServerReturnCode.SUCCESS))
            else:  # LIST: the table has no other command
                head, payload = _list_reply(store.keys())
                writer.write(head)
                writer.write(payload)
            try:
                async with asyncio.timeout(config.idle_timeout):
                    await writer.drain()
            except TimeoutError as exc:
                raise CloseConnection("the client does not read its replies") from exc
    except CloseConnection as exc:
        return str(exc)
    except ProtocolError as exc:
        return f"bad header: {exc}"
    except (ConnectionError, asyncio.IncompleteReadError) as exc:
        return f"connection lost: {exc!r}"
    finally:
        writer.close()


class CacheServer:
    """The listening server: one task per connection, a connection limit, a stop."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.store = Store(config.capacity_bytes)
        self.active: set[asyncio.StreamWriter] = set()
        self.refused = 0
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(
            self._connection, self.config.host, self.config.port, limit=READ_AHEAD
        )
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.active) >= self.config.max_connections:
            self.refused += 1
            writer.close()
            return
        self.active.add(writer)
        try:
            await handle_requests(reader, writer, self.store, self.config)
        except Exception as exc:  # a bug: this connection ends, the server goes on
            print(f"lmckv serve: connection handler failed: {exc!r}", file=sys.stderr)
            writer.close()
        finally:
            self.active.discard(writer)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self.active):
            writer.close()
        if self._server is not None:
            await asyncio.wait_for(self._server.wait_closed(), 5)


async def serve(config: ServerConfig, ready: Callable[[str, int], None] | None = None) -> None:
    """Run until SIGTERM or SIGINT."""
    server = CacheServer(config)
    host, port = await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if ready is not None:
        ready(host, port)
    await stop.wait()
    await server.stop()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lmckv serve",
        description="Run the reference LMCache cache server (lm:// protocol). It prints "
        "'listening on HOST:PORT' once it accepts connections; SIGTERM stops it.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, required=True, help="port (0: any free port)")
    parser.add_argument(
        "--capacity-bytes",
        type=int,
        default=DEFAULT_CAPACITY,
        help="payload bytes stored at most; least recently used values are evicted",
    )
    parser.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS)
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT,
        help="seconds a connection may stall inside a request",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = ServerConfig(
            args.host, args.port, args.capacity_bytes, args.max_connections, args.idle_timeout
        )
    except ValueError as exc:
        print(f"lmckv serve: {exc}", file=sys.stderr)
        return 2

    def ready(host: str, port: int) -> None:
        print(f"lmckv serve: listening on {host}:{port}", flush=True)

    try:
        asyncio.run(serve(config, ready))
    except OSError as exc:
        print(f"lmckv serve: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
