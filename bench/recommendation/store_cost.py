"""What each serde costs on LMCache's store path: the store and load rows of
``bench.throughput.store_path`` beside their limits (the same bytes put into and got from
the same store with its own client, measured in the same process), one row per adapter,
serde and operation."""

from __future__ import annotations

import pandas as pd

from ..throughput.store_path import LIMITS

COLUMNS = [
    "adapter",
    "serde",
    "op",
    "gbps",
    "gbps_q25",
    "gbps_q75",
    "limit_gbps",
    "time_vs_limit",
    "batches",
    "machine",
]


def store_cost(throughput: pd.DataFrame) -> pd.DataFrame:
    """Per (machine, adapter, serde, op): median GB/s of the plaintext a batch holds, its
    interquartile range over batches, the limit's GB/s on the bytes the serde wrote, and how
    many times the limit's time LMCache took (median over the row's batches)."""
    if throughput.empty or "op" not in throughput:
        return pd.DataFrame(columns=COLUMNS)
    ops = throughput[throughput["op"].isin(list(LIMITS)) & (throughput["impl"] == "lmcache")]
    out = []
    for row in ops.to_dict("records"):
        limit = throughput[
            (throughput["op"] == "copy")
            & (throughput["impl"] == LIMITS[str(row["op"])])
            & (throughput["case"] == row["case"])
            & (throughput["machine"] == row["machine"])
        ]
        adapter, _, serde = str(row["case"]).partition(":")
        nbytes, median = float(row["bytes"]), float(row["median_s"])
        limit_s = float(limit["median_s"].iloc[0]) if not limit.empty else float("nan")
        out.append(
            {
                "adapter": adapter,
                "serde": serde,
                "op": row["op"],
                "gbps": nbytes / median / 1e9,
                "gbps_q25": nbytes / float(row["q75_s"]) / 1e9,
                "gbps_q75": nbytes / float(row["q25_s"]) / 1e9,
                "limit_gbps": float(limit["gbps"].iloc[0]) if not limit.empty else float("nan"),
                "time_vs_limit": median / limit_s,
                "batches": row["rounds"],
                "machine": row["machine"],
            }
        )
    return pd.DataFrame(out, columns=COLUMNS)


def cost_text(cost: pd.DataFrame, serde: str, adapter: str) -> str:
    """Store and load GB/s of ``serde`` on ``adapter`` and their times against direct I/O of
    the same bytes; "" when the run has no store-path rows for them."""
    rows = cost[(cost["serde"] == serde) & (cost["adapter"] == adapter)]
    by = {r.op: r for r in rows.itertuples()}
    if "store" not in by or "load" not in by:
        return ""
    store, load = by["store"], by["load"]
    return (
        f"on {adapter} store {store.gbps:.2f} GB/s, load {load.gbps:.2f} GB/s "
        f"({store.time_vs_limit:.1f}x and {load.time_vs_limit:.1f}x direct I/O's time)"
    )
