"""Recommend an L2 serde and scope for one model from its end-to-end rows (``bench.accuracy.e2e``).

The rule, stated on the page with the numbers it used:

1. Accuracy: a serde and scope is within budget when the model's perplexity change stays
   at most ``PPL_BUDGET`` at 95% confidence (the bootstrap interval's upper end, worse of
   the float16 and bfloat16 caches). No serde (``none``) is always within it.
2. Configurable: the installed LMCache builds the ``--l2-adapter`` object the page prints
   (an ``fs`` adapter with the serde) through its own parser, adapter factory and serde
   factory (``bench.accuracy.lmcache_serdes.build_adapter``); for the K16/V8 serdes only the
   scopes a serde can write (``SERDE_SCOPES``: their scales travel in the blob and need no
   page geometry). A serde the release registers but whose measurement was skipped (e.g.
   ``turboquant`` without CUDA) is a row with its reason, never chosen.
3. Among configurable serdes within budget, the fewest bytes stored in L2 per token wins;
   within ``BYTES_TIE`` of each other, the smaller KL divergence.

The same rule without step 2 names the better choice a newer release could write, and what
it needs: a second, labelled line, never the recommendation. A lossless serde (``aesgcm``,
checked bit-exact) ties with no serde on accuracy and costs its frame in bytes, so no serde
wins it; it is there for what it buys (confidentiality), which the table says.

Speed: the store and load rows through LMCache's storage manager on the page's adapter
(``bench.throughput.store_path``) where the files hold them, else the serde's bench rows
(``bench.throughput.serde_calls``, PER_TENSOR and PER_LAYER_HEAD), else the codec's encode
throughput for the K16/V8 scopes, else not measured.
Models are judged each on its own rows, never pooled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd

from ...conformance.store.lmcache_serde_calls import SerdeFailed
from ..accuracy.l2_serdes import FP8, K16V8, K16V8_V_ONLY, NONE, l2_config
from ..accuracy.lmcache_serdes import (
    ADAPTER_TYPE,
    adapter_spec,
    build_adapter,
    installed_release,
)
from ..throughput.serde_calls import SERDE_SCOPES
from ..throughput.store_path import LIMITS as STORE_PATH_LIMITS
from .store_cost import store_cost

PPL_BUDGET = 0.01
BYTES_TIE = 0.01
#: The bench operations (``bench.throughput.serde_calls``) that time each K16/V8 serde.
SERDE_SPEED_OPS = {
    K16V8: ("serialize", "deserialize"),
    K16V8_V_ONLY: ("serialize_v_only", "deserialize_v_only"),
}

RULE_TEXT = (
    f"Keep the serdes and scopes whose cache changes the model's perplexity by at most "
    f"{PPL_BUDGET:.0%} at 95% confidence (worse of float16 and bfloat16). "
    "Of these, keep those whose --l2-adapter JSON the installed LMCache builds with its own "
    "parser and factories. "
    f"K16/V8 qualifies only in scopes whose scales travel in the blob: {', '.join(SERDE_SCOPES)}. "
    f"The fewest bytes in L2 per token wins; within {BYTES_TIE:.0%}, the smaller KL divergence. "
    "No serde is always kept."
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
    the configurability filter, the statement, the ``--l2-adapter`` JSON to paste, and the
    labelled line on what a newer release would allow ("" when nothing would be better)."""

    table: pd.DataFrame
    chosen: pd.Series | None
    better: pd.Series | None
    statement: str = ""
    config: str = ""
    notes: list[str] = field(default_factory=list)
    newer: str = ""


def _worst(rows: pd.DataFrame, metric: str, higher_is_worse: bool = True) -> tuple[float, ...]:
    picked = rows[rows["metric"] == metric]
    if picked.empty:
        return (float("nan"),) * 3
    order = picked.sort_values("value", ascending=not higher_is_worse).iloc[0]
    return float(order["value"]), float(order["ci_low"]), float(order["ci_high"])


def _store_path_speed(cost: pd.DataFrame, serde: str) -> str:
    """Median GB/s of the store and load of ``serde`` through LMCache's storage manager on
    ``ADAPTER_TYPE`` (``cost``: ``store_cost`` of the run's rows); "" where it has none."""
    rows = cost[(cost["adapter"] == ADAPTER_TYPE) & (cost["serde"] == serde)]
    speeds = rows.groupby("op")["gbps"].median()
    shown = [f"{op} {speeds[op]:.2f} GB/s" for op in STORE_PATH_LIMITS if op in speeds]
    return f"{', '.join(shown)} through LMCache on {ADAPTER_TYPE}" if shown else ""


def _speed(throughput: pd.DataFrame, cost: pd.DataFrame, serde: str, scope: str) -> str:
    """The serde's store and load through LMCache (``_store_path_speed``), else median GB/s
    of the serde's own bench rows in this scope (``bench.throughput.serde_calls``: the
    serialize and deserialize operations of each implementation), else the codec's encode
    for the K16/V8 scopes, else not measured."""
    store_path = _store_path_speed(cost, serde)
    if store_path:
        return store_path
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


def serde_table(
    e2e: pd.DataFrame, throughput: pd.DataFrame, skipped: dict[str, str] | None = None
) -> pd.DataFrame:
    """One row per (serde, scope) of one model and context: worst-dtype KL, top-1 and
    perplexity change with intervals, bytes in L2 per token, speed, ``exact`` (checked
    bit-exact), and one row per ``skipped`` serde (name: reason) without figures."""
    rows = e2e[e2e["serde"].notna() & (e2e["serde"] != NONE) & e2e["layer"].isna()]
    none = e2e[(e2e["serde"] == NONE) & (e2e["metric"] == "l2_bytes_per_token")]
    base = float(none["value"].max()) if not none.empty else float("nan")
    cost = store_cost(throughput)
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
            "speed": "; ".join(filter(None, ["no transform", _store_path_speed(cost, NONE)])),
            "exact": True,
            "skipped": "",
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
                "speed": _speed(throughput, cost, str(serde), str(scope)),
                "exact": "exact" in group and bool(group["exact"].eq(True).all()),
                "skipped": "",
            }
        )
    for serde, reason in (skipped or {}).items():
        nan = float("nan")
        out.append(
            {"serde": serde, "scope": "NONE", "kl": nan, "kl_low": nan, "kl_high": nan}
            | {"top1": nan, "ppl_change": nan, "ppl_change_low": nan, "ppl_change_high": nan}
            | {"l2_bytes_per_token": nan, "speed": "not measured", "exact": False}
            | {"skipped": reason}
        )
    table = pd.DataFrame(out)
    table["bytes_vs_none"] = table["l2_bytes_per_token"] / base
    table["within_budget"] = (table["serde"] == NONE) | (table["ppl_change_high"] <= PPL_BUDGET)
    return table


def _builds(serde: str) -> tuple[bool, str]:
    """(does the installed LMCache build the ``--l2-adapter`` JSON that selects ``serde``?,
    what it said)."""
    try:
        return True, build_adapter(adapter_spec(l2_config(serde)))
    except SerdeFailed as exc:
        return False, str(exc)


def _writable(table: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(can the installed LMCache write each row?, why), checked once per serde."""
    seen = {s: _builds(str(s)) for s in table["serde"].unique()}
    scope_ok = ~table["serde"].isin([K16V8, K16V8_V_ONLY]) | table["scope"].isin(SERDE_SCOPES)
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
    """The ``--l2-adapter`` JSON that selects ``row``'s serde, to paste (placeholders:
    ``lmcache_serdes.BASE_PLACEHOLDER`` and the aesgcm master key's path)."""
    return json.dumps(adapter_spec(l2_config(str(row["serde"]), str(row["scope"]))))


def _label(row: pd.Series) -> str:
    return str(row["serde"]) + ("" if row["scope"] in ("NONE", "NO_SCALE") else f" {row['scope']}")


def choose_serde(table: pd.DataFrame, model: str, context: int) -> SerdeChoice:
    """The rule of this module's docstring over ``serde_table``'s rows."""
    if table.empty:
        return SerdeChoice(table, None, None, notes=["no serde rows"])
    writes, why = _writable(table)
    table = table.assign(lmcache_writes=writes, lmcache_check=why)
    chosen = _pick(table[table["within_budget"] & table["lmcache_writes"]])
    serde_scope = ~table["serde"].isin([K16V8, K16V8_V_ONLY]) | table["scope"].isin(SERDE_SCOPES)
    better = _pick(table[table["within_budget"] & serde_scope])
    table = table.assign(chosen=False)
    if chosen is None:
        return SerdeChoice(table, None, better, notes=["nothing within budget is configurable"])
    table.loc[chosen.name, "chosen"] = True
    release = installed_release()
    statement = (
        f"For {model} at {context} tokens of context: "
        + ("no serde" if chosen["serde"] == NONE else _label(chosen))
        + f", {chosen['l2_bytes_per_token']:,.0f} bytes in L2 per token; {release} builds it."
    )
    if chosen["serde"] != NONE:
        statement += (
            f" Perplexity {chosen['ppl_change']:+.2%} [{chosen['ppl_change_low']:+.2%}, "
            f"{chosen['ppl_change_high']:+.2%}], margin to the {PPL_BUDGET:.0%} budget "
            f"{PPL_BUDGET - chosen['ppl_change_high']:.2%} points."
        )
    fp8 = table[table["serde"] == FP8]
    if not fp8.empty and not bool(fp8.iloc[0]["within_budget"]):
        row = fp8.iloc[0]
        statement += (
            f" Plain fp8 (K and V cast to e4m3, no scale) is out of budget: perplexity "
            f"{row['ppl_change']:+.2%} [{row['ppl_change_low']:+.2%}, "
            f"{row['ppl_change_high']:+.2%}]."
        )
    newer = ""
    if better is not None and better.name != chosen.name:
        newer = (
            f"Needs a newer release: {_label(better)} would store "
            f"{better['l2_bytes_per_token']:,.0f} bytes per token, perplexity "
            f"{better['ppl_change']:+.2%} [{better['ppl_change_low']:+.2%}, "
            f"{better['ppl_change_high']:+.2%}]. It needs "
            f"{NEEDS.get(str(better['serde']), 'a release that writes it')}."
        )
    return SerdeChoice(table, chosen, better, statement, config_line(chosen), newer=newer)
