"""One definition of each shared concept: the scale scopes and the ``--impl`` grammar.

- Scale scopes are named by ``ScaleScope`` (reference_impl/kv_codec/header_fields.py) alone:
  no other module spells a scope's name (``"PER_TENSOR"``, ``"per_layer_head"``) as a literal;
  they derive it (``ScaleScope.PER_TENSOR.name``, ``.name.lower()``). The benchmarks' one
  condition that is not a header scope, calibrated external scales, is ``bench.common.scopes``'s
  ``CALIBRATED_EXTERNAL``, derived from EXTERNAL's name.
- ``--impl`` values are parsed in conformance/runner/impl_specs.py alone, from its table: no
  other module tests a value against a kind's prefix or suffix.
"""

from __future__ import annotations

import ast

import pytest
from test_import_graph import MODULES

from lmckv.base.schemas import schema
from lmckv.bench.common.scopes import CALIBRATED_EXTERNAL, SCOPE_NAMES, header_scope, out_of_band
from lmckv.conformance.drivers.base import DriverError
from lmckv.conformance.runner import impl_specs
from lmckv.reference_impl.kv_codec.header_fields import ScaleScope

SCOPE_HOME = "lmckv.reference_impl.kv_codec.header_fields"
IMPL_HOME = "lmckv.conformance.runner.impl_specs"
# NONE (v2's scope) is left out: "none" is an ordinary word here (the serde "none", empty lists).
NAMED = [s for s in ScaleScope if s is not ScaleScope.NONE]
SPELLINGS = {s.name for s in NAMED} | {s.name.lower() for s in NAMED}
SPELLINGS |= {CALIBRATED_EXTERNAL, CALIBRATED_EXTERNAL.lower()}


def _constants(module: str) -> list[tuple[int, str]]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_scope_names_are_spelled_only_by_scale_scope() -> None:
    spelled = sorted(
        f"{module} line {line}: {value!r}"
        for module in MODULES
        if module != SCOPE_HOME
        for line, value in _constants(module)
        if value in SPELLINGS
    )
    assert not spelled, "\n".join(spelled)


def test_the_scan_sees_a_spelling() -> None:
    """The scan reads the home module's literals too (a scan that finds nothing anywhere would
    pass vacuously): ScaleScope's members are names, not strings, so count its docstring."""
    assert any("ScaleScope" in value for _, value in _constants(SCOPE_HOME))
    assert "PER_TENSOR" in SPELLINGS and "per_tensor" in SPELLINGS


def test_the_row_schema_names_exactly_the_header_scopes() -> None:
    """The bench-row file format (a contract with older files) and the vocabulary agree."""
    props = schema("bench-row")["$defs"]["throughput"]["properties"]["scope"]
    assert [s for s in props["enum"] if s is not None] == list(SCOPE_NAMES)


def test_calibrated_external_is_a_condition_of_the_external_scope() -> None:
    assert CALIBRATED_EXTERNAL not in SCOPE_NAMES
    assert header_scope(CALIBRATED_EXTERNAL) is ScaleScope.EXTERNAL
    assert header_scope("PER_PAGE_HEAD") is ScaleScope.PER_PAGE_HEAD
    assert out_of_band(CALIBRATED_EXTERNAL) and out_of_band("EXTERNAL")
    assert not out_of_band("PER_TENSOR")
    with pytest.raises(KeyError):
        header_scope("PER_TOKEN")


#: str methods that take a value apart.
_TESTS = {"startswith", "endswith", "removeprefix", "removesuffix"}


def _kind_words() -> set[str]:
    words = set()
    for kind in impl_specs.KINDS:
        words.add(kind.name)
        if kind.takes_argument:
            words.add(kind.form.partition(":")[0] + ":")
    return words | {"-server", "-client"}


def test_impl_values_are_taken_apart_only_by_impl_specs() -> None:
    words = _kind_words()
    found = []
    for module in MODULES:
        if module == IMPL_HOME:
            continue
        tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _TESTS
            ):
                continue
            args = [a for arg in node.args for a in ast.walk(arg) if isinstance(a, ast.Constant)]
            if any(isinstance(a.value, str) and a.value in words for a in args):
                found.append(f"{module} line {node.lineno}: .{node.func.attr}(...)")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("kind", impl_specs.KINDS, ids=lambda k: k.name)
def test_every_kind_parses_from_its_form(kind: impl_specs.ImplKind) -> None:
    text = kind.form.replace("PKG", "pkg").replace("CMD", "prog {port}").replace("PORT", "5555")
    spec = impl_specs.parse(text)
    assert spec.kind is kind
    assert spec.argument == (text.partition(":")[2] if kind.takes_argument else None)


@pytest.mark.parametrize("text", ["", "bogus", "python", "python:", "exec:  ", "server-at", "C"])
def test_a_value_of_no_kind_names_every_form(text: str) -> None:
    with pytest.raises(DriverError) as info:
        impl_specs.parse(text)
    assert str(info.value).startswith(f"--impl {text!r}:")
    if not text.partition(":")[1] or text.partition(":")[0] not in ("python", "exec"):
        assert all(kind.form in str(info.value) for kind in impl_specs.KINDS)


def test_kind_names_are_unique() -> None:
    names = [kind.name for kind in impl_specs.KINDS]
    assert len(names) == len(set(names))
