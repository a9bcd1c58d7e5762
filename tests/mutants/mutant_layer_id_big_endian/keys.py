"""Unchanged: the reference keys module."""

from lmckv.reference_impl.keys import *  # noqa: F403
from lmckv.reference_impl.keys import __all__  # noqa: F401
