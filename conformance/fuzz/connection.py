"""The fuzz target ``proto.server.connection``: the reference server's connection handler
(``handle_requests``) under a small budget, fed one byte stream.

The first byte selects the capacity (:data:`CAPACITIES`, by its value mod 4); the rest is
what a peer sends, cut at the end (a PUT whose payload is incomplete ends there). The
handler must end without raising, whatever the stream, and leave the budget as SPEC
"Bounds a peer cannot stretch" says: nothing reserved for a payload in flight or a reply
once the connection is over (PROTO-SRV-BUDGET), what is charged within the capacity, the
stored size the sum of the values' costs, and every reply a whole frame (PROTO-SRV-FRAMING).
One event loop serves every input, so an input costs microseconds, not a loop's start.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from ...reference_impl.protocol.commands import ServerReturnCode
from ...reference_impl.protocol.framing import expected_length
from ...reference_impl.protocol.server import ServerConfig, Store, handle_requests
from ...reference_impl.protocol.server_message import ServerMetaMessage

CAPACITIES = (0, 600, 4096, 65536)
_HEADER = struct.Struct("<9i150s")  # command, length, fmt, dtype, location, shape x 4, key
_KEYS = (b"m@1@0@a@half", b"m@1@0@b@half")
_loop: asyncio.AbstractEventLoop | None = None


class _Sink:
    """What the handler writes replies to."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.data += data

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True


async def _serve(stream: bytes, store: Store, config: ServerConfig) -> tuple[_Sink, str]:
    reader = asyncio.StreamReader(limit=1 << 16)
    reader.feed_data(stream)
    reader.feed_eof()
    sink = _Sink()
    return sink, await handle_requests(reader, sink, store, config)


def run(data: bytes) -> tuple[Store, _Sink, str]:
    """Serve ``data[1:]`` on a fresh store of the capacity ``data[0]`` selects."""
    global _loop
    if _loop is None:
        _loop = asyncio.new_event_loop()
    capacity = CAPACITIES[data[0] % len(CAPACITIES)] if data else CAPACITIES[0]
    config = ServerConfig(capacity_bytes=capacity, idle_timeout=1.0, wait_timeout=1.0)
    store = Store(capacity)
    sink, reason = _loop.run_until_complete(_serve(data[1:], store, config))
    return store, sink, reason


def check(data: bytes, value: tuple[Store, Any, str]) -> None:
    """The budget and framing invariants after the connection ended (an AssertionError,
    which the checker reports as a failed oracle, names each broken one)."""
    store, sink, reason = value
    problems = []
    if store.reserved or store.inflight or store.lingering:
        problems.append(
            f"after the connection: {store.reserved} reserved, {len(store.inflight)} "
            f"reservations, {store.lingering} lingering"
        )
    if store.charged > store.capacity:
        problems.append(f"charged {store.charged} above the capacity {store.capacity}")
    if store.size != sum(e.cost for e in store.entries.values()):
        problems.append(f"stored size {store.size} is not the sum of the values' costs")
    if not sink.closed:
        problems.append("the connection was not closed")
    problems += _frame_problems(bytes(sink.data))
    if problems:
        raise AssertionError(f"{'; '.join(problems)} (ended: {reason})")


def _frame_problems(raw: bytes) -> list[str]:
    view, pos = memoryview(raw), 0
    while pos < len(raw):
        if len(raw) - pos < 36:
            return ["a partial reply header"]
        meta = ServerMetaMessage.deserialize(view[pos : pos + 36])
        pos += 36
        if meta.code == ServerReturnCode.SUCCESS and meta.length:
            if len(raw) - pos < meta.length:
                return ["a reply payload cut short"]
            wanted = expected_length(meta.fmt, meta.dtype, meta.shape)
            if wanted is not None and wanted != meta.length:
                return [f"a reply of length {meta.length} for shape x dtype {wanted}"]
            pos += meta.length
    return []


def seeds() -> list[bytes]:
    """Streams of whole and cut requests under each capacity."""

    def frame(command: int, key: bytes, length: int = 0, fmt: int = 4, dtype: int = 6) -> bytes:
        return _HEADER.pack(command, length, fmt, dtype, 0, length, 0, 0, 0, key.ljust(150))

    put_get = frame(1, _KEYS[0], 100) + bytes(100) + frame(2, _KEYS[0])
    streams = [
        put_get + frame(3, _KEYS[0]) + frame(4, _KEYS[0]) + frame(5, _KEYS[0]),
        put_get + frame(1, _KEYS[1], 400) + bytes(400) + frame(1, _KEYS[0], 500) + bytes(10),
        frame(1, _KEYS[1], 3000) + bytes(3000) + frame(2, _KEYS[1]) + frame(4, _KEYS[1]),
        frame(5, _KEYS[0]) + frame(5, _KEYS[0])[:100],
        frame(1, _KEYS[0], 8, 1, 3) + bytes(8) + frame(2, _KEYS[0]),
    ]
    return [bytes([c]) + s for c in range(len(CAPACITIES)) for s in streams]
