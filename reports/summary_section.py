"""The summary section: what a reader needs first, each number linked to its section."""

from __future__ import annotations

import json
from html import escape
from typing import Any

import pandas as pd

from ..bench.accuracy.l2_serdes import FP8
from ..bench.accuracy.lmcache_serdes import ADAPTER_TYPE, installed_release
from ..bench.recommendation.scope_choice import (
    MAX_ENCODE_COST,
    RULE_TEXT,
    ScopeChoice,
    choose_scope,
)
from ..bench.recommendation.serde_choice import PPL_BUDGET, SerdeChoice
from ..bench.recommendation.serde_choice import RULE_TEXT as SERDE_RULE
from ..bench.recommendation.store_cost import cost_text, store_cost
from . import figures
from .comparison import counts_text
from .e2e_section import SerdeGroup, primary, serde_choice_for, serde_groups
from .html import Section, details, note, paragraph, table
from .inputs import BenchRun, ReportInputs
from .output import Output
from .summary import (
    failures,
    headline_ratios,
    level_counts,
    matrix_counts,
    must_should_table,
)


def _card(big: str, label: str) -> str:
    return (
        f'<div class="card"><div class="big">{escape(big)}</div>'
        f'<div class="label">{escape(label)}</div></div>'
    )


def _verdicts(counts: pd.DataFrame, matrix: dict[str, int]) -> list[str]:
    """One sentence per implementation about its MUST rules (tests of one implementation),
    then one about the producer x consumer checks, so that a byte-compatibility break seen
    only between two implementations is on the first screen too."""
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
    checks = sum(matrix.values())
    if checks:
        failed = matrix.get("fail", 0) + matrix.get("unexpected_pass", 0)
        known = matrix.get("known_failure", 0)
        if failed:
            lines.append(f"producer × consumer: {failed} check(s) FAIL (of {checks})")
        else:
            lines.append(
                f"producer × consumer: no unexpected failures in {checks} check(s); "
                f"{known} known failure(s)"
            )
    return lines


def _percent(value: Any) -> str:
    return "not measured" if pd.isna(value) else f"{value:.1%}"


def _encode_speed(throughput: pd.DataFrame, scope: str) -> str:
    """The chosen scope's reference encode GB/s, median over cases and dtypes, per machine."""
    rows = throughput[
        (throughput["op"] == "encode")
        & (throughput["impl"] == "reference")
        & (throughput["scope"].astype(str) == scope)
    ]
    if rows.empty:
        return "encode speed not measured"
    speeds = rows.groupby(["machine", "device"], as_index=False)["gbps"].median()
    return "encode " + "; ".join(
        f"{r.gbps:.2f} GB/s on {r.device} ({r.machine})" for r in speeds.itertuples()
    )


def _sentence_start(text: str) -> str:
    """``text`` with its first letter upper-case (the rest as it is: names keep their case)."""
    return text[:1].upper() + text[1:]


def _encode_cost_text(row: pd.Series) -> str:
    """The chosen scope's encode cost as the rule measures it: the median over cases and
    dtypes of its paired slowdown against the fastest scope, against the rule's bound, with
    the per-pair range (the ratio of the median GB/s in the throughput table is a different,
    cruder figure)."""
    value = row["encode_cost"]
    if pd.isna(value):
        return " (encode cost not measured)"
    side = "inside" if value <= MAX_ENCODE_COST else "outside"
    cost = (
        f" ({_percent(value)} slower than the fastest scope, {side} the rule's "
        f"{MAX_ENCODE_COST:.0%} bound"
    )
    if pd.isna(row["encode_cost_low"]) or row["encode_cost_low"] == row["encode_cost_high"]:
        return cost + ")"
    return (
        f"{cost}). That is the median over cases and dtypes of the slowdown paired per case "
        f"and dtype, which ranges from {_percent(row['encode_cost_low'])} to "
        f"{_percent(row['encode_cost_high'])}."
    )


def _stress_text(choice: ScopeChoice) -> str:
    """The stress families' verdict on the chosen scope, beside the decision."""
    row = choice.table[choice.table["chosen"]].iloc[0]
    worst = choice.table["attn_err_stress"]
    if pd.isna(row["attn_err_stress"]):
        return ""
    rank = int((worst < row["attn_err_stress"]).sum()) + 1
    return (
        f" Beside it, the synthetic stress families (adversarial by construction, not used to "
        f"decide): worst attention-output error {row['attn_err_stress']:.3g}, rank {rank} of "
        f"{len(worst)} scopes."
    )


def _sureness(row: pd.Series) -> str:
    if pd.isna(row["kl"]):
        return "no end-to-end intervals in this run (the model did not run); see the notes."
    return (
        "the bracketed ranges are 95% block-bootstrap intervals over the scored tokens (see "
        "End-to-end accuracy); the margin to the other scopes is a paired interval."
    )


def first_screen(choice: ScopeChoice, throughput: pd.DataFrame) -> str:
    """The operator's answer: which scope, its cost in speed and bytes, what it does to the
    model's predictions, and how sure the figures are."""
    if choice.scope is None:
        return "".join(note(text) for text in choice.notes)
    row = choice.table[choice.table["chosen"]].iloc[0]
    bpt = row["bytes_per_token"]
    cost = (
        ("storage not measured" if pd.isna(bpt) else f"{bpt:,.1f} bytes per token")
        + f" ({_percent(row['bytes_overhead'])} over the smallest scope). "
        + _sentence_start(_encode_speed(throughput, choice.scope))
        + _encode_cost_text(row)
    )
    cards = [_card(choice.scope, "recommended scale scope")]
    if not pd.isna(row["kl"]):
        cards += [
            _card(f"{row['kl']:.1e}", "next-token KL (nats), worse dtype"),
            _card(f"{row['top1']:.1%}", "top-1 agreement"),
        ]
    if not pd.isna(bpt):
        cards.append(_card(f"{bpt:,.1f}", "bytes per token"))
    return (
        f'<div class="cards">{"".join(cards)}</div>'
        + paragraph(f"Recommended scale scope: {choice.scope}.", "verdict")
        + paragraph(f"Effect on the model: {choice.statement}")
        + paragraph(f"What it costs: {cost}.")
        + paragraph(f"How sure: {_sureness(row)}{_stress_text(choice)}")
    )


def _scope_details(choice: ScopeChoice, out: Output) -> str:
    body = [paragraph(f"Rule: {RULE_TEXT} Judged on {choice.basis}.", "rule")]
    body += [note(text) for text in choice.notes]
    if not choice.table.empty:
        out.csv(choice.table, "scope_choice.csv")
        shown = choice.table.drop(
            columns=[c for c in choice.table.columns if c.endswith(("_low", "_high"))]
        ).assign(
            encode_cost=choice.table["encode_cost"].map(_percent),
            bytes_overhead=choice.table["bytes_overhead"].map(_percent),
        )
        rows = pd.Series(["chosen" if c else "" for c in choice.table["chosen"]])
        body.append(
            details(
                "Every scope against the rule (intervals in scope_choice.csv)",
                table(shown, row_class=rows),
                "scope_choice.csv",
            )
        )
    return "".join(body)


def recorded_release(runs: list[BenchRun]) -> str:
    """The LMCache release ``runs`` recorded in their headers (``lmcache 0.5.6``), each file's
    where they disagree, ``not recorded`` where none records one: never the release installed
    where the report is built."""
    files: dict[str, list[str]] = {}
    for run in runs:
        if run.lmcache_release is not None:
            files.setdefault(run.lmcache_release, []).append(run.path.name)
    if not files:
        return "lmcache release not recorded"
    if len(files) == 1:
        return next(iter(files))
    found = ", ".join(f"{release} ({'; '.join(names)})" for release, names in files.items())
    return f"{found}: the inputs disagree"


def _answer_runs(group: SerdeGroup, serde: str, inputs: ReportInputs) -> list[BenchRun]:
    """The bench files behind the answer: the model's e2e rows, then the store-path rows of
    the serde on the page's adapter that its cost line quotes."""
    case = f"{ADAPTER_TYPE}:{serde}"
    store = []
    for run in inputs.bench:
        rows = run.table("throughput")
        quoted = ((rows["impl"] == "lmcache") & (rows["case"] == case)).any()
        if quoted and all(run is not seen for seen in group.runs):
            store.append(run)
    return [*group.runs, *store]


def _configure_text(release: str) -> str:
    """The first answer line's head: the release the run measured with (from its inputs), and
    the one that checked the config here where that differs."""
    here = installed_release()
    checked = "" if here == release else f"; checked here with {here}"
    return f"Configure --l2-adapter (run with {release}{checked}): "


def _answer_lines(choice: SerdeChoice, cost: pd.DataFrame, release: str) -> list[tuple[str, str]]:
    """(id, text) of the three lines under the answer figure: what to configure (and the
    LMCache release the run recorded), what it costs (bytes, and the store path where the
    run measured it), how sure."""
    row = choice.chosen
    assert row is not None
    share = row["bytes_vs_none"]
    size = f"{row['l2_bytes_per_token']:,.0f} bytes in L2 per token" + (
        "" if pd.isna(share) else f" ({share:.0%} of no serde)"
    )
    path = cost_text(cost, str(row["serde"]), ADAPTER_TYPE)
    cost_line = f"Costs: {size}; " + (
        f"through LMCache {path}." if path else "store-path timing is not in this run."
    )
    if bool(row["exact"]):
        sure = "the cache is stored bit for bit (checked), nothing to estimate."
    else:
        sure = (
            f"perplexity {row['ppl_change']:+.2%} [{row['ppl_change_low']:+.2%}, "
            f"{row['ppl_change_high']:+.2%}], 95% block-bootstrap interval; budget "
            f"+{PPL_BUDGET:.0%}."
        )
    return [
        ("answer-configure", _configure_text(release)),
        ("answer-cost", cost_line),
        ("answer-sure", f"How sure: {sure}"),
    ]


def _answer_block(
    choice: SerdeChoice, label: str, cost: pd.DataFrame, release: str, out: Output
) -> str:
    """The first screen: the answer figure and its three lines (``release``: the LMCache
    release the inputs recorded)."""
    figures.answer_chart(choice.table, PPL_BUDGET, cost, out.path("answer.png"))
    width, height = figures.ANSWER_SIZE
    skipped = choice.table[choice.table["skipped"] != ""]["serde"].tolist()
    caption = (
        f"{label}: each point a serde and scope; hollow needs a newer release; ringed: recommended."
    )
    if skipped:
        caption += f" Not plotted: {', '.join(map(str, skipped))} (reasons below)."
    lines = []
    for key, text in _answer_lines(choice, cost, release):
        code = f"<code>{escape(choice.config)}</code>" if key == "answer-configure" else ""
        lines.append(f'<li id="{key}">{escape(text)}{code}</li>')
    return (
        f'<figure id="answer-figure"><img src="answer.png" width="{width}" height="{height}" '
        f'alt="bytes in L2 per token against KL and perplexity change per serde">'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
        f'<ol id="answer-lines">{"".join(lines)}</ol>'
    )


def _serde_screen(inputs: ReportInputs, out: Output, document: dict[str, Any]) -> str:
    """Per model (the bundled one, then each ``bench e2e`` file's, never pooled): the L2
    adapter JSON to paste and why; the first model's answer as a figure and three lines."""
    throughput = inputs.bench_table("throughput") if inputs.bench else pd.DataFrame()
    cost = store_cost(throughput)
    parts: list[str] = []
    below: list[str] = []
    chosen: list[dict[str, Any]] = []
    for group in serde_groups(inputs):
        label = group.label
        choice = serde_choice_for(group.context, label, group.e2e, group.skips, throughput)
        if choice.chosen is None:
            below.append(note(f"{label}: no serde recommended ({'; '.join(choice.notes)})"))
            continue
        release = recorded_release(_answer_runs(group, str(choice.chosen["serde"]), inputs))
        if not parts:
            parts.append(_answer_block(choice, label, cost, release, out))
        else:
            below.append(paragraph(f"L2 adapter for {label}: {choice.config}", "verdict"))
        below.append(paragraph(choice.statement))
        if choice.newer:
            below.append(paragraph(choice.newer, "note"))
        for row in choice.table[choice.table["skipped"] != ""].itertuples():
            below.append(note(f"{row.serde}: not measured: {row.skipped}"))
        chosen.append(
            {
                "model": label,
                "config": choice.config,
                "adapter_spec": json.loads(choice.config),
                "statement": choice.statement,
                "newer": choice.newer,
                "lmcache_release": release,
            }
        )
    if not parts:
        parts.append(note("no end-to-end serde rows among the inputs: no serde to recommend"))
    if chosen:
        below.append(paragraph(f"Serde rule: {SERDE_RULE}", "rule"))
        document["serde_choice"] = chosen
    return "".join(parts + below)


#: One sentence per section, linked from the first screen: (link text, what it shows).
SECTION_SENTENCES = {
    "e2e": ("End-to-end accuracy", "the real model's next-token predictions per scope's cache."),
    "accuracy": ("Accuracy and storage", "V error per scope on realistic data, stress apart."),
    "throughput": ("Throughput", "GB/s per operation and machine against the limits."),
    "conformance": ("Conformance matrix", "every rule per implementation, failures with reasons."),
    "interop": ("Interoperability", "blobs written by one implementation, read by another."),
    "comparison": ("Comparison", "against a baseline run (lmckv bench compare's verdicts)."),
    "environment": ("Run environment", "the machines and software behind each file."),
}


def summary_section(
    inputs: ReportInputs, out: Output, comparison: dict[str, dict[str, int]]
) -> Section:
    """The first screen (recommended scope, its cost, its effect on the model, how sure), then
    one sentence per section, conformance counts, headline throughput per machine.

    ``comparison``: bench compare's verdict counts per compared file (empty: no baseline).
    """
    body: list[str] = []
    document: dict[str, Any] = {}
    body.append(_serde_screen(inputs, out, document))
    if inputs.bench:
        throughput = inputs.bench_table("throughput")
        e2e = primary(inputs.bench_table("e2e"))
        e2e = e2e[e2e["serde"] != FP8]  # the plain cast has no scope to choose
        choice = choose_scope(inputs.bench_table("accuracy"), throughput, e2e)
        document["scope_choice"] = {
            "scope": choice.scope,
            "statement": choice.statement,
            "rule": RULE_TEXT,
            "basis": choice.basis,
            "notes": choice.notes,
            "table": choice.table.drop(columns=["blocks"], errors="ignore").to_dict("records"),
        }
        body.append(first_screen(choice, throughput))
    else:
        body.append(note("no bench results file among the inputs: no throughput or scope choice"))

    if inputs.conformance:
        tests = inputs.conformance_table("tests")
        rules = inputs.conformance_table("rules")
        impls = inputs.conformance_table("impls")
        counts = level_counts(tests)
        failed = failures(tests, rules)
        lines = _verdicts(counts, matrix_counts(tests))
        body.append("".join(paragraph(line, "verdict") for line in lines))
        document["implementations"] = impls.to_dict("records")
        document["counts"] = counts.to_dict("records")
        document["failures"] = failed.to_dict("records")
    else:
        body.append(note("no conformance results file among the inputs: no pass counts"))

    if comparison:
        document["comparison_verdicts"] = comparison
        for name, verdicts in comparison.items():
            text = f"Against the baseline (lmckv bench compare), {name}: {counts_text(verdicts)}."
            body.append(paragraph(text, "verdict"))

    links = "".join(
        f'<li><a href="#{key}">{escape(link)}</a>: {escape(text)}</li>'
        for key, (link, text) in SECTION_SENTENCES.items()
    )
    body.append(f"<ul>{links}</ul>")
    if inputs.bench:
        body.append("<h3>Why this scope</h3>" + _scope_details(choice, out))
        ratios = headline_ratios(throughput)
        out.csv(ratios, "headline_ratios.csv")
        document["headline_ratios"] = ratios.to_dict("records")
        body.append("<h3>Headline throughput per machine (reference implementation)</h3>")
        body.append(
            table(ratios) if not ratios.empty else note("no reference throughput rows in this run")
        )
    if inputs.conformance:
        body.append(
            "<h3>Conformance: tests passed per level</h3>" + table(must_should_table(counts))
        )
    out.json(document, "summary.json")
    return Section("summary", "Summary", "".join(body))
