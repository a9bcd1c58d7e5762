"""The one interface every implementation under test is driven through.

A driver answers flat operations (TESTEE.md lists them): each call takes a dict of fields
and returns a dict that holds either ``ok: True`` and the result fields, or ``ok: False``
with ``error`` (the canonical error class name, or ``raw:<class>`` for an exception
outside the documented classes) and ``message``. Tests only ever talk to drivers.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

#: Every operation of the protocol, which is also its capability name. Three are flags on
#: another operation (TESTEE.md, "hello"): codec.hash_gate (codec.parse honours expect_*),
#: codec.dequant (codec.decode honours out_v_dtype), codec.encode_scales (codec.encode
#: honours v_scales).
OPERATIONS: tuple[str, ...] = (
    "codec.parse",
    "codec.hash_gate",
    "codec.decode",
    "codec.dequant",
    "codec.encode",
    "codec.encode_scales",
    "proto.client.write",
    "proto.client.read",
    "proto.server.write",
    "proto.server.read",
    "proto.remote.write",
    "proto.remote.read",
    "key.cache.write",
    "key.cache.read",
    "key.object.new",
    "key.kv_rank",
    "key.encoded.write",
    "key.encoded.read",
    "key.fs.write",
    "key.fs.read",
    "key.s3.write",
    "key.s3.read",
    "key.ipc",
)

#: Prefix of an error that is not one of the canonical names (TESTEE.md, "Errors").
RAW_PREFIX = "raw:"


class DriverError(RuntimeError):
    """The driver itself failed (the testee crashed, hung, or broke the protocol)."""


@dataclass
class ImplInfo:
    """What the results file records about one implementation."""

    name: str
    kind: str
    version: str | None
    capabilities: list[str] = field(default_factory=list)


class Driver(abc.ABC):
    """An implementation under test, reachable through flat operations."""

    info: ImplInfo

    @property
    def name(self) -> str:
        return self.info.name

    def supports(self, capability: str) -> bool:
        return capability in self.info.capabilities

    @abc.abstractmethod
    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        """Run one operation; never raises for the implementation's own failures."""

    def close(self) -> None:  # noqa: B027 - drivers without resources keep the default
        """Release whatever the driver holds (a subprocess)."""
