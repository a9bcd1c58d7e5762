"""Unchanged: the reference keys module."""

from reference_impl.keys import *  # noqa: F403
from reference_impl.keys import __all__  # noqa: F401
