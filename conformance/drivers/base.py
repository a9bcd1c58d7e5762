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

    def unsupported_reason(self, capability: str) -> str:
        """Why the implementation does not declare ``capability`` (a skip reason)."""
        return f"{self.name} does not declare capability {capability}"

    @abc.abstractmethod
    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        """Run one operation; never raises for the implementation's own failures."""

    def close(self) -> None:  # noqa: B027 - drivers without resources keep the default
        """Release whatever the driver holds (a subprocess)."""
