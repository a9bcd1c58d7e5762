"""pyproject.toml installs every package of the repository under the one name ``lmckv``.

The top-level folders keep their names in the repository and install as sub-packages of
``lmckv`` (``[tool.setuptools.package-dir]``); the explicit ``packages`` list must name every
folder that holds an ``__init__.py``, or a new sub-package would silently be left out of
the wheel (the installed-wheel test builds one and checks its top-level name).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def _packages_on_disk() -> set[str]:
    found = set()
    for package, folder in SETUPTOOLS["package-dir"].items():
        root = REPO / folder
        for init in root.rglob("__init__.py"):
            parts = init.parent.relative_to(root).parts
            if "build" not in parts and "__pycache__" not in parts:
                found.add(".".join((package, *parts)))
    return found


def test_every_installed_package_is_under_lmckv() -> None:
    assert all(p == "lmckv" or p.startswith("lmckv.") for p in SETUPTOOLS["packages"])
    assert all(p == "lmckv" or p.startswith("lmckv.") for p in SETUPTOOLS["package-dir"])


def test_the_package_list_names_every_package_folder() -> None:
    listed = set(SETUPTOOLS["packages"])
    on_disk = _packages_on_disk()
    assert on_disk - listed == set(), "packages missing from pyproject.toml"
    assert listed - on_disk == set(), "pyproject.toml lists packages with no folder"


def test_package_data_belongs_to_listed_packages() -> None:
    assert set(SETUPTOOLS["package-data"]) <= set(SETUPTOOLS["packages"])
