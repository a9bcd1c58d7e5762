"""The first-party import graph: layers import downward only.

Every import statement of the shipped packages counts, lazy ones inside functions too. A
unit is a package or sub-package (``lmckv.conformance.drivers``,
``lmckv.reference_impl.kv_codec``, ``lmckv.bench``); an import from one unit into another is
an edge. The graph of units must have no cycle: a cycle means two parts each need the other,
which is how shared concepts end up living inside one consumer. Nor may the sub-packages
(every unit merged into its first two levels under ``lmckv``, ``lmckv.X.Y``: a nested package
such as ``lmckv.conformance.testees.c`` counts as its parent's), nor the modules, inside a
unit too. The command line (the
``lmckv`` unit itself) is the top layer: nothing below imports it. The golden-vector
generator is a leaf: outside it only its command-line entry point
(``lmckv.conformance.golden.golden_command``) may be imported. Tests may import anything they test.

Module names are the installed ones, read from pyproject.toml's package-dir mapping (each
top-level folder of the repository installs as a sub-package of ``lmckv``).
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Installed package name -> its folder in the repository (pyproject.toml).
PACKAGE_DIRS: dict[str, str] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"][
    "setuptools"
]["package-dir"]
TOP = "lmckv"
GOLDEN = "lmckv.conformance.golden"
GOLDEN_ENTRY = "lmckv.conformance.golden.golden_command"
#: The shared base (``lmckv/base/``): schemas, resources, process groups, the installed
#: LMCache release.
BASE = "lmckv.base"
#: The suite's own core, which the benchmarks and the report must not reach into.
SUITE_CORE = "lmckv.conformance.core"


def _module_name(package: str, folder: Path, path: Path) -> str:
    parts = [package, *path.relative_to(folder).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGE_DIRS.items():
        root = REPO / folder
        for path in sorted(root.rglob("*.py")):
            if "build" not in path.relative_to(REPO).parts:
                found[_module_name(package, root, path)] = path
    return found


MODULES = _modules()
UNITS = sorted({name for name, path in MODULES.items() if path.name == "__init__.py"})


def unit_of(module: str) -> str:
    """The deepest package that holds ``module`` (a package is its own unit)."""
    return max((u for u in UNITS if module == u or module.startswith(u + ".")), key=len)


def imports_of(module: str) -> set[str]:
    """Every first-party module or package that ``module`` imports, anywhere in its body."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            prefix = ".".join(base) if node.level else ""
            root = ".".join(p for p in (prefix, node.module or "") if p)
            # ``from pkg import name`` imports pkg.name when that is a module (its parent
            # package is imported on the way, as by every import, and is no edge of its own).
            submodules = [f"{root}.{a.name}" for a in node.names if f"{root}.{a.name}" in MODULES]
            targets = submodules or [root]
        else:
            continue
        out |= {t for t in targets if t.split(".")[0] == TOP}
    return out


def unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for module in MODULES:
        for target in imports_of(module):
            src, dst = unit_of(module), unit_of(target)
            if src != dst:
                graph[src].add(dst)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes (first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_walk_sees_the_layers() -> None:
    """The walk itself works: known downward edges are found (a walk that finds nothing
    would pass the cycle test vacuously)."""
    graph = unit_graph()
    assert "lmckv.conformance.core" in graph["lmckv.conformance.drivers"]
    assert "lmckv.conformance.drivers" in graph["lmckv.conformance.golden"]
    assert BASE in graph["lmckv.bench.gate"]
    assert "lmckv.bench.common" in graph["lmckv.bench.throughput"]
    assert "lmckv.base.schemas" in graph["lmckv.reports"]
    assert "lmckv.reference_impl.kv_codec" in graph["lmckv.bench.common"]
    assert "lmckv.reference_impl.kv_codec" in graph["lmckv.conformance.golden"]


def test_no_cycle_between_packages_or_subpackages() -> None:
    cycle = find_cycle(unit_graph())
    assert cycle is None, "import cycle between units: " + " -> ".join(cycle or [])


#: How many dotted levels under ``lmckv`` name a sub-package of the collapsed graph.
SUBPACKAGE_LEVELS = 2


def subpackage_of(unit: str) -> str:
    """The sub-package of a top-level package that holds ``unit``: its first two levels under
    ``lmckv`` (``lmckv.conformance.testees.c`` -> ``lmckv.conformance.testees``;
    ``lmckv.bench.gate`` and ``lmckv.base`` stay)."""
    return ".".join(unit.split(".")[: 1 + SUBPACKAGE_LEVELS])


def collapse(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` with every unit merged into its sub-package (``subpackage_of``)."""
    out: dict[str, set[str]] = defaultdict(set)
    for src, targets in graph.items():
        for dst in targets:
            a, b = subpackage_of(src), subpackage_of(dst)
            if a != b:
                out[a].add(b)
    return out


def subpackage_graph() -> dict[str, set[str]]:
    return collapse(unit_graph())


def test_the_collapse_merges_nested_units_into_their_subpackage() -> None:
    """The collapsed walk sees the edges a nested unit makes, under its sub-package's name (a
    nested unit kept apart hides a circle through its parent: the runner building
    testees/c while testees/python_testee.py used the runner was one)."""
    assert subpackage_of("lmckv.conformance.testees.c") == "lmckv.conformance.testees"
    assert subpackage_of("lmckv.bench.gate") == "lmckv.bench.gate"
    assert subpackage_of("lmckv.base") == "lmckv.base" and subpackage_of(TOP) == TOP
    graph = subpackage_graph()
    assert "lmckv.conformance.testees.c" not in graph
    # testees/c/build.py's edge to the base, seen as the testees' own
    assert "lmckv.conformance.testees.c" in unit_graph()
    assert BASE in unit_graph()["lmckv.conformance.testees.c"]
    assert "lmckv.conformance.testees" in graph["lmckv.conformance.fuzz"]
    assert "lmckv.conformance.testees" in graph["lmckv.conformance.runner"]  # builds testees/c
    assert "lmckv.conformance.drivers" in graph["lmckv.conformance.testees"]
    assert "lmckv.bench.common" in graph["lmckv.bench.throughput"]
    # a circle only a collapse can see
    nested = {"p.a.x.inner": {"p.a.y"}, "p.a.y": {"p.a.x"}}
    assert find_cycle(nested) is None
    assert find_cycle(collapse(nested)) == ["p.a.x", "p.a.y", "p.a.x"]


def test_no_cycle_between_subpackages() -> None:
    """Every unit merged into its sub-package (``lmckv.X.Y``): the sub-packages import one
    another downward only too, a nested package's imports counting as its parent's."""
    cycle = find_cycle(subpackage_graph())
    assert cycle is None, "import cycle between sub-packages: " + " -> ".join(cycle or [])


def module_graph() -> dict[str, set[str]]:
    """Module -> the first-party modules it imports (lazy and TYPE_CHECKING imports too)."""
    return {m: {t for t in imports_of(m) if t in MODULES and t != m} for m in MODULES}


def test_no_cycle_between_modules() -> None:
    """Within a unit too, no two modules each import the other (directly or around a
    longer circle): a lazy import that dodges the circle at run time still ties them."""
    graph = module_graph()
    assert graph["lmckv.reference_impl.keys.listing"]  # the walk sees in-unit edges
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between modules: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}}) is None


def test_core_imports_nothing_else_of_the_suite() -> None:
    leaks = sorted(
        f"{module} imports {target}"
        for module in MODULES
        if unit_of(module) == "lmckv.conformance.core"
        for target in imports_of(module)
        if target.startswith("lmckv.conformance")
        and not target.startswith("lmckv.conformance.core")
    )
    assert not leaks, leaks


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_base_imports_nothing_else_of_lmckv() -> None:
    """The shared base is the bottom layer: it imports only itself."""
    leaks = sorted(
        f"{module} imports {target}"
        for module in MODULES
        if _in(module, BASE)
        for target in imports_of(module)
        if not _in(target, BASE)
    )
    assert not leaks, leaks


def test_bench_and_reports_stand_on_the_base_not_on_the_suites_core() -> None:
    """Schemas, resources and process groups come from ``lmckv.base``; the suite's core
    (rules, operations, wire, observations) is the suite's own."""
    assert any(_in(t, BASE) for m in MODULES if _in(m, "lmckv.bench") for t in imports_of(m))
    leaks = sorted(
        f"{module} imports {target}"
        for module in MODULES
        if _in(module, "lmckv.bench") or _in(module, "lmckv.reports")
        for target in imports_of(module)
        if _in(target, SUITE_CORE)
    )
    assert not leaks, leaks


def test_the_golden_generator_is_imported_only_through_its_entry_point() -> None:
    wrong = sorted(
        f"{module} imports {target}"
        for module in MODULES
        if not module.startswith(GOLDEN)
        for target in imports_of(module)
        if target.startswith(GOLDEN + ".") and target != GOLDEN_ENTRY
    )
    assert not wrong, wrong


def test_nothing_imports_the_command_line() -> None:
    """The ``lmckv`` unit (the CLI) is the top layer: no package below imports it."""
    upward = sorted(
        f"{module} imports {target}"
        for module in MODULES
        if unit_of(module) != TOP
        for target in imports_of(module)
        if unit_of(target) == TOP
    )
    assert not upward, upward
