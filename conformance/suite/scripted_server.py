"""The suite as a server: a scripted loopback server for the client tests (PROTO-CLI-*).

It runs an asyncio loop in a background thread, accepts connections on 127.0.0.1 (a port
the kernel picks), reads each request header (and a PUT's payload), and answers the next
request that expects a reply with the next :class:`Step` of its script: given bytes, cut
into pieces at given offsets, with a delay between pieces, then optionally a close. It
records the requests and whether the client closed its end. Its lifetime is bounded
(:data:`LIFETIME`), and :meth:`ScriptedServer.stop` joins its thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

REQUEST_HEADER = 186
PUT = 1
#: Seconds a scripted server lives at most.
LIFETIME = 20.0
SERVER_HEADER = struct.Struct("<9i")


def reply_header(
    code: int,
    length: int,
    fmt: int = 1,
    dtype: int = 3,
    slots: Sequence[int] = (0, 0, 0, 0),
    location: int = 0,
) -> bytes:
    return SERVER_HEADER.pack(code, length, fmt, dtype, *slots, location)


@dataclass
class Step:
    """One reply: ``data`` sent in pieces cut at ``cuts`` with ``delay`` s between them;
    ``close`` ends the connection afterwards."""

    data: bytes
    cuts: Sequence[int] = ()
    delay: float = 0.0
    close: bool = False

    def pieces(self) -> list[bytes]:
        points = [0, *sorted(c for c in self.cuts if 0 < c < len(self.data)), len(self.data)]
        return [self.data[a:b] for a, b in itertools.pairwise(points)]


@dataclass
class ScriptedServer:
    script: list[Step]
    requests: list[bytes] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    client_closed: threading.Event = field(default_factory=threading.Event)
    port: int = 0

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._stopped: asyncio.Event | None = None

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("scripted server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._stopped = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = int(server.sockets[0].getsockname()[1])
        self._ready.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopped.wait(), LIFETIME)
        server.close()
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()
        await asyncio.wait_for(server.wait_closed(), 5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readexactly(REQUEST_HEADER)
                self.requests.append(head)
                command, length = struct.unpack_from("<2i", head)
                if command == PUT:
                    self.payloads.append(await reader.readexactly(max(length, 0)))
                    continue
                if not self.script:
                    break
                step = self.script.pop(0)
                for piece in step.pieces():
                    writer.write(piece)
                    await writer.drain()
                    if step.delay:
                        await asyncio.sleep(step.delay)
                if step.close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            self.client_closed.set()
        finally:
            writer.close()

    def stop(self) -> None:
        if self._thread.is_alive():
            stopped = self._stopped
            if stopped is not None:
                self._loop.call_soon_threadsafe(stopped.set)
            self._thread.join(10)
