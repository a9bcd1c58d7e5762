"""Drivers: the one interface (``base.Driver``) through which the suite talks to every
implementation under test, in this process (``python_driver``, ``upstream_driver``) or over
TESTEE.md's stdio protocol (``exec_driver``)."""

from .base import Driver, DriverError, ImplInfo

__all__ = ["Driver", "DriverError", "ImplInfo"]
