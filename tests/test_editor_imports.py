"""Every first-party import resolves from the repository's own files, as an editor reads them.

The folders ``conformance/``, ``reference_impl/``, ``bench/``, ``reports/`` and
``golden_blobs/`` install as ``lmckv.<folder>`` (pyproject.toml's package-dir), but in the
checkout they are not inside ``lmckv/``: an absolute ``lmckv.conformance...`` import cannot be
found by following folders, which is all an editor's analyser (pyright) does with an editable
install. So, inside those folders, first-party imports are relative (``from ..drivers.base``,
``from ...reference_impl.keys``): the repository root stands where the installed ``lmckv``
package does, and the same dots lead to the same module in both. ``lmckv.base`` (the shared
base) lies inside ``lmckv/`` and is imported by its absolute name from anywhere. The command
line in ``lmckv/`` names the modules of its subcommands in one table and imports them by name
when one runs, never statically.

``nox -s lint`` measures the result with basedpyright over an editable install
(noxfile.py, ``editor_imports``): 0 unresolved first-party imports.
"""

from __future__ import annotations

import ast
import importlib.util

import pytest
from test_import_graph import MODULES, PACKAGE_DIRS, imports_of

from lmckv.cli import COMMANDS

#: The installed names of the folders that live outside ``lmckv/`` in the checkout.
MAPPED = sorted(name for name in PACKAGE_DIRS if name != "lmckv")
BASE = "lmckv.base"


def _under(module: str, packages: list[str] | str) -> bool:
    packages = [packages] if isinstance(packages, str) else packages
    return any(module == p or module.startswith(p + ".") for p in packages)


def _absolute_imports(module: str) -> list[tuple[int, str]]:
    """(line, name) of each absolute import of an ``lmckv`` module in ``module``'s file."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if _under(a.name, "lmckv")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "lmckv":
                found += [(node.lineno, f"lmckv.{a.name}") for a in node.names]
            elif _under(node.module, "lmckv"):
                found.append((node.lineno, node.module))
    return found


def test_the_mapped_folders_import_each_other_relatively() -> None:
    absolute = sorted(
        f"{MODULES[module].name} ({module}) line {line}: import {name}"
        for module in MODULES
        if _under(module, MAPPED)
        for line, name in _absolute_imports(module)
        if not _under(name, BASE)
    )
    assert not absolute, "\n".join(absolute)


def test_the_command_line_imports_no_mapped_folder_statically() -> None:
    static = sorted(
        f"{module} line {line}: import {name}"
        for module in MODULES
        if _under(module, "lmckv") and not _under(module, MAPPED)
        for line, name in _absolute_imports(module)
        if _under(name, MAPPED)
    )
    assert not static, "\n".join(static)


def test_every_relative_import_lands_on_a_module() -> None:
    """Too many dots would leave the package (an error only when that line runs)."""
    packages = {m for m, path in MODULES.items() if path.name == "__init__.py"}
    stray = sorted(
        f"{module} imports {target}"
        for module in MODULES
        for target in imports_of(module)
        if target not in MODULES and target not in packages
    )
    assert not stray, stray


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_names_a_module_with_main(name: str) -> None:
    module = COMMANDS[name].module
    assert importlib.util.find_spec(module) is not None, module
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body), module
    assert MODULES[module].name == f"{name}_command.py"
