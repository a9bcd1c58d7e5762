"""The end-to-end section: what each scope and format does to the real model's predictions.

Rows of kind ``e2e`` (``bench.accuracy.e2e``): next-token KL, top-1 agreement and perplexity change
with 95% block-bootstrap intervals per scope, format and cache dtype; the one-layer-at-a-time
KL; and the V statistics of the real cache beside those of the matched synthetic family.
"""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from ..bench.accuracy.e2e import CONTEXT as PRIMARY_CONTEXT
from ..bench.accuracy.l2_serdes import FP8, K16V8, K16V8_V_ONLY
from ..bench.common.scopes import scope_rank
from ..bench.recommendation.serde_choice import RULE_TEXT as SERDE_RULE
from ..bench.recommendation.serde_choice import SerdeChoice, choose_serde, serde_table
from . import figures
from .bench_section import NO_BENCH, skip_reasons
from .html import Section, details, figure, note, paragraph, table
from .inputs import BenchRun, ReportInputs, serde_skips
from .output import Output

STATS = ("v_amax", "head_spread", "page_spread", "channel_spread")


def _ci(row: pd.Series, scale: float, spec: str) -> str:
    return (
        f"{row['value'] * scale:{spec}} [{row['ci_low'] * scale:{spec}}, "
        f"{row['ci_high'] * scale:{spec}}]"
    )


def e2e_table(e2e: pd.DataFrame) -> pd.DataFrame:
    """One row per (format, scope), columns metric x cache dtype as ``value [low, high]``."""
    rows = e2e[e2e["layer"].isna() & e2e["metric"].isin(["kl", "top1", "ppl_change"])]
    specs = {
        "kl": (1.0, ".2e", "KL"),
        "top1": (100.0, ".1f", "top-1 %"),
        "ppl_change": (100.0, "+.2f", "ppl change %"),
    }
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for _, row in rows.iterrows():
        scale, spec, name = specs[str(row["metric"])]
        key = (str(row["fmt"]), str(row["scope"]))
        cells.setdefault(key, {})[f"{name} {row['cache_dtype']}"] = _ci(row, scale, spec)
    ordered = sorted(cells, key=lambda k: (k[0] != "e4m3", k[0], scope_rank(k[1]), k[1]))
    columns = [f"{n} {d}" for _, _, n in specs.values() for d in ("float16", "bfloat16")]
    frame = pd.DataFrame(
        [{"V format": f, "scope": s, **cells[(f, s)]} for f, s in ordered],
        columns=["V format", "scope", *columns],
    )
    return frame


def stats_table(e2e: pd.DataFrame) -> pd.DataFrame:
    """Per V statistic and data source: median and range over layers."""
    rows = e2e[e2e["metric"].isin(STATS)]
    out = rows.groupby(["metric", "model"])["value"].agg(["median", "min", "max"]).reset_index()
    out["metric"] = pd.Categorical(out["metric"], STATS, ordered=True)
    return out.sort_values(["metric", "model"]).rename(
        columns={"metric": "V statistic", "model": "data", "median": "median over layers"}
    )


def e2e_section(inputs: ReportInputs, out: Output) -> Section:
    """The real model's next-token predictions with each scope's cache (primary accuracy)."""
    title = "End-to-end accuracy (real model)"
    if not inputs.bench:
        return Section("e2e", title, note(NO_BENCH) + serde_section_body(inputs, out))
    every = inputs.bench_table("e2e")
    e2e = primary(every)
    scored = e2e[e2e["metric"].isin(["kl", "top1", "ppl_change"])]
    if scored.empty:
        reason = skip_reasons(inputs.bench_table("skip"), "e2e") or "no e2e rows in the files"
        return Section("e2e", title, note(f"no end-to-end rows in this run: {reason}"))
    out.csv(every, "e2e.csv")
    first = scored.iloc[0]
    machines = scored["machine"].nunique()
    body = [
        paragraph(
            f"{first['model']} scores {int(first['tokens'])} continuation tokens "
            f"({int(first['windows'])} windows of committed text, teacher forcing) after a "
            "256-token prefix whose cache went through each scope and format; each figure is "
            "compared with the same cache unquantized in the same dtype. Bars: 95% block-"
            "bootstrap intervals (blocks of 16 tokens)."
            + (
                f" Rows from {machines} machines are pooled: the model's numerics do not "
                "depend on the machine."
                if machines > 1
                else ""
            )
        )
    ]
    figures.e2e_chart(scored, out.path("e2e.png"))
    body.append(
        figure(
            "e2e.png",
            "next-token KL, top-1 agreement and perplexity change per scope",
            "Per scope: KL from the unquantized cache, top-1 agreement, perplexity change; "
            "colour: V format; marker: cache dtype (circle float16, square bfloat16).",
        )
    )
    shown = e2e_table(scored)
    out.csv(shown, "e2e_table.csv")
    body.append(
        details(
            f"KL, top-1 and perplexity change with 95% intervals ({len(shown)} rows)",
            table(shown),
            "e2e_table.csv",
        )
    )
    layers = e2e[e2e["metric"] == "layer_kl"]
    if not layers.empty:
        figures.layer_chart(layers, out.path("e2e_layers.png"))
        top = layers.sort_values("value", ascending=False).iloc[0]
        body.append(
            paragraph(
                f"Quantizing one layer at a time: layer {int(top['layer'])} contributes most "
                f"({top['scope']}, KL {top['value']:.2e})."
            )
        )
        body.append(
            figure(
                "e2e_layers.png",
                "KL with only one layer quantized, per layer",
                "Next-token KL when only that layer's V is quantized (first window), for the "
                "best and the worst e4m3 scope in float16.",
            )
        )
    stats = stats_table(e2e)
    if not stats.empty:
        out.csv(stats, "v_stats.csv")
        body.append(
            paragraph(
                "The real cache's V statistics beside the matched synthetic family's: the "
                "realistic families resemble these; the stress families exceed them by orders "
                "of magnitude on purpose."
            )
        )
        body.append(details("V statistics per layer (median, range)", table(stats), "v_stats.csv"))
    body.append(serde_section_body(inputs, out))
    return Section("e2e", title, "".join(body))


def primary(e2e: pd.DataFrame, context: int = PRIMARY_CONTEXT) -> pd.DataFrame:
    """The rows at the primary context (files from before contexts: 256), without the V-only
    serde's copies of the storage-only figures."""
    at = e2e["context"].isna() | (e2e["context"] == context)
    return e2e[at & (e2e["serde"] != K16V8_V_ONLY)]


def context_table(e2e: pd.DataFrame) -> pd.DataFrame:
    """KL (worse dtype) per serde and scope at each measured context; empty with one."""
    rows = e2e[
        (e2e["metric"] == "kl")
        & e2e["layer"].isna()
        & e2e["serde"].isin([FP8, K16V8])
        & e2e["context"].notna()
    ]
    if rows["context"].nunique() < 2:
        return pd.DataFrame()
    worst = rows.groupby(["serde", "scope", "context"])["value"].max().reset_index()
    table = worst.pivot(index=["serde", "scope"], columns="context", values="value")
    table.columns = [f"KL at {int(c)}" for c in table.columns]
    return table.reset_index()


class SerdeGroup(NamedTuple):
    """One model's rows for the serde rule."""

    label: str
    #: its primary context (tokens)
    context: int
    e2e: pd.DataFrame
    #: skipped serdes: name -> reason
    skips: dict[str, str]
    #: the bench files its e2e rows come from
    runs: list[BenchRun]


def serde_groups(inputs: ReportInputs) -> list[SerdeGroup]:
    """The bundled model of the bench runs, then each ``lmckv bench e2e`` file's model:
    judged apart, never pooled."""
    groups = []
    if inputs.bench:
        e2e = inputs.bench_table("e2e")
        scored = e2e[e2e["serde"].notna()]
        if not scored.empty:
            skips = serde_skips(inputs.bench_table("skip"))
            runs = [run for run in inputs.bench if run.table("e2e")["serde"].notna().any()]
            label = f"{scored['model'].iloc[0]} (bundled)"
            groups.append(SerdeGroup(label, PRIMARY_CONTEXT, e2e, skips, runs))
    models = zip(inputs.model_rows(), inputs.models, strict=True)
    return groups + [SerdeGroup(*row, [run]) for row, run in models]


def serde_choice_for(
    context: int, label: str, e2e: pd.DataFrame, skips: dict[str, str], throughput: pd.DataFrame
) -> SerdeChoice:
    """The serde rule over one model's rows at its primary context."""
    at = e2e[(e2e["context"] == context) & e2e["serde"].notna()]
    return choose_serde(serde_table(at, throughput, skips), label, context)


def serde_section_body(inputs: ReportInputs, out: Output) -> str:
    """Per model: every serde and scope against the serde rule, and error vs context."""
    throughput = inputs.bench_table("throughput") if inputs.bench else pd.DataFrame()
    body = []
    for index, (label, context, e2e, skips, _) in enumerate(serde_groups(inputs)):
        choice = serde_choice_for(context, label, e2e, skips, throughput)
        bounds = [c for c in choice.table.columns if str(c).endswith(("_low", "_high"))]
        shown = choice.table.drop(columns=bounds)
        name = f"serdes_{index}.csv"
        out.csv(choice.table, name)
        body.append(
            details(f"{label}: every serde and scope at {context} tokens", table(shown), name)
        )
        by_context = context_table(e2e)
        if not by_context.empty:
            name = f"serdes_context_{index}.csv"
            out.csv(by_context, name)
            body.append(
                details(f"{label}: KL (worse dtype) vs context length", table(by_context), name)
            )
    if body:
        body.insert(0, paragraph(f"Serde rule: {SERDE_RULE}"))
    return "".join(body)
