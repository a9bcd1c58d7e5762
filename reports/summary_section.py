"""The summary section: what a reader needs first, each number linked to its section."""

from __future__ import annotations

from html import escape
from typing import Any

import pandas as pd

from reports.comparison import counts_text
from reports.html import Section, note, paragraph, table
from reports.load import ReportInputs
from reports.output import Output
from reports.scope_choice import RULE_TEXT, ScopeChoice, choose_scope
from reports.summary import failures, headline_ratios, level_counts, must_should_table


def _card(big: str, label: str) -> str:
    return (
        f'<div class="card"><div class="big">{escape(big)}</div>'
        f'<div class="label">{escape(label)}</div></div>'
    )


def _verdicts(counts: pd.DataFrame) -> list[str]:
    """One sentence per implementation about its MUST rules."""
    lines = []
    for impl, group in counts.groupby("impl", sort=False):
        must = group[group["level"] == "MUST"]
        failed = int(must["fail"].sum() + must["unexpected_pass"].sum())
        known = int(must["known_failure"].sum())
        total = int(must["total"].sum())
        if failed:
            lines.append(f"{impl}: {failed} MUST test(s) FAIL (of {total})")
        elif known:
            lines.append(f"{impl}: no unexpected MUST failures; {known} known MUST failure(s)")
        else:
            lines.append(f"{impl}: every MUST test passes or is skipped ({total} tests)")
    return lines


def _percent(value: Any) -> str:
    return "not measured" if pd.isna(value) else f"{value:.1%}"


def _scope_body(choice: ScopeChoice) -> str:
    body = [paragraph(f"Rule: {RULE_TEXT} Judged on {choice.basis}.", "rule")]
    body += [note(text) for text in choice.notes]
    if choice.scope is not None:
        chosen = choice.table[choice.table["chosen"]].iloc[0]
        bpt = chosen["bytes_per_token"]
        body.append(
            paragraph(
                f"Recommended scale scope: {choice.scope}. Attention-output error "
                f"{chosen['attn_rel_err']:.4g}; encode cost {_percent(chosen['encode_cost'])} "
                "against the fastest scope; storage "
                + ("not measured" if pd.isna(bpt) else f"{bpt:,.1f} bytes per token")
                + f" ({_percent(chosen['bytes_overhead'])} over the smallest scope).",
                "verdict",
            )
        )
    if not choice.table.empty:
        shown = choice.table.assign(
            encode_cost=choice.table["encode_cost"].map(_percent),
            bytes_overhead=choice.table["bytes_overhead"].map(_percent),
        ).rename(
            columns={
                "attn_rel_err": "attention-output error",
                "encode_cost": "encode cost vs fastest",
                "bytes_per_token": "bytes per token",
                "bytes_overhead": "bytes over smallest",
                "within_bounds": "within bounds",
            }
        )
        rows = pd.Series(["chosen" if c else "" for c in choice.table["chosen"]])
        body.append(table(shown, row_class=rows))
    return "".join(body)


def summary_section(
    inputs: ReportInputs, out: Output, comparison: dict[str, dict[str, int]]
) -> Section:
    """Implementations, MUST/SHOULD counts, known failures, headline ratios, recommended scope.

    ``comparison``: bench compare's verdict counts per compared file (empty: no baseline).
    """
    cards: list[str] = []
    body: list[str] = []
    document: dict[str, Any] = {}

    if inputs.conformance:
        tests = inputs.conformance_table("tests")
        rules = inputs.conformance_table("rules")
        impls = inputs.conformance_table("impls")
        counts = level_counts(tests)
        failed = failures(tests, rules)
        known = failed[failed["outcome"] == "known_failure"]
        hard = failed[failed["outcome"] != "known_failure"]
        cards += [
            _card(str(len(impls)), "implementations tested: " + ", ".join(impls["name"])),
            _card(str(len(hard)), "failures + unexpected passes"),
            _card(str(len(known)), "known failures"),
        ]
        body.append("".join(paragraph(line, "verdict") for line in _verdicts(counts)))
        per_impl = must_should_table(counts)
        body.append("<h3>Conformance: tests passed per level</h3>" + table(per_impl))
        body.append(
            "<p>Every failure with its reason and the SPEC.md rule it breaks: "
            '<a href="#conformance">Conformance matrix</a>.</p>'
        )
        if not known.empty:
            grouped = known.groupby(["impl", "rule", "level"], as_index=False).agg(
                tests=("id", "count"),
                reason=(
                    "reason",
                    lambda r: "; ".join(sorted({str(x) for x in r if isinstance(x, str)})),
                ),
            )
            body.append("<h3>Known failures</h3>" + table(grouped))
        document["implementations"] = impls.to_dict("records")
        document["counts"] = counts.to_dict("records")
        document["failures"] = failed.to_dict("records")
    else:
        body.append(note("no conformance results file among the inputs: no pass counts"))

    if inputs.bench:
        ratios = headline_ratios(inputs.bench_table("throughput"))
        out.csv(ratios, "headline_ratios.csv")
        document["headline_ratios"] = ratios.to_dict("records")
        body.append("<h3>Headline throughput (reference implementation)</h3>")
        body.append(
            table(ratios) if not ratios.empty else note("no reference throughput rows in this run")
        )
        choice = choose_scope(inputs.bench_table("accuracy"), inputs.bench_table("throughput"))
        out.csv(choice.table, "scope_choice.csv")
        document["scope_choice"] = {
            "scope": choice.scope,
            "rule": RULE_TEXT,
            "basis": choice.basis,
            "notes": choice.notes,
            "table": choice.table.to_dict("records"),
        }
        body.append("<h3>Recommended scale scope</h3>" + _scope_body(choice))
        cards.append(_card(choice.scope or "none", "recommended scale scope"))
    else:
        body.append(note("no bench results file among the inputs: no throughput or scope choice"))

    if comparison:
        document["comparison_verdicts"] = comparison
        for name, verdicts in comparison.items():
            text = f"Against the baseline (lmckv bench compare), {name}: {counts_text(verdicts)}."
            body.append(paragraph(text, "verdict"))

    out.json(document, "summary.json")
    head = f'<div class="cards">{"".join(cards)}</div>' if cards else ""
    return Section("summary", "Summary", head + "".join(body))
