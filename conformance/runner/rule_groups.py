"""Failures grouped by the rule they break, and the ``[RULE-ID SPEC.md#anchor]`` tag that
starts every failure message."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core.rules import RULES

#: Where the rules are stated; a rule's anchor is appended to it.
SPEC_PATH = "reference_impl/SPEC.md"
#: The outcomes that make a run fail, test by test.
UNEXPECTED = ("fail", "unexpected_pass")


def spec_link(rule_id: str) -> str:
    """``reference_impl/SPEC.md#kv-crc`` for ``KV-CRC``."""
    rule = RULES.get(rule_id)
    return SPEC_PATH + (rule.spec_anchor if rule is not None else "#" + rule_id.lower())


def rule_tag(rule_id: str) -> str:
    """``[KV-CRC reference_impl/SPEC.md#kv-crc]``: the prefix of a failure message."""
    return f"[{rule_id} {spec_link(rule_id)}]"


@dataclass
class RuleGroup:
    """The unexpected outcomes of one rule, in node id order."""

    rule: str
    level: str
    summary: str
    tests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def link(self) -> str:
        return spec_link(self.rule)


def group_failures(records: Iterable[dict[str, Any]]) -> list[RuleGroup]:
    """Failed and unexpectedly passing tests by rule: MUST rules first, then by count."""
    groups: dict[str, RuleGroup] = {}
    for rec in sorted(records, key=lambda r: str(r["id"])):
        if rec["outcome"] not in UNEXPECTED:
            continue
        rule = RULES.get(rec["rule"])
        group = groups.get(rec["rule"])
        if group is None:
            summary = rule.summary if rule is not None else ""
            group = groups[rec["rule"]] = RuleGroup(rec["rule"], rec["level"], summary)
        group.tests.append(rec)
    return sorted(groups.values(), key=lambda g: (g.level != "MUST", -len(g.tests), g.rule))


def one_line(text: str | None, limit: int = 200) -> str:
    """A reason on one line, cut to ``limit`` characters."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
