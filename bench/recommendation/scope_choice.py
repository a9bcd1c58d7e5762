"""Recommend a V scale scope (the header's ``scale_scope`` field) from measured rows.

The rule, stated on the page with the numbers it used:

1. Eligible scopes store their scales in the blob (``EXTERNAL`` and its variants such as
   ``EXTERNAL_CALIBRATED`` do not: their scales travel out of band, so a blob alone cannot
   be decoded) and were measured.
2. A scope is within bounds when its encode throughput costs at most ``MAX_ENCODE_COST``
   relative to the fastest eligible scope (reference impl, paired per machine, device, case
   and dtype, median over cases, worst machine and device) and its storage bytes per token
   exceed the smallest eligible scope's by at most ``MAX_BYTES_OVERHEAD``. Encode speed is
   compared by interval, not by median: in a case a scope is slower than the fastest only
   when its interquartile GB/s interval (from the row's q25_s/q75_s, else its per-process
   samples) lies entirely below the fastest's; where the intervals overlap its cost there
   is 0, so noise cannot separate two scopes (nor flip a tie broken on speed).
3. Among scopes within bounds, the one that moves the real model's predictions least wins:
   the end-to-end next-token KL divergence (``bench.accuracy.e2e``; V format ``PREFERRED_FMT``, per
   16-token block the mean over the float16 and bfloat16 caches). A scope whose paired
   bootstrap interval of the KL difference from the lowest includes zero is statistically
   tied with it; among tied scopes the smaller bytes per token, then the faster encode, win.
   The synthetic stress families are adversarial by construction (``bench.accuracy.families``): they
   are shown beside the choice, never decide it. Without end-to-end rows (no model here),
   the attention-output error on the realistic data (the real capture and the realistic
   synthetic families) decides instead, errors within ``ERROR_TIE`` tying, and the page
   says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeGuard

import numpy as np
import pandas as pd

from ..accuracy.bootstrap import paired_difference
from ..accuracy.families import REALISTIC, STRESS, family_role
from ..common.quantiles import quantiles
from ..common.scopes import out_of_band, scope_rank

MAX_ENCODE_COST = 0.25
MAX_BYTES_OVERHEAD = 0.05
ERROR_TIE = 0.02
PREFERRED_FMT = "e4m3"
E2E_COLUMNS = ("model", "scope", "fmt", "layer", "metric", "value", "ci_low", "ci_high", "blocks")

RULE_TEXT = (
    "Among scopes that store their scales in the blob, keep those whose encode throughput is "
    f"within {MAX_ENCODE_COST:.0%} of the fastest scope, per machine, device, case and dtype. "
    "A scope counts as slower only where its interquartile GB/s interval lies entirely below "
    "the fastest's; else it is tied on speed. "
    f"Keep those whose storage bytes per token are within {MAX_BYTES_OVERHEAD:.0%} of the "
    "smallest. Of these, choose the one whose cache moves the real model's next-token "
    "predictions least (mean KL divergence, float16 and bfloat16 caches). "
    "Scopes whose 95% paired bootstrap interval of the KL difference includes zero tie; then "
    "the fewer bytes per token win, then the faster encode. "
    "Synthetic stress families are shown beside the choice, not used to make it."
)


@dataclass(frozen=True)
class ScopeChoice:
    """The recommended scope (None if nothing could be judged), the evidence per scope, the
    basis, notes, and the one-paragraph statement for the page's first screen."""

    scope: str | None
    table: pd.DataFrame
    basis: str
    notes: list[str] = field(default_factory=list)
    statement: str = ""


def _quartile_gbps(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each row's encode GB/s interval: (bytes / q75_s, bytes / q25_s).

    The quartiles come from the row's ``q25_s``/``q75_s``, else from its per-process samples
    (``samples_by_process``, else ``samples_s``); without them (or without ``bytes``) the
    interval is the row's GB/s alone.
    """
    low, high = [], []
    for row in rows.to_dict("records"):
        gbps = float(row["gbps"])
        q25, q75 = row.get("q25_s"), row.get("q75_s")
        if not (_number(q25) and _number(q75)):
            samples = row.get("samples_by_process")
            flat = (
                [x for process in samples for x in process]
                if isinstance(samples, list)
                else row.get("samples_s")
            )
            if isinstance(flat, list) and flat:
                q25, q75 = quantiles(flat, (0.25, 0.75))
        size = row.get("bytes")
        if _number(size) and _number(q25) and _number(q75) and min(q25, q75) > 0:
            low.append(float(size) / float(q75) / 1e9)
            high.append(float(size) / float(q25) / 1e9)
        else:
            low.append(gbps)
            high.append(gbps)
    return pd.Series(low, index=rows.index), pd.Series(high, index=rows.index)


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and not pd.isna(value)


def _encode_cost(
    throughput: pd.DataFrame, scopes: list[str]
) -> tuple[pd.Series, pd.DataFrame, list[str]]:
    """Per scope: 1 - (GB/s / fastest scope's GB/s), paired per machine, device, case, dtype,
    counted only where the scope is separably slower than the fastest: its interquartile
    GB/s interval lies entirely below the fastest's; where the intervals overlap the cost is 0
    (a tie within noise).

    The median over cases and dtypes is taken per machine and device (never across machines),
    then the worst counts. Returns the costs, the lowest and highest per-pair cost of each
    scope (columns ``min``, ``max``: the spread the median summarizes, which a ratio of the
    median GB/s does not show) and the devices that had reference encode rows.
    """
    rows = throughput[
        (throughput["op"] == "encode")
        & (throughput["impl"] == "reference")
        & (throughput["scope"].isin(scopes))
    ]
    if rows.empty:
        return pd.Series(dtype=float), pd.DataFrame(columns=["min", "max"]), []
    low, high = _quartile_gbps(rows)
    rows = rows.assign(gbps=pd.to_numeric(rows["gbps"]), gbps_low=low, gbps_high=high)
    keys = ["machine", "device", "case", "dtype"]
    per_scope = rows.groupby([*keys, "scope"], dropna=False)[["gbps", "gbps_low", "gbps_high"]]
    medians = per_scope.median()
    fastest_scope = medians["gbps"].groupby(level=keys, dropna=False).transform("idxmax")
    fastest = medians.loc[list(fastest_scope)].set_index(medians.index)
    separated = medians["gbps_high"] < fastest["gbps_low"]
    cost_by_case = (1.0 - medians["gbps"] / fastest["gbps"]).where(separated, 0.0)
    cost = cost_by_case.groupby(level=["machine", "device", "scope"]).median()
    spread = cost_by_case.groupby(level="scope").agg(["min", "max"])
    return cost.groupby(level="scope").max(), spread, sorted(rows["device"].unique())


def _kl_blocks(e2e: pd.DataFrame, scope: str) -> list[float] | None:
    """Per-block KL of ``scope`` (e4m3, every layer), averaged over the cache dtypes."""
    rows = e2e[
        (e2e["metric"] == "kl")
        & (e2e["scope"] == scope)
        & (e2e["fmt"] == PREFERRED_FMT)
        & e2e["layer"].isna()
    ]
    blocks = [b for b in rows["blocks"] if isinstance(b, list) and b]
    if not blocks or len({len(b) for b in blocks}) != 1:
        return None
    return [float(x) for x in np.mean(np.asarray(blocks, dtype=float), axis=0)]


def _metric(e2e: pd.DataFrame, scope: str, metric: str) -> tuple[float, float, float]:
    """(value, low, high) of an e2e metric, worst over the cache dtypes (e4m3, every layer)."""
    rows = e2e[
        (e2e["metric"] == metric)
        & (e2e["scope"] == scope)
        & (e2e["fmt"] == PREFERRED_FMT)
        & e2e["layer"].isna()
    ]
    if rows.empty:
        return (np.nan, np.nan, np.nan)
    ordered = rows.sort_values("value")
    worst = ordered.iloc[0] if metric == "top1" else ordered.iloc[-1]
    return (float(worst["value"]), float(worst["ci_low"]), float(worst["ci_high"]))


def _attention(accuracy: pd.DataFrame, role: str) -> pd.Series:
    """Worst attn_rel_err per scope over the data of one role (real, realistic, stress)."""
    rows = accuracy[
        (accuracy["metric"] == "attn_rel_err")
        & (accuracy["fmt"] == PREFERRED_FMT)
        & accuracy["value"].notna()
    ]
    roles = rows["data"].astype(str).map(lambda d: family_role(d)[0])
    return rows[roles == role].groupby("scope")["value"].max()


def choose_scope(
    accuracy: pd.DataFrame, throughput: pd.DataFrame, e2e: pd.DataFrame | None = None
) -> ScopeChoice:
    """Apply the rule in this module's docstring to the run's rows."""
    notes: list[str] = []
    e2e = e2e if e2e is not None else pd.DataFrame(columns=list(E2E_COLUMNS))
    accuracy = accuracy[accuracy["value"].notna()]
    accuracy = accuracy.assign(scope=accuracy["scope"].astype(str).str.upper())
    throughput = throughput.assign(scope=throughput["scope"].astype(str).str.upper())
    measured_e2e = sorted(set(e2e.loc[e2e["metric"] == "kl", "scope"].astype(str)))
    measured_acc = sorted(set(accuracy.loc[accuracy["metric"] == "attn_rel_err", "scope"]))
    measured = measured_e2e or measured_acc
    if not measured:
        notes.append("no end-to-end or attention-error rows in this run: no scope is recommended")
        return ScopeChoice(None, pd.DataFrame(columns=["scope"]), "", notes)
    excluded = sorted(s for s in measured if out_of_band(s))
    if excluded:
        notes.append(f"{', '.join(excluded)} not eligible: scales stored outside the blob")
    scopes = sorted((s for s in measured if not out_of_band(s)), key=lambda s: (scope_rank(s), s))

    table = pd.DataFrame({"scope": scopes})
    for metric in ("kl", "top1", "ppl_change"):
        values = [_metric(e2e, s, metric) for s in scopes]
        table[metric] = [v[0] for v in values]
        table[f"{metric}_low"] = [v[1] for v in values]
        table[f"{metric}_high"] = [v[2] for v in values]
    for role, column in (("real", "attn_err_real"), (REALISTIC, "attn_err_realistic")):
        table[column] = _attention(accuracy, role).reindex(scopes).to_numpy()
    table["attn_err_stress"] = _attention(accuracy, STRESS).reindex(scopes).to_numpy()

    bpt_rows = accuracy[(accuracy["metric"] == "bytes_per_token") & (accuracy["fmt"] == "e4m3")]
    real_bpt = bpt_rows[bpt_rows["data"].astype(str).str.startswith("real:")]
    bpt = (real_bpt if not real_bpt.empty else bpt_rows).groupby("scope")["value"].max()
    table["bytes_per_token"] = bpt.reindex(scopes).to_numpy()
    table["bytes_overhead"] = table["bytes_per_token"] / table["bytes_per_token"].min() - 1.0
    if table["bytes_per_token"].isna().all():
        notes.append("no bytes_per_token rows: storage overhead not judged")

    cost, spread, devices = _encode_cost(throughput, scopes)
    table["encode_cost"] = cost.reindex(scopes).to_numpy()
    table["encode_cost_low"] = spread["min"].reindex(scopes).to_numpy()
    table["encode_cost_high"] = spread["max"].reindex(scopes).to_numpy()
    if not devices:
        notes.append("no reference encode throughput rows: encode cost not judged")
    unmeasured = [s for s, c in zip(scopes, table["encode_cost"], strict=True) if pd.isna(c)]
    if devices and unmeasured:
        notes.append(f"no reference encode rows for {', '.join(unmeasured)}: its cost is unknown")

    within = (table["encode_cost"].isna() | (table["encode_cost"] <= MAX_ENCODE_COST)) & (
        table["bytes_overhead"].isna() | (table["bytes_overhead"] <= MAX_BYTES_OVERHEAD)
    )
    table["within_bounds"] = within
    candidates = table[within]
    if candidates.empty:
        notes.append("no scope is within both bounds: choosing on accuracy alone")
        candidates = table

    blocks = {s: _kl_blocks(e2e, s) for s in scopes}
    table["kl_diff"] = np.nan
    table["kl_diff_low"] = np.nan
    table["kl_diff_high"] = np.nan
    if measured_e2e and all(blocks[s] is not None for s in candidates["scope"]):
        mean_kl = {s: float(np.mean(blocks[s] or [])) for s in candidates["scope"]}
        best = min(mean_kl, key=lambda s: mean_kl[s])
        tied = []
        for s in candidates["scope"]:
            diff, low, high = paired_difference(blocks[s] or [], blocks[best] or [])
            table.loc[table["scope"] == s, ["kl_diff", "kl_diff_low", "kl_diff_high"]] = (
                diff,
                low,
                high,
            )
            if low <= 0.0:
                tied.append(s)
        basis = (
            f"end-to-end next-token KL of {e2e['model'].iloc[0]} "
            f"(V format {PREFERRED_FMT}, mean over float16 and bfloat16 caches)"
        )
    else:
        if measured_e2e:
            notes.append("end-to-end rows lack bootstrap blocks: judged on attention error")
        else:
            notes.append(
                "no end-to-end rows (the model could not run here): judged on the attention-"
                "output error over the realistic data instead"
            )
        error = (
            candidates["attn_err_real"]
            .fillna(candidates["attn_err_realistic"])
            .fillna(candidates["attn_err_stress"])
        )
        if candidates["attn_err_real"].isna().all():
            notes.append("no real-model attention rows either: realistic, else stress, data")
        best = str(candidates["scope"].to_numpy()[int(np.nanargmin(error.to_numpy(float)))])
        limit = error.min() * (1 + ERROR_TIE)
        tied = [s for s, e in zip(candidates["scope"], error, strict=True) if e <= limit]
        basis = "attention-output error on the real capture and the realistic synthetic families"
    if devices:
        basis += f"; encode cost: worst of the reference encode rows on {', '.join(devices)}"
    table["tied"] = table["scope"].isin(tied)
    ranked = table[table["tied"]].sort_values(
        ["bytes_per_token", "encode_cost"], na_position="last"
    )
    chosen = str(ranked.iloc[0]["scope"])
    table["chosen"] = table["scope"] == chosen
    return ScopeChoice(chosen, table, basis, notes, _statement(table, chosen, best))


def _percent(value: float) -> str:
    return "?" if pd.isna(value) else f"{value:.1%}"


def _ci(value: float, low: float, high: float, spec: str, scale: float = 1.0) -> str:
    """``value [low, high]`` formatted with ``spec`` after multiplying by ``scale``."""
    if pd.isna(value):
        return "not measured"
    return f"{value * scale:{spec}} [{low * scale:{spec}}, {high * scale:{spec}}]"


def _figures(row: pd.Series) -> str:
    """KL, top-1 and perplexity change of one table row, with their intervals (each the
    worse of the two cache dtypes, as ``_metric`` picks it)."""
    kl = _ci(row["kl"], row["kl_low"], row["kl_high"], ".2e")
    top1 = _ci(row["top1"], row["top1_low"], row["top1_high"], ".1f", 100)
    ppl = _ci(row["ppl_change"], row["ppl_change_low"], row["ppl_change_high"], "+.2f", 100)
    return (
        f"KL {kl} nats/token, top-1 agreement {top1}%, perplexity {ppl}% (each the worse of "
        "the float16 and bfloat16 caches)"
    )


def _tie_break(row: pd.Series, rival: pd.Series) -> str:
    """What set ``row`` ahead of a tied ``rival``: the ranking in ``choose_scope`` (fewer
    bytes per token, then the lower encode cost), in words with the numbers."""
    mine, theirs = row["bytes_per_token"], rival["bytes_per_token"]
    if _number(mine) and _number(theirs) and mine < theirs:
        return (
            f"{row['scope']} stores {theirs - mine:,.1f} fewer bytes per token than "
            f"{rival['scope']} ({1 - mine / theirs:.2%} less)"
        )
    cost, other = row["encode_cost"], rival["encode_cost"]
    if _number(cost) and _number(other) and cost < other:
        return (
            f"{row['scope']} stores as many bytes per token and encodes faster than "
            f"{rival['scope']} ({_percent(cost)} against {_percent(other)} slower than the "
            "fastest scope)"
        )
    return f"{row['scope']} and {rival['scope']} are equal on both; {row['scope']} is listed first"


def _diff(row: pd.Series) -> str:
    return _ci(row["kl_diff"], row["kl_diff_low"], row["kl_diff_high"], "+.1e")


def _statement(table: pd.DataFrame, chosen: str, best: str) -> str:
    """The recommendation in words: the chosen scope's figures, its margin, and why."""
    row = table[table["scope"] == chosen].iloc[0]
    if pd.isna(row["kl"]):
        return (
            f"{chosen}: attention-output error {row['attn_err_real']:.4g} on the real capture "
            "(no end-to-end figures in this run)."
        )
    head = f"{chosen}: {_figures(row)}"
    out = table[~table["within_bounds"]]
    if not out.empty:
        reasons = [
            f"{r['scope']} (encode {_percent(r['encode_cost'])} slower than the fastest, "
            f"{_percent(r['bytes_overhead'])} more bytes)"
            for _, r in out.iterrows()
        ]
        head += f". Outside the speed and bytes bounds: {', '.join(reasons)}"
    others = table[(table["scope"] != chosen) & table["kl_diff"].notna()]
    tied = others[others["tied"]]
    if chosen != best:
        rival = table[table["scope"] == best].iloc[0]
        return (
            f"{head}. The lowest KL is {best}'s, and {chosen} is within its interval (KL "
            f"difference {_diff(row)}), so the choice rests on bytes and speed: "
            f"{_tie_break(row, rival)}."
        )
    if not tied.empty:
        names = ", ".join(tied["scope"])
        verb = "is" if len(tied) == 1 else "are"
        return (
            f"{head}. {names} {verb} within the interval, so the choice rests on bytes and "
            f"speed, where {chosen} is no worse."
        )
    if others.empty:
        return f"{head}."
    nxt = others.sort_values("kl_diff").iloc[0]
    return (
        f"{head}. The next scope, {nxt['scope']}, moves the predictions more: KL higher by "
        f"{_diff(nxt)} (the interval excludes zero)."
    )
