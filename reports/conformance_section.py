"""Conformance sections: the implementation x rule matrix, the failures, producer x consumer."""

from __future__ import annotations

from html import escape

import pandas as pd

from . import figures
from .html import (
    OUTCOME_CLASS,
    Section,
    collapsible,
    figure,
    note,
    outcome_legend,
    paragraph,
    table,
)
from .inputs import OUTCOMES, ReportInputs
from .output import Output
from .summary import failures

# Worst first: the outcome a matrix cell shows when a rule has several tests for one impl.
SEVERITY = ("fail", "unexpected_pass", "known_failure", "pass", "skip")
LABEL = {
    "fail": "FAIL",
    "unexpected_pass": "unexpected pass",
    "known_failure": "known failure",
    "pass": "pass",
    "skip": "skip",
}
NO_RESULTS = "no conformance results file among the inputs: conformance is not reported"
REASON_CHARS = 400
SPEC_COLUMN = "SPEC.md §"


def spec_link(spec_href: str, anchor: object) -> str:
    """A link (relative to the report) to the SPEC.md heading where the rule is stated.

    ``spec_anchor`` may be given with or without its leading ``#``.
    """
    if not isinstance(anchor, str) or not anchor.lstrip("#"):
        return "—"
    name = escape(anchor.lstrip("#"))
    return f'<a href="{escape(spec_href)}#{name}">#{name}</a>'


def shorten(text: object, limit: int = REASON_CHARS) -> str:
    """A reason for a table cell: whitespace collapsed, cut at ``limit`` characters."""
    if not isinstance(text, str) or not text.strip():
        return "(no reason recorded)"
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _observed(text: object) -> str:
    """The observation cell: how the test failed (the known-failure line records it)."""
    return shorten(text, 160) if isinstance(text, str) and text.strip() else "—"


def rule_matrix(tests: pd.DataFrame, rules: pd.DataFrame, impls: list[str]) -> pd.DataFrame:
    """One row per rule (MUST first), per impl: worst outcome and counts of each outcome."""
    rule_ids = list(rules["id"]) + sorted(set(tests["rule"]) - set(rules["id"]))
    info = rules.set_index("id")
    rows = []
    for rule in rule_ids:
        known = rule in info.index
        level = info.at[rule, "level"] if known else "?"
        row: dict[str, object] = {
            "rule": rule,
            "level": level,
            "summary": info.at[rule, "summary"] if known else "",
            "spec_anchor": info.at[rule, "spec_anchor"] if known else None,
        }
        for impl in impls:
            sel = tests[(tests["rule"] == rule) & (tests["impl"] == impl)]
            counts = sel["outcome"].value_counts()
            worst = next((o for o in SEVERITY if counts.get(o, 0)), None)
            row[f"{impl}:worst"] = worst
            for outcome in OUTCOMES:
                row[f"{impl}:{outcome}"] = int(counts.get(outcome, 0))
        rows.append(row)
    frame = pd.DataFrame(rows)
    frame["_level"] = frame["level"].map({"MUST": 0, "SHOULD": 1}).fillna(2)
    return frame.sort_values(["_level"], kind="stable").drop(columns="_level")


def _cell_text(row: pd.Series, impl: str) -> str:
    worst = row[f"{impl}:worst"]
    if not isinstance(worst, str):
        return "— (not tested)"
    total = sum(int(row[f"{impl}:{o}"]) for o in OUTCOMES)
    passed = int(row[f"{impl}:pass"])
    return (
        f"pass · {passed}/{total}" if worst == "pass" else f"{LABEL[worst]} · {passed}/{total} pass"
    )


def _failures_by_rule(failed: pd.DataFrame, spec_href: str) -> str:
    """One row per implementation, rule and outcome: how many tests, and the first reason."""
    keys = ["impl", "rule", "level", "outcome", "spec_anchor"]
    grouped = failed.groupby(keys, sort=False, dropna=False)
    rows = grouped.agg(tests=("id", "count"), reason=("reason", "first")).reset_index()
    shown = pd.DataFrame(
        {
            "implementation": rows["impl"],
            "rule broken": rows["rule"],
            "level": rows["level"],
            "outcome": rows["outcome"].map(LABEL),
            "tests": rows["tests"],
            SPEC_COLUMN: [spec_link(spec_href, a) for a in rows["spec_anchor"]],
            "first reason": rows["reason"].map(lambda r: shorten(r, 240)),
        }
    )
    return table(
        shown,
        cell_class={"outcome": rows["outcome"].map(OUTCOME_CLASS)},
        raw_columns=frozenset({SPEC_COLUMN}),
        wrap_columns=frozenset({"first reason"}),
    )


def matrix_section(inputs: ReportInputs, out: Output, spec_href: str) -> Section:
    """Implementation x rule, coloured by worst outcome; then every failure with its reason."""
    if not inputs.conformance:
        return Section("conformance", "Conformance matrix", note(NO_RESULTS))
    tests = inputs.conformance_table("tests")
    rules = inputs.conformance_table("rules")
    impls = list(inputs.conformance_table("impls")["name"])
    impls += sorted(set(tests["impl"]) - set(impls))
    matrix = rule_matrix(tests, rules, impls)
    out.csv(matrix, "conformance_matrix.csv")
    out.csv(tests, "conformance_tests.csv")

    shown = pd.DataFrame(
        {
            "rule": matrix["rule"],
            "level": matrix["level"],
            SPEC_COLUMN: [spec_link(spec_href, a) for a in matrix["spec_anchor"]],
            "what it requires": matrix["summary"],
        }
    )
    classes = {}
    for impl in impls:
        shown[impl] = [_cell_text(row, impl) for _, row in matrix.iterrows()]
        classes[impl] = matrix[f"{impl}:worst"].map(OUTCOME_CLASS).reset_index(drop=True)
    body = [
        paragraph(
            f"{len(tests)} tests of {len(matrix)} rules on {len(impls)} implementations. "
            "Each cell shows the worst outcome of that implementation's tests of the rule "
            "and how many of them passed. Rows: rules (MUST first); columns: implementations."
        ),
        outcome_legend(),
        table(
            shown.reset_index(drop=True), cell_class=classes, raw_columns=frozenset({SPEC_COLUMN})
        ),
        "<h3>Failures, unexpected passes and known failures</h3>",
    ]
    failed = failures(tests, rules)
    out.csv(failed, "conformance_failures.csv")
    if failed.empty:
        body.append(paragraph("Every test passed or was skipped: no failures to list."))
    else:
        body.append(_failures_by_rule(failed, spec_href))
        shown_failures = pd.DataFrame(
            {
                "implementation": failed["impl"],
                "rule broken": failed["rule"],
                "level": failed["level"],
                "outcome": failed["outcome"].map(LABEL),
                "reason": failed["reason"].map(shorten),
                "observed": failed["observed"].map(_observed),
                SPEC_COLUMN: [spec_link(spec_href, a) for a in failed["spec_anchor"]],
                "producer": failed["producer"],
                "test": failed["id"],
            }
        )
        full = table(
            shown_failures,
            cell_class={"outcome": failed["outcome"].map(OUTCOME_CLASS)},
            raw_columns=frozenset({SPEC_COLUMN}),
            wrap_columns=frozenset({"reason", "observed", "test"}),
        )
        body.append(f"<h3>Every failing test ({len(failed)})</h3>")
        body.append(collapsible(full, len(failed), "conformance_failures.csv"))
    skipped = tests[tests["outcome"] == "skip"]
    if not skipped.empty:
        shown_skips = pd.DataFrame(
            {
                "implementation": skipped["impl"],
                "rule": skipped["rule"],
                "reason": skipped["reason"].map(shorten),
                "test": skipped["id"],
            }
        )
        rendered = table(shown_skips, wrap_columns=frozenset({"reason", "test"}))
        body.append(f"<h3>Skipped tests ({len(skipped)})</h3>")
        body.append(collapsible(rendered, len(skipped), "conformance_tests.csv"))
    return Section("conformance", "Conformance matrix", "".join(body))


def interop_section(inputs: ReportInputs, out: Output) -> Section:
    """The producer x consumer heatmap: which implementation reads which one's blobs; then
    the version dimension, each reader x each golden vector set (v1, v2)."""
    title = "Producer × consumer"
    if not inputs.conformance:
        return Section("interop", title, note(NO_RESULTS))
    matrix = inputs.conformance_table("matrix")
    versions = _versions_table(inputs, out)
    if matrix.empty:
        return Section(
            "interop",
            title,
            note("the conformance results hold no producer × consumer cases") + versions,
        )
    cells = (
        matrix.groupby(["producer", "consumer"], as_index=False)[
            ["cases", "pass", "fail", "known_failure"]
        ]
        .sum()
        .sort_values(["producer", "consumer"])
    )
    out.csv(cells, "producer_consumer.csv")
    figures.producer_consumer_heatmap(cells, out.path("producer_consumer.png"))
    cells_shown = cells.assign(
        **{"pass fraction": cells["pass"] / cells["cases"].where(cells["cases"] > 0)}
    )
    worst = [
        "o-fail" if f else ("o-known" if k else "o-pass")
        for f, k in zip(cells["fail"], cells["known_failure"], strict=True)
    ]
    body = (
        paragraph(
            "Blobs written by the row implementation, read by the column implementation: "
            "cases passed out of cases run (green: all pass; amber: known failures; red: fails)."
        )
        + figure(
            "producer_consumer.png",
            "producer by consumer heatmap of passed cases",
            "Cell text: passed/cases, known failures and failures.",
        )
        + table(cells_shown, row_class=pd.Series(worst))
        + versions
    )
    return Section("interop", title, body)


def _versions_table(inputs: ReportInputs, out: Output) -> str:
    """Reader x golden vector version: v1 readers must refuse every v2 vector with a typed
    error, v2 readers read both sets (SPEC.md, KV-VERSION); empty when no run has it."""
    rows = inputs.conformance_table("versions")
    if rows.empty:
        return ""
    cells = (
        rows.groupby(["reader", "reads", "vectors"], as_index=False)[
            ["cases", "pass", "fail", "known_failure"]
        ]
        .sum()
        .sort_values(["reader", "vectors"])
    )
    out.csv(cells, "reader_versions.csv")
    worst = [
        "o-fail" if f else ("o-known" if k else "o-pass")
        for f, k in zip(cells["fail"], cells["known_failure"], strict=True)
    ]
    return (
        "<h3>Reader × vector version</h3>"
        + paragraph(
            "Each reader's checks of the golden v1 and v2 vectors. A v1 reader (reads: v1) "
            "passes a v2 vector by refusing it with a typed error; a v2 reader reads both "
            "sets as their manifests say."
        )
        + table(cells.reset_index(drop=True), row_class=pd.Series(worst))
    )
