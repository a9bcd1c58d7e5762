"""Recommend an L2 serde and scope for one model from its end-to-end rows (``bench.accuracy.e2e``).

The rule, stated on the page with the numbers it used:

1. Accuracy: a serde and scope is within budget when the model's perplexity change stays
   at most ``PPL_BUDGET`` at 95% confidence (the bootstrap interval's upper end, worse of
   the float16 and bfloat16 caches). No serde (``none``) is always within it.
2. Configurable: the installed LMCache's serde factory builds the serde from the L2
   adapter's ``"serde"`` object, and writes with it (``bench.accuracy.l2_serdes.installed_writes``);
   for
   the K16/V8 serdes only the scopes a serde can write (``SERDE_SCOPES``: their scales travel
   in the blob and need no page geometry).
3. Among configurable serdes within budget, the fewest bytes stored in L2 per token wins;
   within ``BYTES_TIE`` of each other, the smaller KL divergence.

The same rule without step 2 names the better choice a newer release could write, and what
it needs. Speed: the serde's bench rows where the files hold them (``bench.throughput.serde_calls``,
PER_TENSOR and PER_LAYER_HEAD), else the codec's encode throughput for the K16/V8 scopes,
else not measured.
Models are judged each on its own rows, never pooled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd

from ..accuracy.l2_serdes import FP8, K16V8, K16V8_V_ONLY, NONE, installed_writes, l2_config
from ..throughput.serde_calls import SERDE_SCOPES

PPL_BUDGET = 0.01
BYTES_TIE = 0.01
#: The bench operations (``bench.throughput.serde_calls``) that time each K16/V8 serde.
SERDE_SPEED_OPS = {
    K16V8: ("serialize", "deserialize"),
    K16V8_V_ONLY: ("serialize_v_only", "deserialize_v_only"),
}

RULE_TEXT = (
    f"Keep the serdes and scopes whose cache changes the model's perplexity by at most "
    f"{PPL_BUDGET:.0%} at 95% confidence (worse of float16 and bfloat16) and that the "
    "installed LMCache can be configured to write (its serde factory builds the serde from "
    'the L2 adapter\'s "serde" object and writes with it; K16/V8 scopes whose scales travel '
    f"in the blob: {', '.join(SERDE_SCOPES)}); of these the fewest bytes in L2 per token wins, "
    f"within {BYTES_TIE:.0%} the smaller KL divergence. No serde is always kept."
)

#: What a serde needs besides a release that registers it.
NEEDS = {
    K16V8: "an LMCache release whose serde factory registers 'asym_k16_v8'",
    K16V8_V_ONLY: "an LMCache release whose serde factory registers 'asym_k16_v8_v_only', "
    "and K kept in L1 (split tier: L2 holds V only, so a restore needs K from L1)",
    FP8: "an LMCache release whose serde factory registers 'fp8'",
}


@dataclass(frozen=True)
class SerdeChoice:
    """The recommended row of ``table`` (None: nothing measured), the better one without
    the configurability filter, the statement and the L2 adapter setting."""

    table: pd.DataFrame
    chosen: pd.Series | None
    better: pd.Series | None
    statement: str = ""
    config: str = ""
    notes: list[str] = field(default_factory=list)


def _worst(rows: pd.DataFrame, metric: str, higher_is_worse: bool = True) -> tuple[float, ...]:
    picked = rows[rows["metric"] == metric]
    if picked.empty:
        return (float("nan"),) * 3
    order = picked.sort_values("value", ascending=not higher_is_worse).iloc[0]
    return float(order["value"]), float(order["ci_low"]), float(order["ci_high"])


def _speed(throughput: pd.DataFrame, serde: str, scope: str) -> str:
    """Median GB/s of the serde's own bench rows in this scope
    (``bench.throughput.serde_calls``: the serialize and deserialize operations of each
    implementation), else the codec's encode
    for the K16/V8 scopes, else not measured (the plain fp8 cast has no bench rows)."""
    ops = SERDE_SPEED_OPS.get(serde)
    if throughput.empty or ops is None:
        return "not measured"
    in_scope = throughput["scope"].astype(str) == scope
    rows = throughput[throughput["op"].isin(ops) & in_scope]
    if not rows.empty:
        speeds = rows.groupby(["op", "impl", "device"], as_index=False)["gbps"].median()
        return "; ".join(
            f"{r.op} {r.gbps:.2f} GB/s ({r.impl}, {r.device})" for r in speeds.itertuples()
        )
    rows = throughput[
        (throughput["op"] == "encode") & (throughput["impl"] == "reference") & in_scope
    ]
    if not rows.empty:
        speeds = rows.groupby("device")["gbps"].median()
        each = ", ".join(f"{g:.2f} GB/s on {d}" for d, g in speeds.items())
        return f"codec encode {each} (median over cases; no serde rows)"
    return "not measured"


def serde_table(e2e: pd.DataFrame, throughput: pd.DataFrame) -> pd.DataFrame:
    """One row per (serde, scope) of one model and context: worst-dtype KL, top-1 and
    perplexity change with intervals, bytes in L2 per token, speed."""
    rows = e2e[e2e["serde"].notna() & (e2e["serde"] != NONE) & e2e["layer"].isna()]
    none = e2e[(e2e["serde"] == NONE) & (e2e["metric"] == "l2_bytes_per_token")]
    base = float(none["value"].max()) if not none.empty else float("nan")
    out = [
        {
            "serde": NONE,
            "scope": "NONE",
            "kl": 0.0,
            "kl_low": 0.0,
            "kl_high": 0.0,
            "top1": 1.0,
            "ppl_change": 0.0,
            "ppl_change_low": 0.0,
            "ppl_change_high": 0.0,
            "l2_bytes_per_token": base,
            "speed": "no transform",
        }
    ]
    for (serde, scope), group in rows.groupby(["serde", "scope"], sort=False):
        kl, kl_low, kl_high = _worst(group, "kl")
        top1 = _worst(group, "top1", higher_is_worse=False)[0]
        ppl, ppl_low, ppl_high = _worst(group, "ppl_change")
        size = group[group["metric"] == "l2_bytes_per_token"]["value"]
        out.append(
            {
                "serde": serde,
                "scope": scope,
                "kl": kl,
                "kl_low": kl_low,
                "kl_high": kl_high,
                "top1": top1,
                "ppl_change": ppl,
                "ppl_change_low": ppl_low,
                "ppl_change_high": ppl_high,
                "l2_bytes_per_token": float(size.max()) if not size.empty else float("nan"),
                "speed": _speed(throughput, str(serde), str(scope)),
            }
        )
    table = pd.DataFrame(out)
    table["bytes_vs_none"] = table["l2_bytes_per_token"] / base
    table["within_budget"] = (table["serde"] == NONE) | (table["ppl_change_high"] <= PPL_BUDGET)
    return table


def _writable(table: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(can the installed LMCache write each row?, why), checked once per serde."""
    seen = {s: installed_writes(str(s)) for s in table["serde"].unique()}
    scope_ok = (table["serde"].isin([NONE, FP8])) | table["scope"].isin(SERDE_SCOPES)
    writes = table["serde"].map(lambda s: seen[s][0]) & scope_ok
    why = (
        table["serde"]
        .map(lambda s: seen[s][1])
        .where(scope_ok, "the serde cannot write this scope (page geometry or out-of-band scales)")
    )
    return writes, why


def _pick(candidates: pd.DataFrame) -> pd.Series | None:
    if candidates.empty:
        return None
    least = float(candidates["l2_bytes_per_token"].min())
    near = candidates[candidates["l2_bytes_per_token"] <= least * (1 + BYTES_TIE)]
    return near.sort_values(["kl", "l2_bytes_per_token"]).iloc[0]


def config_line(row: pd.Series) -> str:
    """The L2 adapter setting that selects ``row``'s serde (JSON)."""
    serde = l2_config(str(row["serde"]), str(row["scope"]))
    if serde is None:
        return 'no "serde" key in the L2 adapter spec (L2 stores the cache as it is)'
    return '"serde": ' + json.dumps(serde)


def _figures(row: pd.Series) -> str:
    return (
        f"KL {row['kl']:.1e} [{row['kl_low']:.1e}, {row['kl_high']:.1e}], top-1 "
        f"{row['top1']:.1%}, perplexity {row['ppl_change']:+.2%} "
        f"[{row['ppl_change_low']:+.2%}, {row['ppl_change_high']:+.2%}], "
        f"{row['l2_bytes_per_token']:,.0f} bytes in L2 per token "
        f"({row['bytes_vs_none']:.0%} of no serde), speed {row['speed']}"
    )


def _label(row: pd.Series) -> str:
    return str(row["serde"]) + ("" if row["scope"] in ("NONE", "NO_SCALE") else f" {row['scope']}")


def choose_serde(table: pd.DataFrame, model: str, context: int) -> SerdeChoice:
    """The rule of this module's docstring over ``serde_table``'s rows."""
    if table.empty:
        return SerdeChoice(table, None, None, notes=["no serde rows"])
    writes, why = _writable(table)
    table = table.assign(lmcache_writes=writes, lmcache_check=why)
    chosen = _pick(table[table["within_budget"] & table["lmcache_writes"]])
    serde_scope = table["serde"].isin([NONE, FP8]) | table["scope"].isin(SERDE_SCOPES)
    better = _pick(table[table["within_budget"] & serde_scope])
    table = table.assign(chosen=False)
    if chosen is None:
        return SerdeChoice(table, None, better, notes=["nothing within budget is configurable"])
    table.loc[chosen.name, "chosen"] = True
    others = table[table["within_budget"] & table["lmcache_writes"] & ~table["chosen"]]
    bytes_margin = (
        f"; the next configurable choice stores {others['l2_bytes_per_token'].min():,.0f}"
        if not others.empty
        else ""
    )
    fp8 = table[table["serde"] == FP8]
    if chosen["serde"] == NONE:
        statement = (
            f"For {model} at {context} tokens of context: no serde; L2 stores the cache as "
            f"it is, {chosen['l2_bytes_per_token']:,.0f} bytes per token."
        )
    else:
        statement = (
            f"For {model} at {context} tokens of context: {_label(chosen)}. "
            f"{_figures(chosen)}; margin to the {PPL_BUDGET:.0%} perplexity budget "
            f"{PPL_BUDGET - chosen['ppl_change_high']:.2%} points{bytes_margin}."
        )
    if not fp8.empty and not bool(fp8.iloc[0]["within_budget"]):
        row = fp8.iloc[0]
        statement += (
            f" The plain fp8 serde (K and V cast to e4m3, no scale) is out of budget: "
            f"perplexity {row['ppl_change']:+.2%} [{row['ppl_change_low']:+.2%}, "
            f"{row['ppl_change_high']:+.2%}], top-1 {row['top1']:.1%}, KL {row['kl']:.1e}."
        )
    if better is not None and better.name != chosen.name:
        statement += (
            f" A better choice, {_label(better)} ({_figures(better)}), "
            f"would need {NEEDS.get(str(better['serde']), 'a release that writes it')}: "
            f"{better['lmcache_check']}."
        )
    return SerdeChoice(table, chosen, better, statement, config_line(chosen))
