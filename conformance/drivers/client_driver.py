"""Client implementations under test: the suite plays the server (SPEC "The protocol on a
connection", PROTO-CLI-* rules).

- ``reference-client``: ``reference_impl.protocol.client.CacheClient``;
- ``upstream-client``: lmcache 0.5.6's ``LMCServerConnector`` (the ``lm://`` connector),
  built with its real constructor over a minimal stand-in of the LocalCPUBackend it is
  given (the config and metadata its base class reads, and ``allocate``, which returns a
  zero-filled CPU tensor of the requested shape and dtype, as upstream's MemoryObj does).

A release that has no ``lm://`` connector (0.5.7rc2 removed it) gives a driver that is
:attr:`ClientDriver.absent` with the reason: its tests skip saying so.

A client session is one connection; its calls return the value (bytes), None for "no
value", a bool for EXIST, or raise :class:`ClientRefused` when the client reports an error.
Every socket a session opens has a timeout, so no call blocks for longer than
:data:`CALL_TIMEOUT`; a call that times out raises :class:`ClientHung`.
"""

from __future__ import annotations

import abc
import asyncio
import importlib
import socket
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import torch

from lmckv.base.lmcache_release import installed_version

from .base import Driver, DriverError, ImplInfo
from .server_driver import module_absent
from .upstream_driver import _quiet_lmcache_logging

CALL_TIMEOUT = 3.0
#: Upstream's ``lm://`` client: LMCServerConnector's module.
UPSTREAM_CLIENT_MODULE = "lmcache.v1.storage_backend.connector.lm_connector"


class ClientRefused(Exception):
    """The client reported an error for the request (an exception, whatever its class)."""


class ClientHung(Exception):
    """The client was still waiting for bytes after CALL_TIMEOUT seconds."""


class ClientSession(abc.ABC):
    """One connection of a client under test."""

    @abc.abstractmethod
    def get(self, key: str) -> bytes | None: ...

    @abc.abstractmethod
    def exists(self, key: str) -> bool: ...

    @abc.abstractmethod
    def put(self, key: str, data: bytes, dtype: torch.dtype, shape: Sequence[int]) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...


class ClientDriver(Driver):
    """A client implementation: opens sessions to a (scripted) server."""

    def __init__(self, name: str, version: str | None, absent: str | None = None) -> None:
        self.info = ImplInfo(name=name, kind="client", version=version, capabilities=[])
        #: Why this implementation has no client to drive (its tests skip with it), or None.
        self.absent = absent

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        return {"ok": False, "error": "unsupported", "message": "a client answers no operation"}

    @abc.abstractmethod
    def connect(self, host: str, port: int) -> ClientSession: ...


def _guard(exc: BaseException) -> Exception:
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return ClientHung(f"no answer within {CALL_TIMEOUT}s: {exc!r}")
    return ClientRefused(f"{type(exc).__name__}: {exc}")


# -- reference ------------------------------------------------------------------------------


class _ReferenceSession(ClientSession):
    def __init__(self, host: str, port: int) -> None:
        from ...reference_impl.protocol.client import CacheClient

        self.client = CacheClient(host, port, timeout=CALL_TIMEOUT)

    def get(self, key: str) -> bytes | None:
        try:
            value = self.client.get(key)
        except Exception as exc:
            raise _guard(exc) from exc
        return None if value is None else value.data

    def exists(self, key: str) -> bool:
        try:
            return self.client.exists(key)
        except Exception as exc:
            raise _guard(exc) from exc

    def put(self, key: str, data: bytes, dtype: torch.dtype, shape: Sequence[int]) -> None:
        from ...reference_impl.protocol.memory_format import MemoryFormat

        try:
            self.client.put(key, data, MemoryFormat.KV_2LTD, dtype, shape)
        except Exception as exc:
            raise _guard(exc) from exc

    def close(self) -> None:
        self.client.close()


class ReferenceClientDriver(ClientDriver):
    def __init__(self) -> None:
        super().__init__("reference-client", None)

    def connect(self, host: str, port: int) -> ClientSession:
        return _ReferenceSession(host, port)


# -- upstream -------------------------------------------------------------------------------


class _StubMemoryObj:
    """What LMCServerConnector reads of a MemoryObj: byte_array and the tensor's shape,
    dtype and format."""

    def __init__(self, tensor: torch.Tensor, fmt: Any) -> None:
        self.tensor = tensor
        self.fmt = fmt

    @property
    def byte_array(self) -> memoryview:
        array: Any = self.tensor.view(torch.uint8).numpy()
        return memoryview(array).cast("B")

    def get_shape(self) -> torch.Size:
        return self.tensor.shape

    def get_dtype(self) -> torch.dtype:
        return self.tensor.dtype

    def get_memory_format(self) -> Any:
        return self.fmt


class _StubBackend:
    """The LocalCPUBackend surface LMCServerConnector uses."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(extra_config=None, use_layerwise=False)
        self.metadata = SimpleNamespace(
            get_shapes=lambda: [torch.Size([2, 1, 16, 8])],
            get_dtypes=lambda: [torch.bfloat16],
            use_mla=False,
            chunk_size=16,
            get_num_groups=lambda: 1,
        )

    def allocate(self, shape: torch.Size, dtype: torch.dtype | None, fmt: Any) -> _StubMemoryObj:
        return _StubMemoryObj(torch.zeros(shape, dtype=dtype or torch.uint8), fmt)


class _UpstreamSession(ClientSession):
    def __init__(self, host: str, port: int) -> None:
        connector = importlib.import_module(UPSTREAM_CLIENT_MODULE)
        self.utils = importlib.import_module("lmcache.utils")
        self.memory = importlib.import_module("lmcache.v1.memory_management")
        self.loop = asyncio.new_event_loop()
        self.conn = connector.LMCServerConnector(host, port, self.loop, _StubBackend())
        self.conn.client_socket.settimeout(CALL_TIMEOUT)  # the suite's bound, not upstream's

    def _run(self, coro: Any) -> Any:
        try:
            return self.loop.run_until_complete(coro)
        except Exception as exc:
            raise _guard(exc) from exc

    def _key(self, key: str) -> Any:
        return self.utils.parse_cache_key(key)

    def get(self, key: str) -> bytes | None:
        obj = self._run(self.conn.get(self._key(key)))
        return None if obj is None else bytes(obj.byte_array)

    def exists(self, key: str) -> bool:
        return bool(self._run(self.conn.exists(self._key(key))))

    def put(self, key: str, data: bytes, dtype: torch.dtype, shape: Sequence[int]) -> None:
        tensor = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype).reshape(shape)
        obj = _StubMemoryObj(tensor, self.memory.MemoryFormat.KV_2LTD)
        self._run(self.conn.put(self._key(key), obj))

    def close(self) -> None:
        try:
            self.conn.client_socket.close()
        finally:
            self.loop.close()


class UpstreamClientDriver(ClientDriver):
    def __init__(self, version: str | None, absent: str | None = None) -> None:
        super().__init__("upstream-client", version, absent)

    def connect(self, host: str, port: int) -> ClientSession:
        return _UpstreamSession(host, port)


def upstream_client() -> ClientDriver:
    """The installed LMCache's ``lm://`` client (a release without it gives a driver whose
    tests skip, saying so); ImportError when it is there but cannot be imported."""
    found = installed_version()
    if found is None:
        raise DriverError("lmcache is not installed")
    if module_absent(UPSTREAM_CLIENT_MODULE):
        return UpstreamClientDriver(
            found, f"lmcache {found} has no {UPSTREAM_CLIENT_MODULE} (no lm:// client)"
        )
    importlib.import_module(UPSTREAM_CLIENT_MODULE)
    _quiet_lmcache_logging()
    return UpstreamClientDriver(found)
