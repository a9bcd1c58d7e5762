"""Benchmark sections: throughput, accuracy and storage, comparison with a baseline run."""

from __future__ import annotations

from html import escape

import pandas as pd

from ..bench.accuracy.families import REALISTIC, STRESS, family_role
from ..bench.common.scopes import scope_rank
from ..bench.recommendation.store_cost import store_cost
from ..bench.throughput.serde_calls import CODEC_OF
from . import figures
from .comparison import VERDICT_CLASS, compare, counts_text
from .html import Section, collapsible, details, figure, note, paragraph, table
from .inputs import ReportInputs
from .output import Output

NO_BENCH = "no bench results file among the inputs: benchmarks are not reported"
DEVICE_TITLE = {"cpu": "CPU", "cuda": "CUDA"}


def skip_reasons(skips: pd.DataFrame, word: str) -> str:
    """The reasons of skip rows whose ``what`` mentions ``word`` (e.g. cuda, real)."""
    hits = skips[skips["what"].astype(str).str.lower().str.contains(word, regex=False)]
    reasons = sorted({f"{w}: {r}" for w, r in zip(hits["what"], hits["reason"], strict=True)})
    return "; ".join(reasons)


def _scope_table(throughput: pd.DataFrame, machines: list[str]) -> pd.DataFrame:
    """Median GB/s per device, op, scope and impl (over cases and dtypes), with median ratios;
    one column per machine for each figure, side by side (never pooled across machines)."""
    rows = throughput[throughput["impl"].isin(["reference", "upstream"])]
    keys = ["device", "op", "scope"]
    gbps = rows.pivot_table(
        index=keys, columns=["impl", "machine"], values="gbps", aggfunc="median", dropna=False
    )
    ref = rows[rows["impl"] == "reference"].assign(
        ratio_to_upstream=lambda f: pd.to_numeric(f["ratio_to_upstream"], errors="coerce"),
        ratio_to_limit=lambda f: pd.to_numeric(f["ratio_to_limit"], errors="coerce"),
    )
    ratios = ref.pivot_table(
        index=keys,
        columns="machine",
        values=["ratio_to_upstream", "ratio_to_limit"],
        aggfunc="median",
        dropna=False,
    )
    names = {
        "reference": "reference GB/s",
        "upstream": "upstream GB/s",
        "ratio_to_upstream": "reference / upstream",
        "ratio_to_limit": "reference / limit",
    }
    columns = {}
    for figure_name in names:
        source = gbps if figure_name in ("reference", "upstream") else ratios
        for machine in machines:
            if (figure_name, machine) in source.columns:
                label = names[figure_name] + (f" [{machine}]" if len(machines) > 1 else "")
                columns[label] = source[(figure_name, machine)]
    joined = pd.DataFrame(columns).dropna(how="all").reset_index()
    return joined.sort_values(
        keys, key=lambda c: c.map(scope_rank) if c.name == "scope" else c, kind="stable"
    )


FLAG_TEXT = {
    "launch_bound": "launch-bound (median below 50 us: launches and Python, not bytes)",
    "throttled": "throttled (a power or thermal clock event reason while its group ran)",
}


def flagged_rows(throughput: pd.DataFrame) -> pd.DataFrame:
    """Rows marked ``launch_bound`` or ``throttled`` (CUDA), with a ``flags`` column."""
    columns = ["machine", "device", "op", "impl", "scope", "dtype", "case", "median_s", "gbps"]
    masks = {
        flag: throughput[flag].map(lambda v: v is True) for flag in FLAG_TEXT if flag in throughput
    }
    if not masks or throughput.empty:
        return pd.DataFrame(columns=[*columns, "flags"])
    any_flag = pd.concat(masks.values(), axis=1).any(axis=1)
    rows = throughput.loc[any_flag, columns].copy()
    rows["flags"] = [", ".join(flag for flag, mask in masks.items() if mask[i]) for i in rows.index]
    return rows.reset_index(drop=True)


SERDE_KEYS = ["machine", "impl", "scope", "dtype", "case"]


def serde_cost(throughput: pd.DataFrame) -> pd.DataFrame:
    """What the serde costs on top of the codec: each serde row (``bench.throughput.serde_calls``)
    beside
    the codec operation it wraps (``CODEC_OF``: encode, decode_dequant) of the same
    implementation, scope, dtype, case and machine, as per-call times and their ratio.
    V-only rows are set against the codec's K+V operation (the V-only serde's own work is
    less than that); a serde row without its codec twin keeps an empty ratio."""
    columns = [*SERDE_KEYS, "op", "gbps", "ratio_to_limit", "codec op", "codec gbps"]
    columns += ["serde median_s", "codec median_s", "serde / codec time"]
    serde = throughput[throughput["op"].isin(list(CODEC_OF))]
    if serde.empty:
        return pd.DataFrame(columns=columns)
    codec = throughput[throughput["op"].isin(set(CODEC_OF.values()))][
        [*SERDE_KEYS, "op", "gbps", "median_s"]
    ].rename(columns={"op": "codec op", "gbps": "codec gbps", "median_s": "codec median_s"})
    joined = serde.assign(**{"codec op": serde["op"].map(CODEC_OF)}).merge(
        codec, on=[*SERDE_KEYS, "codec op"], how="left"
    )
    joined["serde median_s"] = joined["median_s"]
    joined["serde / codec time"] = joined["serde median_s"] / joined["codec median_s"]
    return joined[columns].sort_values(
        ["machine", "case", "dtype", "impl", "scope", "op"],
        key=lambda c: c.map(scope_rank) if c.name == "scope" else c,
        kind="stable",
    )


def _serde_details(throughput: pd.DataFrame, out: Output) -> str:
    """The serde-cost table folded, with its reading; empty without serde rows."""
    cost = serde_cost(throughput)
    if cost.empty:
        return ""
    out.csv(cost, "serde_cost.csv")
    ratios = cost.loc[~cost["op"].str.endswith("_v_only"), "serde / codec time"].dropna()
    spread = (
        f" (the K+V serde takes {ratios.min():.2f}-{ratios.max():.2f}x its codec operation's "
        "time here)"
        if not ratios.empty
        else ""
    )
    return paragraph(
        "The serde path (LMCache's distributed serde, both modes) beside the codec: each "
        "serializer writes into a preallocated destination as the memcpy limit does, each "
        "deserializer reads a blob into preallocated K/V outputs; 'serde / codec time' is "
        "the serde call's median time over the codec operation it wraps (encode, "
        "decode_dequant) for the same implementation, scope, dtype and case, V-only rows "
        f"against the codec's K+V operation{spread}."
    ) + details(
        f"The serde's cost on top of the codec ({len(cost)} rows)", table(cost), "serde_cost.csv"
    )


def _store_path_details(throughput: pd.DataFrame, skips: pd.DataFrame, out: Output) -> str:
    """Store and load through LMCache's storage manager per adapter and serde, beside the
    same bytes put and got with the store's own client (``bench.recommendation.store_cost``),
    and what the run could not time."""
    cost = store_cost(throughput)
    missed = (
        skips[skips["what"].astype(str).str.startswith("store path")] if not skips.empty else skips
    )
    notes = "".join(note(f"{r.what}: {r.reason}") for r in missed.itertuples())
    if cost.empty:
        return notes
    out.csv(cost, "store_path.csv")
    return (
        details(
            "Store path: GB/s through LMCache's storage manager per adapter and serde, and "
            "the time against putting and getting the same bytes directly",
            table(cost),
            "store_path.csv",
        )
        + notes
    )


def throughput_section(inputs: ReportInputs, out: Output) -> Section:
    """GB/s against call size per op and device, limits drawn in, with the tables behind them."""
    title = "Throughput"
    if not inputs.bench:
        return Section("throughput", title, note(NO_BENCH))
    throughput = inputs.bench_table("throughput")
    skips = inputs.bench_table("skip")
    out.csv(throughput, "throughput.csv")
    body = [
        paragraph(
            "Median GB/s of input K+V bytes per call (bars: interquartile range over rounds); "
            "the dashed grey lines are the limits measured in the same run on the same bytes "
            "(memcpy for encode/decode, CRC-32 for parse on CPU; on CUDA the pageable host "
            "copies d2h_pageable for encode and h2d_pageable for decode, their pinned "
            "counterparts d2h_pinned/h2d_pinned beside them, d2d for quantize). "
            "Ratios are per row within one run, then the median is taken; machines are "
            "never pooled."
        )
    ]
    machines = inputs.machines
    for device in ("cpu", "cuda"):
        name = DEVICE_TITLE[device]
        rows = throughput[throughput["device"] == device]
        if rows.empty:
            reason = skip_reasons(skips, device) or "the bench wrote no rows for this device"
            body.append(note(f"no {name} rows in this run: {reason}"))
            continue
        if rows["op"].isin(figures.LIMIT_OPS).all():
            present = ", ".join(sorted(set(rows["op"])))
            body.append(note(f"only limit rows ({present}) on {name}: no codec throughput"))
            continue
        measured = [m for m in machines if (rows["machine"] == m).any()]
        for machine in measured:
            png = f"throughput_{device}.png"
            if len(measured) > 1:
                png = f"throughput_{device}_{machines.index(machine) + 1}.png"
            figures.throughput_chart(rows[rows["machine"] == machine], device, out.path(png))
            body.append(
                figure(
                    png,
                    f"{name} throughput against call size on {machine}",
                    f"{name} on {machine}: GB/s against input bytes per call, one panel per "
                    "operation.",
                )
            )
    if throughput.empty:
        body.append(note("the bench files hold no throughput rows"))
    else:
        by_scope = _scope_table(throughput, machines)
        out.csv(by_scope, "throughput_by_scope.csv")
        body.append(
            details(
                "Median GB/s per operation and scope"
                + (f", one column per machine ({len(machines)})" if len(machines) > 1 else ""),
                table(by_scope),
                "throughput_by_scope.csv",
            )
        )
        body.append(_serde_details(throughput, out))
        body.append(_store_path_details(throughput, skips, out))
        flagged = flagged_rows(throughput)
        if flagged.empty:
            body.append(paragraph("No row is flagged launch-bound or throttled."))
        else:
            out.csv(flagged, "throughput_flagged.csv")
            meaning = "; ".join(
                FLAG_TEXT[f] for f in FLAG_TEXT if flagged["flags"].str.contains(f).any()
            )
            body.append(
                note(
                    f"{len(flagged)} throughput rows are flagged, their GB/s is not a bytes "
                    f"rate of the codec: {meaning}"
                )
                + details(
                    f"Flagged throughput rows ({len(flagged)})",
                    table(flagged),
                    "throughput_flagged.csv",
                )
            )
        body.append(
            paragraph(
                "Every row with its quartiles (q25_s, q75_s), per-process samples "
                "(samples_by_process), flags (launch_bound, throttled), run and machine: "
                "throughput.csv."
            )
        )
    telemetry = inputs.bench_table("telemetry")
    if not telemetry.empty:
        out.csv(telemetry, "telemetry.csv")
        stats = pd.DataFrame(
            {
                "samples": [len(telemetry)],
                "median power (W)": [float(telemetry["power_w"].median())],
                "max power (W)": [float(telemetry["power_w"].max())],
                "median GPU utilisation (%)": [float(telemetry["util_pct"].median())],
            }
        )
        body.append("<h3>GPU telemetry during the run (NVML)</h3>" + table(stats))
    return Section("throughput", title, "".join(body))


def _family_figures(measured: pd.DataFrame, out: Output) -> list[str]:
    """Small multiples of the attention-output error: real and realistic data, then stress."""
    data = sorted(set(measured.loc[measured["metric"] == "attn_rel_err", "data"].astype(str)))
    roles = {d: family_role(d) for d in data}
    order = {"real": 0, REALISTIC: 1, STRESS: 2}
    realistic = sorted((d for d in data if roles[d][0] != STRESS), key=lambda d: order[roles[d][0]])
    stress = [d for d in data if roles[d][0] == STRESS]
    body = []
    for group, families, caption in (
        (
            "realistic",
            realistic,
            "Attention-output error per scope (V e4m3) on the real capture and the realistic "
            "families: what a deployment meets.",
        ),
        (
            "stress",
            stress,
            "The stress families, each built to provoke one failure (panel titles): where a "
            "scope breaks, not what a model will see. Each panel has its own scale.",
        ),
    ):
        if not families:
            continue
        png = f"accuracy_{group}.png"
        titles = {d: roles[d][1] for d in families}
        figures.family_panels(measured, families, titles, out.path(png))
        body.append(figure(png, f"attention-output error per scope, {group} data", caption))
    return body


def accuracy_section(inputs: ReportInputs, out: Output) -> Section:
    """SQNR and attention-output error per scope per data family; bytes per token per scope."""
    title = "Accuracy and storage"
    if not inputs.bench:
        return Section("accuracy", title, note(NO_BENCH))
    accuracy = inputs.bench_table("accuracy")
    skips = inputs.bench_table("skip")
    if accuracy.empty:
        reason = skip_reasons(skips, "accuracy") or "the bench files hold no accuracy rows"
        return Section("accuracy", title, note(f"no accuracy rows in this run: {reason}"))
    out.csv(accuracy, "accuracy.csv")
    body = []
    runs = accuracy["run_id"].nunique()
    if runs > 1:
        body.append(note(f"accuracy rows come from {runs} runs: figures show their mean"))
    if not accuracy["data"].astype(str).str.startswith("real:").any():
        reason = skip_reasons(skips, "real") or "the bench wrote no real-model rows"
        body.append(note(f"no real-model rows in this run: {reason}"))
    measured = accuracy[accuracy["value"].notna()]
    if not (measured["metric"] == "attn_rel_err").any():
        body.append(note("no attn_rel_err rows in this run: not drawn"))
    else:
        body += _family_figures(measured, out)
    if (measured["metric"] == "bytes_per_token").any():
        figures.bytes_per_token_chart(accuracy, out.path("bytes_per_token.png"))
        body.append(
            figure(
                "bytes_per_token.png",
                "storage bytes per token per scale scope",
                "Stored bytes per token per scope (left) and the overhead over the smallest "
                "scope for the same data (right).",
            )
        )
    else:
        body.append(note("no bytes_per_token rows in this run: storage cost not shown"))
    wide = accuracy.pivot_table(
        index=["data", "fmt", "scope"], columns="metric", values="value", aggfunc="median"
    ).reset_index()
    wide.columns.name = None
    wide = wide.sort_values(
        ["data", "fmt", "scope"], key=lambda c: c.map(scope_rank) if c.name == "scope" else c
    )
    wide.insert(1, "role", wide["data"].astype(str).map(lambda d: family_role(d)[0]))
    out.csv(wide, "accuracy_by_scope.csv")
    body.append(
        details(
            f"All accuracy metrics per data family, format and scope ({len(wide)} rows)",
            table(wide),
            "accuracy_by_scope.csv",
        )
    )
    return Section("accuracy", title, "".join(body))


def comparison_section(
    inputs: ReportInputs, out: Output
) -> tuple[Section, dict[str, dict[str, int]]]:
    """Each bench run against ``--baseline`` with ``lmckv bench compare``'s verdicts.

    Returns the section and, per compared file name, bench compare's verdict counts.
    """
    title = "Comparison with baseline"
    if inputs.baseline is None:
        return Section("comparison", title, note("no --baseline given: no comparison")), {}
    if not inputs.bench:
        return Section("comparison", title, note(NO_BENCH)), {}
    base = inputs.baseline
    body = [
        paragraph(
            "Verdicts of lmckv bench compare on times relative to their limit in the same "
            "process: one-sided Mann-Whitney U at alpha 0.001 and a Hodges-Lehmann change of "
            "at least the minimum effect make a regression (the CI gate) or an improvement; a "
            "90% interval inside the minimum effect is unchanged; anything else is "
            "inconclusive. Baseline: "
            f"{base.path.name} (run {base.run_id})."
        )
    ]
    tables = []
    counts: dict[str, dict[str, int]] = {}
    for run in inputs.bench:
        result = compare(base, run)
        counts[run.path.name] = result.counts
        body.append(f"<h3>{escape(run.path.name)} (run {escape(run.run_id)})</h3>")
        body += [note(text) for text in result.notes]
        if result.table.empty:
            continue
        verdicts = result.table["verdict"]
        if verdicts.isin(["new", "missing"]).all():
            body.append(note("no measurement appears in both runs: nothing to compare"))
            continue
        body.append(paragraph(counts_text(result.counts), "verdict"))
        classes = {"verdict": verdicts.map(VERDICT_CLASS)}
        beyond = result.table[verdicts.isin(["regression", "improvement", "inconclusive"])]
        if beyond.empty:
            body.append(paragraph("Every matched change is below the minimum effect."))
        else:
            beyond_classes = {
                "verdict": beyond["verdict"].map(VERDICT_CLASS).reset_index(drop=True)
            }
            body.append(
                collapsible(
                    table(beyond.reset_index(drop=True), cell_class=beyond_classes),
                    len(beyond),
                    "comparison.csv",
                )
            )
        body.append(
            collapsible(
                table(result.table, cell_class=classes), len(result.table), "comparison.csv", 0
            )
        )
        tables.append(result.table.assign(current_run=run.run_id, baseline_run=base.run_id))
    if tables:
        out.csv(pd.concat(tables, ignore_index=True), "comparison.csv")
    return Section("comparison", title, "".join(body)), counts
