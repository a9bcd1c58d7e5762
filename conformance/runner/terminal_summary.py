"""The lines the suite adds at the end of pytest's terminal output."""

from __future__ import annotations

from typing import Any

from conformance.runner.results_file import OUTCOMES


def write_summary(
    tr: Any,
    summary: list[dict[str, Any]],
    matrix: list[dict[str, Any]],
    narrowed: list[str],
    problems: list[str],
) -> None:
    """The implementation x level table, the matrix rows, what was not checked and why, and
    every run-level problem (``tr`` is pytest's TerminalReporter)."""
    tr.section("lmckv conformance")
    tr.write_line(f"{'impl':<16}{'level':<8}" + "".join(f"{o:>17}" for o in OUTCOMES))
    for row in summary:
        cells = "".join(f"{row[o]:>17}" for o in OUTCOMES)
        tr.write_line(f"{row['impl']:<16}{row['level']:<8}{cells}")
    for row in matrix:
        tr.write_line(
            f"matrix {row['producer']} -> {row['consumer']}: {row['cases']} checks, "
            f"{row['pass']} pass, {row['fail']} fail, {row['known_failure']} known failures"
        )
    if narrowed:
        tr.write_line(
            "pair count and stale-expectation checks off: selection narrowed by "
            + ", ".join(narrowed)
        )
    for problem in problems:
        tr.write_line(f"ERROR: {problem}", red=True, bold=True)
