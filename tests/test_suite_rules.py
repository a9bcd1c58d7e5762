"""The rule registry against SPEC.md and the suite.

SPEC.md states each rule under an anchor, ``<a id="kv-crc"></a>**KV-CRC** (MUST)``; the
registry (conformance/core/rules.py) must list exactly those rules with the same levels.
Every rule must be named by a golden vector or a conformance test, and run by a
conformance test: a vector counts only when a suite test is parametrized over it and the
reference declares its operation (otherwise the test would be skipped).
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lmckv.conformance.core.rules import MUST, RULES, SHOULD
from lmckv.conformance.drivers.in_process import load_in_process

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "reference_impl" / "SPEC.md"
SUITE = REPO / "conformance" / "suite"
MANIFESTS = ("codec", "protocol", "keys")
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')
#: A rule statement: its anchor, its bold id and its level.
SPEC_RULE = re.compile(r'<a id="([^"]+)"></a>\*\*([A-Z0-9-]+)\*\* \(([A-Z]+)\)')
#: A bold rule id followed by a level, wherever it stands.
STATED = re.compile(r"\*\*((?:KV|KV2|Q|PROTO|KEY|STORE|SERDE)-[A-Z0-9-]+)\*\* \((MUST|SHOULD)\)")
#: The suite's modules use the ``rule`` marker, which conformance/conftest.py registers.
pytestmark = pytest.mark.filterwarnings("ignore:Unknown pytest.mark.rule")


def _spec_text() -> str:
    return SPEC.read_text(encoding="utf-8")


def _spec_rules() -> dict[str, str]:
    """Rule id -> level, for every rule SPEC.md states under its anchor."""
    return {rule_id: level for _, rule_id, level in SPEC_RULE.findall(_spec_text())}


def _vectors() -> Iterator[dict[str, Any]]:
    for name in MANIFESTS:
        manifest = json.loads((REPO / "golden_blobs" / "v1" / f"{name}.json").read_text())
        yield from manifest["vectors"]


def _suite_items() -> Iterator[tuple[str, dict[str, Any] | None]]:
    """(rule, vector or None) for every test of conformance/suite/test_*.py, read from
    the ``rule`` and ``parametrize`` marks pytest collects them by."""
    for path in sorted(SUITE.glob("test_*.py")):
        module = importlib.import_module(f"lmckv.conformance.suite.{path.stem}")
        for name, func in vars(module).items():
            if not name.startswith("test_"):
                continue
            marks = list(getattr(func, "pytestmark", []))
            own = [m.args[0] for m in marks if m.name == "rule"]
            params = [p for m in marks if m.name == "parametrize" for p in m.args[1]]
            if not params:
                yield from ((rule, None) for rule in own)
            for param in params:
                if isinstance(param, dict):  # a bare vector: the function's own rule
                    yield from ((rule, param) for rule in own)
                    continue
                value = param.values[0] if param.values else None
                vector = value if isinstance(value, dict) else None
                rules = [m.args[0] for m in param.marks if m.name == "rule"]
                yield from ((rule, vector) for rule in rules or own)


@pytest.fixture(scope="module")
def suite_items() -> list[tuple[str, dict[str, Any] | None]]:
    return list(_suite_items())


def test_rules_are_well_formed() -> None:
    for rule in RULES.values():
        assert rule.level in (MUST, SHOULD)
        assert re.fullmatch(r"(KV|KV2|Q|PROTO|KEY|STORE|SERDE)-[A-Z0-9]+(-[A-Z0-9]+)*", rule.id)
        assert rule.spec_anchor == "#" + rule.id.lower()
        assert rule.summary.endswith(".")


def test_spec_states_every_rule_under_its_anchor() -> None:
    """Each anchor of SPEC.md is a rule statement whose anchor is the id in lower case,
    and each bold rule statement has its anchor: no rule escapes the parse below."""
    text = _spec_text()
    statements = SPEC_RULE.findall(text)
    assert [anchor for anchor, _, _ in statements] == ANCHOR.findall(text)
    assert [(a, level) for a, _, level in statements] == [
        (rule_id.lower(), level) for _, rule_id, level in statements
    ]
    assert sorted(rid for rid, _ in STATED.findall(text)) == sorted(rid for _, rid, _ in statements)


def test_every_spec_rule_is_registered_with_its_level() -> None:
    spec = _spec_rules()
    missing = sorted(set(spec) - set(RULES))
    assert not missing, f"SPEC.md rules missing from conformance/core/rules.py: {missing}"
    wrong = {r: (RULES[r].level, level) for r, level in spec.items() if RULES[r].level != level}
    assert not wrong, f"registry level differs from SPEC.md (registry, spec): {wrong}"


def test_every_registered_rule_is_stated_in_spec() -> None:
    extra = sorted(set(RULES) - set(_spec_rules()))
    assert not extra, f"registered rules SPEC.md does not state under their anchor: {extra}"


def test_every_vector_rule_is_registered() -> None:
    unknown = sorted({v["id"]: v["rule"] for v in _vectors() if v["rule"] not in RULES}.items())
    assert not unknown, f"vectors naming unregistered rules: {unknown}"


def test_every_vector_is_run_by_a_suite_test(
    suite_items: list[tuple[str, dict[str, Any] | None]],
) -> None:
    run = {vector["id"] for _, vector in suite_items if vector is not None}
    idle = sorted(v["id"] for v in _vectors() if v["id"] not in run)
    assert not idle, f"golden vectors no suite test is parametrized over: {idle}"


def test_every_must_rule_is_named_by_a_vector_or_test(
    suite_items: list[tuple[str, dict[str, Any] | None]],
) -> None:
    named = {v["rule"] for v in _vectors()} | {rule for rule, _ in suite_items}
    unnamed = sorted(r.id for r in RULES.values() if r.level == MUST and r.id not in named)
    assert not unnamed, f"MUST rules no vector or test names: {unnamed}"


def test_every_rule_runs_for_the_reference(
    suite_items: list[tuple[str, dict[str, Any] | None]],
) -> None:
    """A rule runs when a suite test carries it and, for an operation vector, the
    reference declares the vector's operation (a test of an undeclared operation is
    skipped). Codec vectors name no operation; the reference declares every codec one."""
    reference = load_in_process("reference")
    assert reference is not None
    declared = set(reference.info.capabilities)
    runs = {
        rule
        for rule, vector in suite_items
        if vector is None or vector.get("op") is None or vector["op"] in declared
    }
    idle = sorted(set(RULES) - runs)
    assert not idle, f"rules no conformance test runs for the reference: {idle}"
    assert {r for r in runs if r not in RULES} == set()
