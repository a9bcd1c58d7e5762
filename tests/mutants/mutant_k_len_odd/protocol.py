"""Unchanged: the reference protocol module."""

from reference_impl.protocol import *  # noqa: F403
from reference_impl.protocol import __all__  # noqa: F401
