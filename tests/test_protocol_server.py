"""The reference server's bounds, in process: the LRU store at its capacity, the connection
limit, the idle timeout, and ``lmckv serve``'s argument checks. (Its behaviour on the
wire is the conformance suite's: conformance/suite/test_server.py.)"""

from __future__ import annotations

import asyncio
import struct

import pytest
import torch

from lmckv.reference_impl.protocol.memory_format import MemoryFormat
from lmckv.reference_impl.protocol.server import (
    ENTRY_OVERHEAD,
    CacheServer,
    Entry,
    ServerConfig,
    Store,
    main,
)

HEALTH = struct.pack("<9i150s", 5, 0, 1, 2, 0, 0, 0, 0, 0, b"m@1@0@a@half".ljust(150))


def _entry(n: int) -> Entry:
    return Entry(MemoryFormat.BINARY, torch.uint8, (n, 0, 0, 0), b"v" * n)


def test_store_evicts_least_recently_used() -> None:
    store = Store(3 * (100 + ENTRY_OVERHEAD))
    for key in "abc":
        assert store.put(key, _entry(100))
    assert store.get("a") is not None  # a is now the most recently used
    assert store.put("d", _entry(100))
    assert store.keys() == ["c", "a", "d"] and store.evictions == 1
    assert store.size == 3 * (100 + ENTRY_OVERHEAD)


def test_store_refuses_a_value_above_capacity_and_replaces_in_place() -> None:
    store = Store(1000)
    assert not store.put("big", _entry(1000))
    assert store.put("k", _entry(10)) and store.put("k", _entry(20))
    assert store.size == 20 + ENTRY_OVERHEAD and list(store.entries) == ["k"]


def test_connection_limit_and_idle_timeout() -> None:
    async def scenario() -> tuple[bytes, bytes, bytes]:
        server = CacheServer(ServerConfig(port=0, max_connections=2, idle_timeout=0.3))
        host, port = await server.start()
        try:
            first = await asyncio.open_connection(host, port)
            second = await asyncio.open_connection(host, port)
            await asyncio.sleep(0.05)
            third = await asyncio.open_connection(host, port)
            refused = await asyncio.wait_for(third[0].read(), 2)  # closed at once: b""
            first[1].write(HEALTH)
            reply = await asyncio.wait_for(first[0].readexactly(36), 2)
            second[1].write(HEALTH[:10])  # stalls inside a header
            stalled = await asyncio.wait_for(second[0].read(), 2)  # closed after 0.3 s
            for _, writer in (first, second, third):
                writer.close()
            return refused, reply, stalled
        finally:
            await server.stop()

    refused, reply, stalled = asyncio.run(scenario())
    assert refused == b"" and stalled == b""
    assert struct.unpack("<2i", reply[:8]) == (200, 0)


@pytest.mark.parametrize(
    "argv", [["--port", "0", "--capacity-bytes", "-1"], ["--port", "0", "--idle-timeout", "0"]]
)
def test_serve_refuses_bad_settings(argv: list[str]) -> None:
    assert main(argv) == 2
