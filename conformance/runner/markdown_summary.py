"""``--summary-md PATH``: the run as Markdown, for a CI job summary (GitHub's
``$GITHUB_STEP_SUMMARY``, GitLab's report artifacts), in the manner of bowtie's: the
implementations with the known-failure list each used, outcome counts per implementation
and level, the producer x consumer matrix, the unexpected outcomes grouped by rule (id,
SPEC.md anchor, the first failing tests) and every run-level problem."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..drivers.base import ImplInfo
from .results_file import OUTCOMES
from .rule_groups import RuleGroup, one_line

#: How many failing tests each rule group lists.
FIRST_TESTS = 5
HEADINGS = {
    "pass": "pass",
    "fail": "fail",
    "known_failure": "known failure",
    "unexpected_pass": "unexpected pass",
    "skip": "skip",
}


def _code(text: str) -> str:
    """``text`` as an inline code span (backticks inside it widen the fence)."""
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if fence == "`" else f"{fence} {text} {fence}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(
    *,
    impls: Sequence[ImplInfo],
    known_failures: dict[str, str | None],
    summary: list[dict[str, Any]],
    matrix: list[dict[str, Any]],
    groups: list[RuleGroup],
    problems: list[str],
    narrowed: list[str],
    exit_status: int,
    wall_s: float,
) -> str:
    """The summary document."""
    unexpected = sum(len(g.tests) for g in groups)
    if exit_status == 0:
        verdict = "every outcome as expected"
    else:
        parts = [f"{unexpected} unexpected outcomes"] if unexpected else []
        parts += [f"{len(problems)} run problems"] if problems else []
        verdict = "FAILED: " + (", ".join(parts) or f"pytest exit status {exit_status}")
    out = [
        "## lmckv conformance",
        "",
        f"**{verdict}** ({wall_s:.1f} s)",
        "",
        "| implementation | kind | version | known-failure list |",
        "| --- | --- | --- | --- |",
    ]
    for info in impls:
        path = known_failures.get(info.name)
        out.append(
            f"| {_cell(info.name)} | {info.kind} | {_cell(info.version or '-')} | "
            f"{_code(path) if path else 'none'} |"
        )
    out += [
        "",
        "| implementation | level | " + " | ".join(HEADINGS[o] for o in OUTCOMES) + " |",
        "| --- | --- |" + " ---: |" * len(OUTCOMES),
    ]
    for row in summary:
        cells = " | ".join(str(row[o]) for o in OUTCOMES)
        out.append(f"| {_cell(row['impl'])} | {row['level']} | {cells} |")
    if matrix:
        out += [
            "",
            "### Producer × consumer",
            "",
            "| producer | consumer | checks | pass | fail | known failure |",
            "| --- | --- | ---: | ---: | ---: | ---: |",
        ]
        for m in matrix:
            out.append(
                f"| {_cell(m['producer'])} | {_cell(m['consumer'])} | {m['cases']} | "
                f"{m['pass']} | {m['fail']} | {m['known_failure']} |"
            )
    if groups:
        out += ["", f"### Unexpected outcomes by rule ({unexpected} tests, {len(groups)} rules)"]
        for group in groups:
            out += [
                "",
                f"#### {group.rule} ({group.level}): {len(group.tests)}",
                "",
                f"{_code(group.link)}: {one_line(group.summary, 300)}",
                "",
            ]
            for rec in group.tests[:FIRST_TESTS]:
                what = "unexpected pass" if rec["outcome"] == "unexpected_pass" else "fail"
                out.append(f"- {what} {_code(rec['id'])}: {_code(one_line(rec['reason']))}")
            if len(group.tests) > FIRST_TESTS:
                out.append(f"- ... and {len(group.tests) - FIRST_TESTS} more")
    if problems:
        out += ["", "### Problems", ""]
        out += [f"- {_code(one_line(p, 400))}" for p in problems]
    if narrowed:
        out += [
            "",
            "_Pair-count and stale-expectation checks off: selection narrowed by "
            + ", ".join(narrowed)
            + "._",
        ]
    return "\n".join(out) + "\n"


def write_markdown(path: Path, **fields: Any) -> None:
    """Write ``render_markdown(**fields)`` to ``path`` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_markdown(**fields), encoding="utf-8")
