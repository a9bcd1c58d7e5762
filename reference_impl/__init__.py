"""lmckv's reference implementation of LMCache's KV blob, protocol and key formats."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lmckv")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "unknown"
