"""The first-party import graph: layers import downward only.

Every import statement of the shipped packages counts, lazy ones inside functions too. A
unit is a package or sub-package (``conformance.drivers``, ``reference_impl.kv_codec``,
``bench``); an import from one unit into another is an edge. The graph of units must have
no cycle: a cycle means two parts each need the other, which is how shared concepts end up
living inside one consumer. The golden-vector generator is a leaf: outside it only its
command-line entry point (``conformance.golden.cli``) may be imported. Tests may import
anything they test.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("reference_impl", "conformance", "bench", "reports", "lmckv")
GOLDEN = "conformance.golden"
GOLDEN_ENTRY = "conformance.golden.cli"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "build" not in path.relative_to(REPO).parts:
                found[_module_name(path)] = path
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
            # ``from pkg import name`` imports pkg.name when that is a module.
            targets = [root] + [
                f"{root}.{a.name}" for a in node.names if f"{root}.{a.name}" in MODULES
            ]
        else:
            continue
        out |= {t for t in targets if t.split(".")[0] in PACKAGES}
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
    assert "conformance.core" in graph["conformance.drivers"]
    assert "conformance.drivers" in graph["conformance.golden"]
    assert "conformance.core" in graph["bench"]
    assert "bench" in graph["lmckv"]


def test_no_cycle_between_packages_or_subpackages() -> None:
    cycle = find_cycle(unit_graph())
    assert cycle is None, "import cycle between units: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}}) is None


def test_core_imports_nothing_else_of_the_suite() -> None:
    leaks = sorted(
        f"{module} imports {target}"
        for module in MODULES
        if unit_of(module) == "conformance.core"
        for target in imports_of(module)
        if target.startswith("conformance") and not target.startswith("conformance.core")
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
