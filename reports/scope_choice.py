"""Recommend a V scale scope (the header's ``scale_scope`` field) from measured rows.

The rule, stated on the page with the numbers it used:

1. Eligible scopes store their scales in the blob (``EXTERNAL`` and its variants such as
   ``EXTERNAL_CALIBRATED`` do not: their scales travel out of band, so a blob alone cannot
   be decoded) and have accuracy rows.
2. A scope is within bounds when its encode throughput costs at most ``MAX_ENCODE_COST``
   relative to the fastest eligible scope (reference impl, paired per device, case and dtype,
   median over cases, worst device) and its storage bytes per token exceed the smallest
   eligible scope's by at most ``MAX_BYTES_OVERHEAD``.
3. Among scopes within bounds, the lowest attention-output error (``attn_rel_err``) wins;
   errors within ``ERROR_TIE`` of the lowest count as equal, and then the cheaper encode wins.
   Error is the worst over every data family of the run, real-model and synthetic: a
   scope is chosen for the data it will meet, and the synthetic families stand for the
   outlier pages, heads and sink tokens that real models produce but one short capture may
   lack. V format ``PREFERRED_FMT`` when measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from reports.load import scope_rank

MAX_ENCODE_COST = 0.25
MAX_BYTES_OVERHEAD = 0.05
ERROR_TIE = 0.02
PREFERRED_FMT = "e4m3"

RULE_TEXT = (
    "Among scopes that store their scales in the blob, keep those whose encode throughput is "
    f"within {MAX_ENCODE_COST:.0%} of the fastest scope and whose storage bytes per token are "
    f"within {MAX_BYTES_OVERHEAD:.0%} of the smallest; of these choose the lowest "
    f"worst attention-output error over all data families, real and synthetic (errors within "
    f"{ERROR_TIE:.0%} of each other tie, and the faster encode wins)."
)


def out_of_band(scope: str) -> bool:
    """EXTERNAL (and variants such as EXTERNAL_CALIBRATED): the blob holds no scales."""
    return scope == "EXTERNAL" or scope.startswith("EXTERNAL_")


@dataclass(frozen=True)
class ScopeChoice:
    """The recommended scope (None if nothing could be judged) and the evidence per scope."""

    scope: str | None
    table: pd.DataFrame
    basis: str
    notes: list[str] = field(default_factory=list)


def _error_basis(accuracy: pd.DataFrame) -> tuple[pd.DataFrame, str, str]:
    """Rows of the data and format the error is judged on, the basis text, and the format."""
    rows = accuracy[accuracy["metric"] == "attn_rel_err"]
    fmts = sorted(rows["fmt"].unique())
    fmt = PREFERRED_FMT if PREFERRED_FMT in fmts else fmts[0]
    rows = rows[rows["fmt"] == fmt]
    names = ", ".join(sorted(rows["data"].unique()))
    return (
        rows,
        f"worst attention-output error over the data families ({names}), V format {fmt}",
        fmt,
    )


def _encode_cost(throughput: pd.DataFrame, scopes: list[str]) -> tuple[pd.Series, list[str]]:
    """Per scope: 1 - (GB/s / fastest scope's GB/s), paired per device, case and dtype.

    The median over cases and dtypes is taken per device, then the worst device counts.
    Returns the costs and the devices that had reference encode rows.
    """
    rows = throughput[
        (throughput["op"] == "encode")
        & (throughput["impl"] == "reference")
        & (throughput["scope"].isin(scopes))
    ]
    if rows.empty:
        return pd.Series(dtype=float), []
    keys = ["device", "case", "dtype"]
    medians = rows.groupby([*keys, "scope"], dropna=False)["gbps"].median()
    fastest = medians.groupby(level=keys, dropna=False).transform("max")
    relative = (medians / fastest).groupby(level=["device", "scope"]).median()
    cost = (1.0 - relative).groupby(level="scope").max()
    return cost, sorted(rows["device"].unique())


def choose_scope(accuracy: pd.DataFrame, throughput: pd.DataFrame) -> ScopeChoice:
    """Apply the rule in this module's docstring to the run's accuracy and throughput rows."""
    columns = ["scope", "attn_rel_err", "encode_cost", "bytes_per_token", "bytes_overhead"]
    notes: list[str] = []
    accuracy = accuracy[accuracy["value"].notna()]
    accuracy = accuracy.assign(scope=accuracy["scope"].astype(str).str.upper())
    throughput = throughput.assign(scope=throughput["scope"].astype(str).str.upper())
    if (accuracy["metric"] == "attn_rel_err").sum() == 0:
        notes.append("no attention-output error rows in this run: no scope can be recommended")
        return ScopeChoice(None, pd.DataFrame(columns=columns), "", notes)

    error_rows, basis, fmt = _error_basis(accuracy)
    error = error_rows.groupby("scope")["value"].max()
    excluded = sorted(s for s in error.index if out_of_band(s))
    if excluded:
        notes.append(f"{', '.join(excluded)} not eligible: scales stored outside the blob")
    scopes = sorted(
        (s for s in error.index if not out_of_band(s)), key=lambda s: (scope_rank(s), s)
    )
    error = error[scopes]

    bpt_rows = accuracy[
        (accuracy["metric"] == "bytes_per_token")
        & (accuracy["data"].isin(error_rows["data"].unique()))
        & (accuracy["fmt"] == fmt)
    ]
    bytes_per_token = bpt_rows.groupby("scope")["value"].max().reindex(scopes)
    overhead = bytes_per_token / bytes_per_token.min() - 1.0
    if bytes_per_token.isna().all():
        notes.append("no bytes_per_token rows: storage overhead not judged")

    cost, devices = _encode_cost(throughput, scopes)
    cost = cost.reindex(scopes)
    if not devices:
        notes.append("no reference encode throughput rows: encode cost not judged")
    else:
        basis += f"; encode cost: worst of the reference encode rows on {', '.join(devices)}"
    unmeasured = [s for s in scopes if pd.isna(cost.get(s))] if devices else []
    if unmeasured:
        notes.append(f"no reference encode rows for {', '.join(unmeasured)}: its cost is unknown")

    table = pd.DataFrame(
        {
            "scope": scopes,
            "attn_rel_err": error.to_numpy(),
            "encode_cost": cost.to_numpy(),
            "bytes_per_token": bytes_per_token.to_numpy(),
            "bytes_overhead": overhead.to_numpy(),
        }
    )
    within = (table["encode_cost"].isna() | (table["encode_cost"] <= MAX_ENCODE_COST)) & (
        table["bytes_overhead"].isna() | (table["bytes_overhead"] <= MAX_BYTES_OVERHEAD)
    )
    table["within_bounds"] = within
    candidates = table[within]
    if candidates.empty:
        notes.append("no scope is within both bounds: choosing on error alone")
        candidates = table
    best = candidates["attn_rel_err"].min()
    tied = candidates[candidates["attn_rel_err"] <= best * (1.0 + ERROR_TIE)]
    chosen = str(tied.sort_values(["encode_cost", "attn_rel_err"]).iloc[0]["scope"])
    table["chosen"] = table["scope"] == chosen
    return ScopeChoice(chosen, table, basis, notes)
