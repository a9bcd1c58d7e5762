"""The LMCache release installed beside lmckv: the one place its version is looked up.

The suite's upstream drivers, the release cross-checks, the benchmarks' environment record
and the tests all ask here, from the installed distribution's metadata (never by importing
lmcache, whose package ``__init__`` loads kernels and may fail on a CPU machine).
"""

from __future__ import annotations

from importlib import metadata

#: The distribution name of LMCache on PyPI.
DISTRIBUTION = "lmcache"


def distribution_version(name: str) -> str | None:
    """The installed version of the distribution ``name``, or None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def installed_version() -> str | None:
    """The installed LMCache release (``0.5.6``, ``0.5.7rc2``), or None when there is none."""
    return distribution_version(DISTRIBUTION)
