"""Unchanged: the reference codec module."""

from lmckv.reference_impl.kv_codec import *  # noqa: F403
from lmckv.reference_impl.kv_codec import __all__  # noqa: F401
