"""Fuzzing the reference server's input, in process and without sockets: byte streams made
of valid, mutated and random frames, split at random points, are fed to the connection
handler through an ``asyncio.StreamReader``. Checked for every stream: no exception
escapes the handler; the replies are a sequence of valid ServerMetaMessage frames (with
exactly their payloads); the store stays within its capacity and holds only whole values
whose length fits their shape; memory allocated while handling stays within a bound that
does not depend on any length field (PROTO-SRV-UNTRUSTED-LENGTH)."""

from __future__ import annotations

import asyncio
import itertools
import struct
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmckv.reference_impl.protocol.commands import ServerReturnCode
from lmckv.reference_impl.protocol.framing import expected_length
from lmckv.reference_impl.protocol.server import (
    ENTRY_OVERHEAD,
    ServerConfig,
    Store,
    handle_requests,
)
from lmckv.reference_impl.protocol.server_message import ServerMetaMessage
from lmckv.reference_impl.protocol.shapes import strip_shape_padding

KEYS = [b"m@1@0@a@half", b"m@1@0@b@bfloat16", b"x/y@2@1@-f0@half@3", b"m@1@0@c@half@t%v"]
HEADER = struct.Struct("<9i150s")


class Sink:
    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "write after close"
        self.data += data

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def close(self) -> None:
        self.closed = True


@st.composite
def frames(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["put", "put", "get", "exist", "list", "health", "mutant", "raw"]))
    key = draw(st.sampled_from(KEYS))
    if kind == "raw":
        return draw(st.binary(max_size=400))
    if kind == "put":
        fmt, dtype, dims = draw(
            st.sampled_from(
                [
                    (1, 3, (2, 1, 4, 8)),
                    (1, 2, (2, 1, 0, 8)),
                    (4, 6, (50, 0, 0, 0)),
                    (7, 4, (3, 5, 0, 0)),
                    (0, 0, (0, 0, 0, 0)),
                ]
            )
        )
        n = 50 if fmt == 4 else 37 if fmt == 0 else 2 * 1 * 4 * 8 * 2 if fmt == 1 else 0
        if (fmt, dtype) == (1, 2):
            n = 0
        if fmt == 7:
            n = 3 * 5 * 4
        return HEADER.pack(1, n, fmt, dtype, 0, *dims, key.ljust(150)) + draw(
            st.binary(min_size=n, max_size=n)
        )
    if kind == "mutant":
        fields = [
            draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, -1])),
            draw(st.sampled_from([0, 1, 8, 64, -5, 2**31 - 1, 100_000_000])),
            draw(st.integers(-2, 9)),
            draw(st.integers(-1, 9)),
            draw(st.integers(-1, 3)),
            *draw(st.lists(st.integers(-3, 70), min_size=4, max_size=4)),
        ]
        raw_key = draw(st.sampled_from([*KEYS, b"", b"garbage", b"m@1@0@a@half\x00", b"\xff@"]))
        return HEADER.pack(*fields, raw_key.ljust(150)) + draw(st.binary(max_size=200))
    command = {"get": 2, "exist": 3, "list": 4, "health": 5}[kind]
    return HEADER.pack(command, 0, 1, 2, 0, 0, 0, 0, 0, key.ljust(150))


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    data = b"".join(draw(st.lists(frames(), min_size=1, max_size=12)))
    cuts = sorted(draw(st.lists(st.integers(0, max(len(data), 1)), max_size=8)))
    return data, cuts


def _check_replies(raw: bytes) -> None:
    view, pos = memoryview(raw), 0
    while pos < len(raw):
        assert len(raw) - pos >= 36, "a partial reply header"
        meta = ServerMetaMessage.deserialize(view[pos : pos + 36])
        pos += 36
        if meta.code == ServerReturnCode.SUCCESS and meta.length:
            assert len(raw) - pos >= meta.length, "a reply payload cut short"
            wanted = expected_length(meta.fmt, meta.dtype, meta.shape)
            assert wanted is None or wanted == meta.length
            pos += meta.length


async def _feed(reader: asyncio.StreamReader, data: bytes, cuts: list[int]) -> None:
    points = [0, *cuts, len(data)]
    for a, b in itertools.pairwise(points):
        if b > a:
            reader.feed_data(data[a:b])
        await asyncio.sleep(0)
    reader.feed_eof()


async def _run(data: bytes, cuts: list[int], config: ServerConfig) -> tuple[Store, Sink]:
    reader = asyncio.StreamReader(limit=1 << 20)
    sink, store = Sink(), Store(config.capacity_bytes)
    feeder = asyncio.ensure_future(_feed(reader, data, cuts))
    reason = await asyncio.wait_for(handle_requests(reader, sink, store, config), 10)
    assert isinstance(reason, str)
    feeder.cancel()
    return store, sink


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.sampled_from([4096, 1 << 30]))
def test_handler_survives_any_stream(stream: tuple[bytes, list[int]], capacity: int) -> None:
    data, cuts = stream
    config = ServerConfig(capacity_bytes=capacity, idle_timeout=0.5)
    tracemalloc.start()
    try:
        store, sink = asyncio.run(_run(data, cuts, config))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 4 * len(data) + (2 << 20), f"{peak} bytes traced for a {len(data)}-byte stream"
    assert sink.closed
    _check_replies(bytes(sink.data))
    assert store.size == sum(len(e.data) + ENTRY_OVERHEAD for e in store.entries.values())
    assert store.size <= capacity
    for entry in store.entries.values():
        wanted = expected_length(
            entry.fmt, entry.dtype, strip_shape_padding(entry.slots, entry.fmt)
        )
        assert wanted is None or wanted == len(entry.data)


def test_huge_claim_allocates_nothing() -> None:
    """A PUT claiming 2**31 - 1 bytes (a 1 GiB capacity refuses it) and one claiming
    100 MB (accepted, then cut short): neither allocates by the claim."""
    for length in (2**31 - 1, 100_000_000):
        frame = HEADER.pack(1, length, 4, 6, 0, length, 0, 0, 0, KEYS[0].ljust(150)) + b"x" * 10
        config = ServerConfig(capacity_bytes=1 << 30, idle_timeout=0.5)
        tracemalloc.start()
        try:
            store, sink = asyncio.run(_run(frame, [], config))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 2 << 20 and not store.entries and sink.data == b""
