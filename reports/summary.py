"""The numbers of the summary section: pass counts per level, known failures, headline ratios."""

from __future__ import annotations

import pandas as pd

from .inputs import OUTCOMES


def level_counts(tests: pd.DataFrame) -> pd.DataFrame:
    """Tests per implementation and level (MUST/SHOULD) by outcome, counted from ``tests``.

    Producer x consumer checks involve two implementations; as in the suite's own summary they
    are counted in the matrix section, not here.
    """
    columns = ["impl", "level", *OUTCOMES, "total"]
    if "producer" in tests:
        tests = tests[tests["producer"].isna()]
    if tests.empty:
        return pd.DataFrame(columns=columns)
    counts = (
        pd.crosstab([tests["impl"], tests["level"]], tests["outcome"])
        .reindex(columns=list(OUTCOMES), fill_value=0)
        .reset_index()
    )
    counts["total"] = counts[list(OUTCOMES)].sum(axis=1)
    return counts[columns]


def matrix_counts(tests: pd.DataFrame) -> dict[str, int]:
    """Producer x consumer checks (rows with a ``producer``) by outcome: the checks that
    ``level_counts`` leaves to the matrix section, counted so the summary can judge them."""
    if "producer" not in tests:
        return {}
    rows = tests[tests["producer"].notna()]
    return {outcome: int((rows["outcome"] == outcome).sum()) for outcome in OUTCOMES}


def must_should_table(counts: pd.DataFrame) -> pd.DataFrame:
    """One row per implementation: '<pass>/<total>' for MUST and SHOULD, and failure counts."""
    rows = []
    for impl, group in counts.groupby("impl", sort=False):
        row: dict[str, object] = {"implementation": impl}
        for level in ("MUST", "SHOULD"):
            sel = group[group["level"] == level]
            passed = int(sel["pass"].sum())
            total = int(sel["total"].sum())
            row[f"{level} pass"] = f"{passed}/{total}" if total else "—"
        for outcome in ("fail", "known_failure", "unexpected_pass", "skip"):
            row[outcome.replace("_", " ")] = int(group[outcome].sum())
        rows.append(row)
    return pd.DataFrame(rows)


def failures(tests: pd.DataFrame, rules: pd.DataFrame) -> pd.DataFrame:
    """Every test that did not pass or skip, with its reason, what it observed (the
    observation a known-failure line records), rule level and SPEC anchor.
    A producer x consumer check is listed under "producer→consumer"."""
    bad = tests[tests["outcome"].isin(["fail", "known_failure", "unexpected_pass"])].copy()
    if "producer" in bad and not bad.empty:
        pair = bad["producer"].notna()
        bad.loc[pair, "impl"] = bad.loc[pair, "producer"] + "→" + bad.loc[pair, "impl"]
    anchors = rules[["id", "spec_anchor", "summary"]].rename(columns={"id": "rule"})
    merged = bad.merge(anchors, on="rule", how="left")
    order = {"fail": 0, "unexpected_pass": 1, "known_failure": 2}
    merged = merged.assign(_order=merged["outcome"].map(order))
    merged = merged.sort_values(["_order", "impl", "level", "rule", "id"], kind="stable")
    if "observed" not in merged:
        merged = merged.assign(observed=None)
    columns = [
        "impl", "rule", "level", "outcome", "reason", "observed", "id", "producer", "spec_anchor",
    ]  # fmt: skip
    return merged[columns].reset_index(drop=True)


def headline_ratios(throughput: pd.DataFrame) -> pd.DataFrame:
    """Reference-implementation GB/s and its ratios per machine (never pooled across machines),
    median over scopes, dtypes and cases.

    ``ratio_to_upstream`` and ``ratio_to_limit`` are the per-row ratios the bench measured
    within one run (SCHEMAS: throughput rows); here they are summarised by median and range.
    """
    columns = [
        "machine",
        "device",
        "op",
        "rows",
        "reference GB/s (median)",
        "reference / upstream (median)",
        "reference / upstream (min–max)",
        "limit",
        "reference / limit (median)",
    ]
    ref = throughput[throughput["impl"] == "reference"]
    rows = []
    for (machine, device, op), group in ref.groupby(["machine", "device", "op"], sort=True):
        up = pd.to_numeric(group["ratio_to_upstream"], errors="coerce").dropna()
        lim = pd.to_numeric(group["ratio_to_limit"], errors="coerce").dropna()
        limits = sorted({str(x) for x in group["limit"].dropna()})
        rows.append(
            {
                "machine": machine,
                "device": device,
                "op": op,
                "rows": len(group),
                "reference GB/s (median)": float(group["gbps"].median()),
                "reference / upstream (median)": float(up.median()) if len(up) else None,
                "reference / upstream (min–max)": f"{up.min():.2f}–{up.max():.2f}"
                if len(up)
                else "—",
                "limit": ", ".join(limits) or "—",
                "reference / limit (median)": float(lim.median()) if len(lim) else None,
            }
        )
    return pd.DataFrame(rows, columns=columns)
