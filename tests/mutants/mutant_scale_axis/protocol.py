"""Unchanged: the reference protocol module."""

from lmckv.reference_impl.protocol import *  # noqa: F403
from lmckv.reference_impl.protocol import __all__  # noqa: F401
