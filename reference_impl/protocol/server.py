"""The reference cache server (SPEC "The protocol on a connection"): ``lmckv serve``.

One asyncio event loop serves every connection. Each request header is read and checked
with the ClientMetaMessage reader (PROTO-SRV-BAD-HEADER); a PUT's payload is read in
pieces of at most :data:`READ_PIECE` bytes and stored only once complete
(PROTO-SRV-NO-PARTIAL, PROTO-SRV-UNTRUSTED-LENGTH). Everything a peer can make the server
hold is charged to one budget of ``capacity_bytes`` (``server_budget``): stored values, a
PUT's payload from the moment its header announces it, and replies being sent
(PROTO-SRV-CAPACITY, PROTO-SRV-BUDGET); least recently used values are evicted to make
room. Each wait on a peer has a deadline (PROTO-SRV-IDLE, PROTO-SRV-DEADLINES), and at most
``max_connections`` are open at once, a new one reclaiming the slot of a connection that
sends nothing (PROTO-SRV-SLOTS). Besides the budget, each connection holds at most
:data:`CONNECTION_BYTES` of buffers (PROTO-SRV-MEMORY).

:func:`handle_requests` serves one connection from any ``asyncio.StreamReader`` and any
object with ``write``/``drain``/``close``, so tests and the fuzzer drive it without sockets.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from .client_message import CLIENT_META_STRUCT, ClientMetaMessage
from .commands import ClientCommand, ServerReturnCode
from .errors import ProtocolError
from .framing import MAX_WIRE_LENGTH, empty_reply, expected_length
from .memory_format import MemoryFormat
from .server_budget import (
    ENTRY_OVERHEAD,
    Entry,
    Reservation,
    Slot,
    Slots,
    Store,
)
from .server_message import ServerMetaMessage

__all__ = [
    "ENTRY_OVERHEAD",
    "CacheServer",
    "Entry",
    "ServerConfig",
    "Store",
    "handle_requests",
    "serve",
]

#: The most payload bytes read (and held beyond those already received) at once.
READ_PIECE = 256 * 1024
#: The stream reader's limit: it stops reading from the socket past twice this, except
#: while a piece of up to READ_PIECE bytes is awaited.
READ_AHEAD = 64 * 1024
#: A reply's payload is handed to the transport in pieces of this many bytes, each once
#: the transport holds at most WRITE_HIGH_WATER unsent bytes.
WRITE_PIECE = 64 * 1024
WRITE_HIGH_WATER = 64 * 1024
#: What one connection's buffers hold at most beyond its budget charges: the reader's
#: buffer (a piece being awaited plus one 256 KiB socket read) and the transport's unsent
#: bytes (the high-water mark plus one piece) (PROTO-SRV-MEMORY).
CONNECTION_BYTES = READ_PIECE + 256 * 1024 + WRITE_HIGH_WATER + WRITE_PIECE
#: What the process holds before any peer connects (the interpreter, torch, the loop),
#: stated with a margin over the 222 MiB measured on Linux x86-64 (PROTO-SRV-MEMORY).
BASE_BYTES = 320 << 20
DEFAULT_CAPACITY = 1 << 30
#: Connections the kernel queues before they are accepted: a flood of connections that
#: are accepted and reclaimed must not make a client's connect wait for a SYN retry.
LISTEN_BACKLOG = 1024
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_IDLE_TIMEOUT = 30.0
DEFAULT_WAIT_TIMEOUT = 120.0
HEADER_SIZE = CLIENT_META_STRUCT.size


@dataclass
class ServerConfig:
    """What ``lmckv serve`` is started with. ``idle_timeout`` bounds each wait inside a
    request (the header from its first byte, each payload piece, each reply piece);
    ``wait_timeout`` the wait for the first byte of a request (PROTO-SRV-DEADLINES)."""

    host: str = "127.0.0.1"
    port: int = 0
    capacity_bytes: int = DEFAULT_CAPACITY
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT

    def __post_init__(self) -> None:
        if self.capacity_bytes < 0:
            raise ValueError("capacity_bytes must be >= 0")
        if self.max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        if not self.idle_timeout > 0:
            raise ValueError("idle_timeout must be > 0")
        if not self.wait_timeout > 0:
            raise ValueError("wait_timeout must be > 0")

    @property
    def memory_bound(self) -> int:
        """The most the process holds: the capacity, the base, and every connection's
        buffers (PROTO-SRV-MEMORY)."""
        return self.capacity_bytes + BASE_BYTES + self.max_connections * CONNECTION_BYTES

    @property
    def max_value_bytes(self) -> int:
        """The largest PUT accepted: the capacity, at most what a length field can say."""
        return max(0, min(self.capacity_bytes - ENTRY_OVERHEAD, MAX_WIRE_LENGTH))


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


async def _read_header(
    reader: asyncio.StreamReader, config: ServerConfig, slot: Slot | None
) -> bytes | None:
    """The next 186-byte header; None at a clean end of stream (between requests). The
    first byte is awaited at most ``wait_timeout``, the rest at most ``idle_timeout`` from
    it (PROTO-SRV-DEADLINES, PROTO-SRV-IDLE)."""
    try:
        async with asyncio.timeout(config.wait_timeout):
            first = await reader.read(1)
    except TimeoutError as exc:
        raise CloseConnection("no request within the wait timeout") from exc
    if not first:
        return None
    if slot is not None:
        slot.begin()
    try:
        async with asyncio.timeout(config.idle_timeout):
            rest = await reader.readexactly(HEADER_SIZE - 1)
    except (asyncio.IncompleteReadError, TimeoutError) as exc:
        raise CloseConnection("header cut short or stalled") from exc
    return first + rest


async def _read_payload(
    reader: asyncio.StreamReader, length: int, idle: float, held: Reservation
) -> bytearray:
    """Exactly ``length`` bytes, read in pieces of at most READ_PIECE, each within ``idle``
    seconds (each marks progress on ``held``): memory grows with what arrives, never by
    the length field (PROTO-SRV-UNTRUSTED-LENGTH, PROTO-SRV-DEADLINES)."""
    data = bytearray()
    while len(data) < length:
        try:
            async with asyncio.timeout(idle):
                data += await reader.readexactly(min(READ_PIECE, length - len(data)))
            held.progress = time.monotonic()
        except TimeoutError as exc:
            raise CloseConnection("payload stalled") from exc
        except asyncio.IncompleteReadError as exc:
            raise CloseConnection("payload cut short") from exc
    return data


async def _send(writer: ReplySink, parts: Sequence[bytes | bytearray], idle: float) -> None:
    """Hand ``parts`` to the transport in pieces of WRITE_PIECE, each once the peer has
    taken the previous ones, within ``idle`` seconds (PROTO-SRV-DEADLINES)."""
    for part in parts:
        view = memoryview(part)
        for at in range(0, max(len(view), 1), WRITE_PIECE):
            writer.write(view[at : at + WRITE_PIECE])
            try:
                async with asyncio.timeout(idle):
                    await writer.drain()
            except TimeoutError as exc:
                raise CloseConnection("the client does not read its replies") from exc


async def _put(
    reader: asyncio.StreamReader,
    writer: ReplySink,
    meta: ClientMetaMessage,
    slots: tuple[int, int, int, int],
    store: Store,
    config: ServerConfig,
) -> None:
    """Read and store one PUT's payload, its bytes charged from the header on
    (PROTO-SRV-BUDGET)."""
    if meta.length > config.max_value_bytes:
        raise CloseConnection(f"length {meta.length} above the largest value")
    wanted = expected_length(meta.fmt, meta.dtype, meta.shape)
    if wanted is not None and wanted != meta.length:
        raise CloseConnection(f"length {meta.length} but shape x dtype {wanted}")
    held = store.reserve(meta.length + ENTRY_OVERHEAD, abort=writer.close)
    if held is None:
        raise CloseConnection(f"no room in the budget for {meta.length} payload bytes")
    try:
        data = await _read_payload(reader, meta.length, config.idle_timeout, held)
    except BaseException:
        store.release(held)  # nothing when it was reclaimed already
        raise
    if not held.live:  # reclaimed as it completed: the connection is closing
        raise CloseConnection("payload stalled while another PUT needed its room")
    entry = Entry(meta.fmt, meta.dtype, slots, data)
    entry.reply = _reply(ServerReturnCode.SUCCESS, entry)
    store.commit(meta.key.to_string(), entry, held)


async def _get(writer: ReplySink, key: str, store: Store, config: ServerConfig) -> None:
    """Send a GET reply; the value is pinned (kept charged) while it is sent."""
    found = store.get(key)
    if found is None:
        await _send(writer, [_reply(ServerReturnCode.FAIL)], config.idle_timeout)
        return
    store.pin(found)
    try:
        await _send(writer, [found.reply, found.data], config.idle_timeout)
    finally:
        store.unpin(found)


async def _list(writer: ReplySink, store: Store, config: ServerConfig) -> None:
    """Send a LIST reply, its payload charged while it is sent; 400 when the budget has
    no room for it (PROTO-SRV-LIST, PROTO-SRV-BUDGET)."""
    keys = store.keys()
    size = max(len(keys) - 1, 0) + sum(len(k.encode("utf-8")) for k in keys)
    held = store.reserve(size)
    if held is None:
        await _send(writer, [_reply(ServerReturnCode.FAIL)], config.idle_timeout)
        return
    try:
        head, payload = _list_reply(keys)
        del keys
        await _send(writer, [head, payload], config.idle_timeout)
    finally:
        store.release(held)


async def handle_requests(
    reader: asyncio.StreamReader,
    writer: ReplySink,
    store: Store,
    config: ServerConfig,
    slot: Slot | None = None,
) -> str:
    """Serve one connection until it ends; returns why it ended. Raises only for bugs:
    every malformed input ends the connection (CloseConnection, ProtocolError)."""
    try:
        while True:
            header = await _read_header(reader, config, slot)
            if header is None:
                return "end of stream"
            meta = ClientMetaMessage.deserialize(header)  # PROTO-SRV-BAD-HEADER
            if meta.command != ClientCommand.PUT and meta.length != 0:
                raise CloseConnection(f"{meta.command.name} with length {meta.length}")
            if meta.command == ClientCommand.PUT:
                s = CLIENT_META_STRUCT.unpack(header)[5:9]
                await _put(reader, writer, meta, (s[0], s[1], s[2], s[3]), store, config)
            elif meta.command == ClientCommand.GET:
                await _get(writer, meta.key.to_string(), store, config)
            elif meta.command == ClientCommand.EXIST:
                stored = meta.key.to_string() in store
                code = ServerReturnCode.SUCCESS if stored else ServerReturnCode.FAIL
                await _send(writer, [_reply(code)], config.idle_timeout)
            elif meta.command == ClientCommand.HEALTH:
                await _send(writer, [_reply(ServerReturnCode.SUCCESS)], config.idle_timeout)
            else:  # LIST: the table has no other command
                await _list(writer, store, config)
            if slot is not None:
                slot.end()
    except CloseConnection as exc:
        return str(exc)
    except ProtocolError as exc:
        return f"bad header: {exc}"
    except (ConnectionError, asyncio.IncompleteReadError) as exc:
        return f"connection lost: {exc!r}"
    finally:
        writer.close()


class CacheServer:
    """The listening server: one task per connection, the slot table, a stop."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.store = Store(config.capacity_bytes)
        self.slots = Slots(config.max_connections)
        self.active: set[asyncio.StreamWriter] = set()
        self._server: asyncio.base_events.Server | None = None

    @property
    def refused(self) -> int:
        return self.slots.refused

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(
            self._connection,
            self.config.host,
            self.config.port,
            limit=READ_AHEAD,
            backlog=LISTEN_BACKLOG,
        )
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    def _admit(self, writer: asyncio.StreamWriter) -> Slot | None:
        """A slot for a new connection, reclaimed from another when all are taken; None
        when none can be (PROTO-SRV-SLOTS)."""
        if len(self.slots.open) >= self.slots.limit:
            victim = self.slots.victim()
            if victim is None:
                self.slots.refused += 1
                return None
            self.slots.open.remove(victim)
            self.slots.reclaimed += 1
            if victim.close is not None:
                victim.close()
        now = time.monotonic()
        slot = Slot(opened=now, idle_since=now, close=writer.transport.abort)
        self.slots.open.append(slot)
        return slot

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        slot = self._admit(writer)
        if slot is None:
            writer.transport.abort()
            return
        writer.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self.active.add(writer)
        try:
            await handle_requests(reader, writer, self.store, self.config, slot)
        except Exception as exc:  # a bug: this connection ends, the server goes on
            print(f"lmckv serve: connection handler failed: {exc!r}", file=sys.stderr)
        finally:
            writer.close()
            # close() waits for unsent bytes; a peer that never reads them is cut off.
            asyncio.get_running_loop().call_later(self.config.idle_timeout, writer.transport.abort)
            self.active.discard(writer)
            if slot in self.slots.open:
                self.slots.open.remove(slot)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self.active):
            writer.transport.abort()
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
