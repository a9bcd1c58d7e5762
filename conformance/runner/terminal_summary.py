"""The lines the suite adds at the end of pytest's terminal output."""

from __future__ import annotations

from typing import Any

from .results_file import OUTCOMES
from .rule_groups import RuleGroup, one_line

#: How many failing tests each rule group names in the terminal.
FIRST_TESTS = 3


def write_summary(
    tr: Any,
    summary: list[dict[str, Any]],
    matrix: list[dict[str, Any]],
    narrowed: list[str],
    problems: list[str],
    *,
    known_failures: dict[str, str | None] | None = None,
    groups: list[RuleGroup] | None = None,
    outputs: list[tuple[str, str]] | None = None,
) -> None:
    """The implementation x level table, the matrix rows, the known-failure list of each
    implementation, the failures grouped by rule, what was not checked and why, every
    run-level problem and the files written (``tr`` is pytest's TerminalReporter)."""
    tr.section("lmckv conformance")
    width = max([len("impl"), *(len(row["impl"]) for row in summary)]) + 2  # a name apart
    tr.write_line(f"{'impl':<{width}}{'level':<8}" + "".join(f"{o:>17}" for o in OUTCOMES))
    for row in summary:
        cells = "".join(f"{row[o]:>17}" for o in OUTCOMES)
        tr.write_line(f"{row['impl']:<{width}}{row['level']:<8}{cells}")
    for row in matrix:
        tr.write_line(
            f"matrix {row['producer']} -> {row['consumer']}: {row['cases']} checks, "
            f"{row['pass']} pass, {row['fail']} fail, {row['known_failure']} known failures"
        )
    for name, path in (known_failures or {}).items():
        tr.write_line(f"known failures of {name}: {path or 'none'}")
    if groups:
        total = sum(len(g.tests) for g in groups)
        tr.write_line(f"unexpected outcomes by rule ({total} tests, {len(groups)} rules):")
        for group in groups:
            tr.write_line(
                f"  {group.rule} ({group.level}) {group.link}: {len(group.tests)} "
                f"- {one_line(group.summary, 100)}",
                red=True,
            )
            for rec in group.tests[:FIRST_TESTS]:
                tr.write_line(f"    {rec['id']}: {one_line(rec['reason'], 160)}")
            if len(group.tests) > FIRST_TESTS:
                tr.write_line(f"    ... and {len(group.tests) - FIRST_TESTS} more")
    if narrowed:
        tr.write_line(
            "pair count and stale-expectation checks off: selection narrowed by "
            + ", ".join(narrowed)
        )
    for problem in problems:
        tr.write_line(f"ERROR: {problem}", red=True, bold=True)
    for what, path in outputs or []:
        tr.write_line(f"{what}: {path}")
