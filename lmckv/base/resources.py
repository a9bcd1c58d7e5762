"""The data files lmckv ships inside its packages, found through ``importlib.resources``.

The golden vectors (package ``golden_blobs``), the known-failure lists, SPEC.md, TESTEE.md,
the JSON Schemas and the C testee's sources are package data: a checkout and an installed
wheel find them the same way. lmckv is installed as files (wheels unpack into
site-packages), so every resource is a real path.
"""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path


class ResourceError(RuntimeError):
    """A packaged resource is not on the file system (a zipped install)."""


def package_path(package: str, *parts: str) -> Path:
    """The file or folder ``parts`` inside ``package``, as a real path."""
    resource = importlib.resources.files(package).joinpath(*parts)
    if not isinstance(resource, Path):
        raise ResourceError(
            f"{package}/{'/'.join(parts)} is not a file on disk ({type(resource).__name__}):"
            " install lmckv unzipped (pip does)"
        )
    return resource


def golden_dir() -> Path:
    """The golden_blobs folder: ``$LMCKV_GOLDEN_DIR``, else the ``golden_blobs`` package."""
    override = os.environ.get("LMCKV_GOLDEN_DIR")
    return Path(override) if override else package_path("lmckv.golden_blobs")


def is_writable_dir(path: Path) -> bool:
    """Whether ``path`` is a folder this process may create files in."""
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def checkout_root() -> Path | None:
    """The source checkout this code runs from (the folder above the ``lmckv`` package
    when it holds lmckv's pyproject.toml), or None for an installed wheel."""
    root = package_path("lmckv").parent
    pyproject = root / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return None
    return root if 'name = "lmckv"' in text else None


def cache_dir(*parts: str) -> Path:
    """A per-user cache folder for things lmckv builds: ``$XDG_CACHE_HOME/lmckv/...``
    (default ``~/.cache/lmckv/...``); not created here."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base, "lmckv", *parts)
