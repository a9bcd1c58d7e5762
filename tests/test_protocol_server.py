"""The reference server's bounds, in process: the LRU store at its capacity, the connection
limit, the idle timeout, and ``lmckv serve``'s argument checks. (Its behaviour on the
wire is the conformance suite's: conformance/suite/test_server.py.)"""

from __future__ import annotations

import asyncio
import struct
import time

import pytest
import torch

from lmckv.conformance.operator.serve_command import main
from lmckv.reference_impl.protocol import server_budget
from lmckv.reference_impl.protocol.memory_format import MemoryFormat
from lmckv.reference_impl.protocol.server import (
    ENTRY_OVERHEAD,
    CacheServer,
    Entry,
    ServerConfig,
    Store,
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


def test_slot_reclaimed_from_a_silent_connection_and_idle_timeout() -> None:
    """PROTO-SRV-SLOTS: with both slots taken, a third connection takes the slot of the
    oldest connection that never completed a request; once every slot has completed a
    request and is inside another, a new connection is refused. PROTO-SRV-IDLE: a
    stalled header is closed."""

    async def scenario() -> tuple[bytes, bytes, bytes, bytes]:
        server = CacheServer(ServerConfig(port=0, max_connections=2, idle_timeout=0.3))
        host, port = await server.start()
        try:
            first = await asyncio.open_connection(host, port)
            await asyncio.sleep(0.05)
            second = await asyncio.open_connection(host, port)
            await asyncio.sleep(0.05)
            third = await asyncio.open_connection(host, port)
            reclaimed = await asyncio.wait_for(first[0].read(), 2)  # first's slot: b""
            third[1].write(HEALTH)
            reply = await asyncio.wait_for(third[0].readexactly(36), 2)
            second[1].write(HEALTH)
            await asyncio.wait_for(second[0].readexactly(36), 2)
            second[1].write(HEALTH[:10])  # stalls inside a header
            third[1].write(HEALTH[:10])  # both slots served a request and are inside one
            await asyncio.sleep(0.05)
            fourth = await asyncio.open_connection(host, port)
            refused = await asyncio.wait_for(fourth[0].read(), 2)
            stalled = await asyncio.wait_for(second[0].read(), 2)  # closed after 0.3 s
            for _, writer in (first, second, third, fourth):
                writer.close()
            assert server.slots.reclaimed == 1 and server.refused == 1
            return reclaimed, reply, refused, stalled
        finally:
            await server.stop()

    reclaimed, reply, refused, stalled = asyncio.run(scenario())
    assert reclaimed == b"" and refused == b"" and stalled == b""
    assert struct.unpack("<2i", reply[:8]) == (200, 0)


def test_wait_timeout_closes_a_silent_connection() -> None:
    """PROTO-SRV-DEADLINES: no first byte within the wait timeout closes the connection."""

    async def scenario() -> float:
        server = CacheServer(ServerConfig(port=0, wait_timeout=0.2, idle_timeout=5))
        host, port = await server.start()
        try:
            reader, writer = await asyncio.open_connection(host, port)
            began = time.monotonic()
            assert await asyncio.wait_for(reader.read(), 3) == b""
            writer.close()
            return time.monotonic() - began
        finally:
            await server.stop()

    assert 0.15 < asyncio.run(scenario()) < 2


def test_budget_charges_payloads_in_flight_and_pinned_replies() -> None:
    """PROTO-SRV-BUDGET: a reservation evicts unpinned values only; a replaced value that
    a reply still sends stays charged until it is sent."""
    store = Store(4 * (100 + ENTRY_OVERHEAD))
    assert store.put("a", _entry(100)) and store.put("b", _entry(100))
    pinned = store.get("a")
    assert pinned is not None
    store.pin(pinned)
    held = store.reserve(2 * (100 + ENTRY_OVERHEAD))  # fits beside a and b
    assert held is not None
    assert store.reserve(2 * (100 + ENTRY_OVERHEAD)) is None  # b evicted, a pinned: no room
    assert "b" not in store and "a" in store and store.refusals == 1
    store.release(held)
    assert store.put("a", _entry(100))  # replaces a while a reply still sends the old one
    assert store.lingering == 100 + ENTRY_OVERHEAD
    store.unpin(pinned)
    assert store.lingering == 0 and store.charged == store.size == 100 + ENTRY_OVERHEAD


def test_a_stalled_payload_is_reclaimed_for_another_put(monkeypatch: pytest.MonkeyPatch) -> None:
    """PROTO-SRV-BUDGET: a reservation that made no progress for STALL_GRACE is reclaimed
    (its connection aborted) when another PUT needs the room; a fresh one is not."""
    store = Store(1000)
    aborted: list[str] = []
    stalled = store.reserve(900, abort=lambda: aborted.append("stalled"))
    assert stalled is not None and store.reserve(500) is None and not aborted  # too fresh
    stalled.progress -= server_budget.STALL_GRACE
    held = store.reserve(500)
    assert held is not None and aborted == ["stalled"] and not stalled.live
    assert store.reclaims == 1 and store.reserved == 500
    assert not store.commit("k", _entry(10), stalled)  # its PUT cannot store any more
    assert store.commit("k", _entry(10), held) and store.reserved == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["--port", "0", "--capacity-bytes", "-1"],
        ["--port", "0", "--idle-timeout", "0"],
        ["--port", "0", "--wait-timeout", "0"],
    ],
)
def test_serve_refuses_bad_settings(argv: list[str]) -> None:
    assert main(argv) == 2
