"""The report's PNG figures (matplotlib, Agg backend): one function per figure.

Each function takes the rows it plots (non-empty; the caller writes a note instead when there
are none) and the PNG path to write.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Literal, cast

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt
import pandas as pd
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..bench.common.scopes import CALIBRATED_EXTERNAL, scope_rank
from ..reference_impl.kv_codec.header_fields import ScaleScope
from .inputs import SCALE_SCOPES

# Labels carry names from results files (models, implementations, stores): text, never
# mathtext, so that a "$" in a name can neither break a figure nor render as a formula.
matplotlib.rcParams["text.parse_math"] = False

OP_ORDER = [
    "encode",
    "parse",
    "quantize",
    "decode_fp8",
    "decode_dequant",
    "serialize",
    "serialize_v_only",
    "deserialize",
    "deserialize_v_only",
]
LIMIT_OPS = frozenset({"copy", "crc32", "alloc"})
# Floors drawn beside an operation's own limit: ``alloc`` (fresh output buffers) for encode.
FLOORS = {"encode": "alloc"}
IMPL_STYLE: dict[str, Literal["-", "--", ":"]] = {"reference": "-", "upstream": "--"}
DTYPE_MARKER = {"float16": "o", "bfloat16": "s"}
# One grey per limit (bench/RESULTS.md, limits): pageable copies dark, pinned ones lighter, so
# the two drawn in one CUDA panel (``limit`` and ``limit_pinned``) are told apart.
LIMIT_COLOR = {
    "memcpy": "0.15",
    "crc32": "0.45",
    "alloc": "0.65",
    "d2d": "0.15",
    "d2h_pageable": "0.15",
    "d2h_pinned": "0.55",
    "h2d_pageable": "0.15",
    "h2d_pinned": "0.55",
    "direct_put": "0.15",
    "direct_get": "0.15",
}
STATUS_COLOR = {"all pass": "#5cb85c", "known failures": "#f0ad4e", "failures": "#d9534f"}
DPI = 110
LABELLED_FAMILIES = 3
MAX_FIGURE_WIDTH = 18.0


def _impl_style(impl: object) -> Literal["-", "--", ":"]:
    return IMPL_STYLE.get(str(impl), ":")


def _scope_color(scope: object) -> str:
    return f"C{scope_rank(scope)}"


def _ordered(values: pd.Series, order: list[str]) -> list[str]:
    present = [str(v) for v in values.dropna().unique()]
    return [v for v in order if v in present] + sorted(v for v in present if v not in order)


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _save(fig: Figure, path: Path) -> None:
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def producer_consumer_heatmap(matrix: pd.DataFrame, path: Path) -> None:
    """Cross-implementation cases: rows produce blobs, columns consume them.

    A cell is red if any case failed, amber if any was a known failure, green if all passed.
    """
    grouped = matrix.groupby(["producer", "consumer"])[["cases", "pass", "fail", "known_failure"]]
    cells = grouped.sum()
    producers = sorted(cells.index.get_level_values(0).unique())
    consumers = sorted(cells.index.get_level_values(1).unique())
    status = np.full((len(producers), len(consumers)), np.nan)
    fig, ax = plt.subplots(
        figsize=(2.6 + 1.9 * len(consumers), 1.2 + 1.0 * len(producers)), layout="constrained"
    )
    for index, cell in cells.iterrows():
        producer, consumer = cast(tuple[str, str], index)
        i, j = producers.index(producer), consumers.index(consumer)
        if cell["cases"]:
            status[i, j] = 2 if cell["fail"] else (1 if cell["known_failure"] else 0)
        text = f"{int(cell['pass'])}/{int(cell['cases'])} pass"
        if cell["known_failure"]:
            text += f"\n{int(cell['known_failure'])} known"
        if cell["fail"]:
            text += f"\n{int(cell['fail'])} FAIL"
        ax.text(j, i, text, ha="center", va="center", fontsize=9)
    colours = ListedColormap(list(STATUS_COLOR.values())).with_extremes(bad="#e3e5e8")
    ax.imshow(status, cmap=colours, vmin=-0.5, vmax=2.5, aspect="auto")
    ax.set_xticks(range(len(consumers)), consumers)
    ax.set_yticks(range(len(producers)), producers)
    ax.set_xlabel("consumer (reads the blob)")
    ax.set_ylabel("producer (writes the blob)")
    ax.set_title("producer × consumer: cases passed")
    ax.legend(
        handles=[Patch(color=c, label=label) for label, c in STATUS_COLOR.items()]
        + [Patch(color="#e3e5e8", label="not run")],
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize=8,
    )
    _save(fig, path)


def _gbps_spread(rows: pd.DataFrame) -> npt.NDArray[np.float64]:
    """GB/s at median_s ± iqr_s/2, as asymmetric error-bar lengths around ``gbps``."""
    half = rows["iqr_s"].to_numpy(float) / 2
    median_s = rows["median_s"].to_numpy(float)
    nbytes = rows["bytes"].to_numpy(float)
    gbps = rows["gbps"].to_numpy(float)
    low = nbytes / (median_s + half) / 1e9
    high = np.where(median_s > half, nbytes / np.maximum(median_s - half, 1e-30) / 1e9, gbps)
    return np.vstack([np.clip(gbps - low, 0, None), np.clip(high - gbps, 0, None)])


def _limit_line(limits: pd.DataFrame, op_rows: pd.DataFrame) -> pd.Series:
    """A limit's median GB/s per case, on the bytes the operation processed where measured."""
    same_case = limits[limits["case"].isin(op_rows["case"])]
    same_bytes = same_case[same_case["bytes"].isin(op_rows["bytes"])]
    chosen = same_bytes if not same_bytes.empty else same_case
    return chosen.groupby("case")["gbps"].median()


def throughput_chart(throughput: pd.DataFrame, device: str, path: Path) -> None:
    """GB/s per case (ordered by bytes per call), one panel per operation, limits dashed.

    ``throughput`` must hold rows of at least one operation other than the limits on
    ``device``; with rows from several runs, each run gets its own lines.
    """
    rows = throughput[throughput["device"] == device]
    limits = rows[rows["op"].isin(LIMIT_OPS)]
    ops = _ordered(rows.loc[~rows["op"].isin(LIMIT_OPS), "op"], OP_ORDER)
    ncols = min(len(ops), 2)
    nrows = math.ceil(len(ops) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(6.2 * ncols, 3.9 * nrows), squeeze=False, layout="constrained"
    )
    limit_handles: dict[str, Line2D] = {}
    for ax, op in zip(axes.flat, ops, strict=False):
        op_rows = rows[rows["op"] == op]
        sizes = op_rows.groupby("case")["bytes"].median().sort_values()
        position = {case: i for i, case in enumerate(sizes.index)}
        for (impl, scope, dtype, _run), line in op_rows.groupby(
            ["impl", "scope", "dtype", "run_id"], dropna=False, sort=True
        ):
            line = line.assign(x=line["case"].map(position)).sort_values("x")
            ax.errorbar(
                line["x"],
                line["gbps"],
                yerr=_gbps_spread(line),
                color=_scope_color(scope),
                linestyle=IMPL_STYLE.get(str(impl), ":"),
                marker=DTYPE_MARKER.get(str(dtype), "^"),
                markersize=4,
                capsize=2,
                linewidth=1.3,
            )
        drawn_limits = {str(x) for x in op_rows["limit"].dropna()}
        if "limit_pinned" in op_rows:
            drawn_limits |= {str(x) for x in op_rows["limit_pinned"].dropna()}
        if op in FLOORS and (limits["impl"] == FLOORS[op]).any():
            drawn_limits.add(FLOORS[op])
        for limit in sorted(drawn_limits):
            for run_id, measured in limits[limits["impl"] == limit].groupby("run_id"):
                run_rows = op_rows[op_rows["run_id"] == run_id]
                limit_line = _limit_line(measured, run_rows)
                if limit_line.empty:
                    continue
                x = limit_line.index.map(position)
                order = np.argsort(x.to_numpy())
                (drawn,) = ax.plot(
                    x.to_numpy()[order],
                    limit_line.to_numpy()[order],
                    color=LIMIT_COLOR.get(limit, "0.3"),
                    linestyle=(0, (5, 3)),
                    linewidth=2.0,
                )
                limit_handles.setdefault(f"{limit} limit", drawn)
        ax.set_yscale("log")
        ax.set_xticks(
            range(len(sizes)),
            [f"{case}\n{_human_bytes(size)}" for case, size in sizes.items()],
            fontsize=8,
        )
        ax.set_xlim(-0.3, len(sizes) - 0.7)
        ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_title(f"{op} ({device})")
        ax.set_xlabel("case: input bytes per call (ordered by size)")
        ax.set_ylabel("throughput (GB/s, log)")
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes.flat[len(ops) :]:
        ax.set_visible(False)
    codec = rows[~rows["op"].isin(LIMIT_OPS)]
    keys = [
        *(
            Line2D([], [], color=_scope_color(s), linewidth=3, label=s)
            for s in _ordered(codec["scope"], list(SCALE_SCOPES))
        ),
        *(
            Line2D([], [], color="0.3", linestyle=_impl_style(i), label=i)
            for i in _ordered(codec["impl"], list(IMPL_STYLE))
        ),
        *(
            Line2D([], [], color="0.3", marker=DTYPE_MARKER.get(d, "^"), linestyle="", label=d)
            for d in _ordered(codec["dtype"], list(DTYPE_MARKER))
        ),
    ]
    for label, drawn in limit_handles.items():
        keys.append(Line2D([], [], color=drawn.get_color(), linestyle=(0, (5, 3)), label=label))
    fig.legend(
        handles=keys,
        loc="outside lower center",
        ncols=min(len(keys), 8),
        fontsize=8,
        title="colour: scope; line: implementation; marker: dtype; dashed: limits; bars: IQR",
        title_fontsize=8,
    )
    _save(fig, path)


def _family_colors(accuracy: pd.DataFrame) -> dict[str, str]:
    """One colour per data family (real models first), the same in every panel."""
    families = sorted(accuracy["data"].unique(), key=lambda d: (not d.startswith("real:"), d))
    return {family: f"C{k + 4}" for k, family in enumerate(families)}


def _grouped_bars(ax: Axes, rows: pd.DataFrame, fmt_value: str, colors: dict[str, str]) -> None:
    """Bars per scope, one per data family; values printed on bars when there are few."""
    scopes = _ordered(rows["scope"], list(SCALE_SCOPES))
    families = [f for f in colors if f in set(rows["data"])]
    width = 0.8 / max(len(families), 1)
    for k, family in enumerate(families):
        values = rows[rows["data"] == family].groupby("scope")["value"].mean().reindex(scopes)
        x = np.arange(len(scopes)) + (k - (len(families) - 1) / 2) * width
        bars = ax.bar(x, values.to_numpy(float), width, color=colors[family])
        if len(families) <= LABELLED_FAMILIES:
            ax.bar_label(bars, fmt=fmt_value, fontsize=7, padding=1)
    long_names = any(len(s) > 12 for s in scopes)
    ax.set_xticks(
        np.arange(len(scopes)),
        scopes,
        fontsize=8,
        rotation=20 if long_names else 0,
        ha="right" if long_names else "center",
    )
    ax.set_xlabel("scale scope")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.margins(y=0.15)


def _panel_width(rows: pd.DataFrame) -> float:
    """Inches for one bar panel: wider with more scope x family bars."""
    bars = int(rows["scope"].nunique()) * int(rows["data"].nunique())
    return max(5.0, 1.2 + 0.16 * bars)


def _family_legend(fig: Figure, colors: dict[str, str]) -> None:
    fig.legend(
        [Patch(color=c) for c in colors.values()],
        list(colors),
        loc="outside lower center",
        ncols=min(len(colors), 4),
        fontsize=8,
        title="data family",
        title_fontsize=8,
    )


def bytes_per_token_chart(accuracy: pd.DataFrame, path: Path) -> None:
    """Stored bytes per token per scope, and the overhead over each family's smallest scope."""
    rows = accuracy[(accuracy["metric"] == "bytes_per_token") & accuracy["value"].notna()]
    smallest = rows.groupby(["data", "fmt"])["value"].transform("min")
    overhead = rows.assign(value=(rows["value"] / smallest - 1.0) * 100.0)
    colors = _family_colors(rows)
    width = _panel_width(rows)
    fig, (left, right) = plt.subplots(1, 2, figsize=(2 * width, 4.2), layout="constrained")
    _grouped_bars(left, rows, "%.0f", colors)
    left.set_ylabel("stored bytes per token")
    left.set_title("stored bytes per token", fontsize=10)
    _grouped_bars(right, overhead, "%.2f%%", colors)
    right.set_ylabel("overhead over smallest scope (%)")
    right.set_title("bytes per token above the smallest scope, same data", fontsize=10)
    _family_legend(fig, colors)
    _save(fig, path)


E2E_METRICS = {
    "kl": ("next-token KL (nats), lower is better", 1.0),
    "top1": ("top-1 agreement (%)", 100.0),
    "ppl_change": ("perplexity change (%)", 100.0),
}
FMT_COLOR = {"e4m3": "C0", "e5m2": "C1", "int8": "C2"}


def e2e_chart(e2e: pd.DataFrame, path: Path) -> None:
    """Small multiples: one panel per metric, scopes along x, a point with its 95% interval
    per V format (colour) and cache dtype (marker)."""
    rows = e2e[e2e["layer"].isna() & e2e["metric"].isin(list(E2E_METRICS))]
    scopes = _ordered(rows["scope"], [*SCALE_SCOPES, CALIBRATED_EXTERNAL])
    fmts = _ordered(rows["fmt"], list(FMT_COLOR))
    dtypes = _ordered(rows["cache_dtype"], list(DTYPE_MARKER))
    fig, axes = plt.subplots(1, len(E2E_METRICS), figsize=(13.5, 3.3), layout="constrained")
    slots = [(f, d) for f in fmts for d in dtypes]
    width = 0.8 / max(len(slots), 1)
    for ax, (metric, (label, scale)) in zip(axes, E2E_METRICS.items(), strict=True):
        for k, (fmt, dtype) in enumerate(slots):
            sel = rows[
                (rows["metric"] == metric) & (rows["fmt"] == fmt) & (rows["cache_dtype"] == dtype)
            ]
            sel = sel.set_index("scope").reindex(scopes)
            x = np.arange(len(scopes)) + (k - (len(slots) - 1) / 2) * width
            value = sel["value"].to_numpy(float) * scale
            low = np.clip(value - sel["ci_low"].to_numpy(float) * scale, 0, None)
            high = np.clip(sel["ci_high"].to_numpy(float) * scale - value, 0, None)
            ax.errorbar(
                x,
                value,
                yerr=np.vstack([low, high]),
                fmt=DTYPE_MARKER.get(dtype, "^"),
                color=FMT_COLOR.get(fmt, "C3"),
                markersize=4,
                capsize=2,
                linewidth=1,
            )
        if metric == "kl":
            ax.set_yscale("log")
        if metric == "ppl_change":
            ax.axhline(0.0, color="0.5", linewidth=0.8)
        ax.set_xticks(range(len(scopes)), [s.replace("_", "_\n", 1) for s in scopes], fontsize=7)
        ax.set_title(label, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    handles = [Patch(color=FMT_COLOR.get(f, "C3"), label=f"V {f}") for f in fmts] + [
        Line2D([], [], marker=DTYPE_MARKER.get(d, "^"), linestyle="", color="0.3", label=d)
        for d in dtypes
    ]
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, title="95% CI bars")
    _save(fig, path)


def layer_chart(e2e: pd.DataFrame, path: Path) -> None:
    """Mean KL with one layer quantized, per layer, one line per scope (with its interval)."""
    rows = e2e[(e2e["metric"] == "layer_kl") & e2e["layer"].notna()]
    fig, ax = plt.subplots(figsize=(8.0, 2.8), layout="constrained")
    for scope, line in rows.groupby("scope"):
        line = line.sort_values("layer")
        ax.fill_between(
            line["layer"].to_numpy(float),
            line["ci_low"].to_numpy(float),
            line["ci_high"].to_numpy(float),
            color=_scope_color(scope),
            alpha=0.2,
        )
        ax.plot(
            line["layer"],
            line["value"],
            marker="o",
            markersize=3,
            color=_scope_color(scope),
            label=f"{scope} ({line['fmt'].iloc[0]}, {line['cache_dtype'].iloc[0]})",
        )
    ax.set_xlabel("the only quantized layer")
    ax.set_ylabel("next-token KL (nats)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)


def family_panels(
    accuracy: pd.DataFrame, families: list[str], titles: dict[str, str], path: Path
) -> None:
    """Small multiples: one panel per data family (in the given order), attention-output
    error per scope (V e4m3), each panel on its own log scale, titled with what the family is."""
    rows = accuracy[
        (accuracy["metric"] == "attn_rel_err")
        & (accuracy["fmt"] == "e4m3")
        & accuracy["value"].notna()
    ]
    ncols = min(len(families), 4)
    nrows = math.ceil(len(families) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(3.3 * ncols, 2.9 * nrows), squeeze=False, layout="constrained"
    )
    for ax in axes.flat[len(families) :]:
        ax.set_visible(False)
    for ax, family in zip(axes.flat, families, strict=False):
        sel = rows[rows["data"] == family].groupby("scope")["value"].mean()
        scopes = _ordered(pd.Series(sel.index), [*SCALE_SCOPES, CALIBRATED_EXTERNAL])
        values = sel.reindex(scopes).to_numpy(float)
        ax.bar(range(len(scopes)), values, color=[_scope_color(s) for s in scopes])
        positive = values[values > 0]
        if len(positive) and positive.max() > 10 * positive.min():
            ax.set_yscale("log")
        ax.set_xticks(range(len(scopes)), [_SHORT.get(s, s) for s in scopes], fontsize=7)
        title = textwrap.fill(titles.get(family, ""), 44)
        ax.set_title(f"{family.split(':', 1)[-1]}\n{title}", fontsize=7.5)
        ax.grid(True, axis="y", alpha=0.3)
    axes.flat[0].set_ylabel("attention-output rel. error", fontsize=8)
    _save(fig, path)


_SHORT = {
    ScaleScope.PER_TENSOR.name: "TENSOR",
    ScaleScope.PER_LAYER_HEAD.name: "L·HEAD",
    ScaleScope.PER_PAGE_HEAD.name: "P·HEAD",
    ScaleScope.EXTERNAL.name: "EXT 1.0",
    CALIBRATED_EXTERNAL: "EXT cal",
}


#: The answer figure's size in pixels at ``DPI`` (the page's content width; the img tag
#: states it, so the layout does not wait for the image).
ANSWER_SIZE = (1232, 420)


#: Marker per scale scope in the answer figure (a serde without scopes: a circle).
SCOPE_MARKER = {
    ScaleScope.PER_TENSOR.name: "s",
    ScaleScope.PER_LAYER_HEAD.name: "D",
    ScaleScope.PER_PAGE_HEAD.name: "^",
    CALIBRATED_EXTERNAL: "v",
}


def _serde_labels(rows: pd.DataFrame, x: npt.NDArray[np.float64]) -> dict[int, str]:
    """One label per serde, at its leftmost point; serdes whose points coincide (no serde
    and a lossless one) share one label."""
    at: dict[tuple[float, float], list[str]] = {}
    where: dict[tuple[float, float], int] = {}
    for serde, group in rows.groupby("serde", sort=False):
        k = int(group.index[int(np.argmin(x[group.index]))])
        size = rows["l2_bytes_per_token"].to_numpy(float)[k]
        spot = (round(float(x[k]), 12), round(float(size), -1))
        at.setdefault(spot, []).append(str(serde))
        where.setdefault(spot, k)
    return {where[spot]: " / ".join(names) for spot, names in at.items()}


def answer_chart(table: pd.DataFrame, budget: float, cost: pd.DataFrame, path: Path) -> None:
    """The operator's answer (bench.recommendation.serde_choice): per serde and scope, bytes
    in L2 per token against the model's next-token KL (left, log scale; a serde checked
    bit-exact sits at "0, bit-exact") and against the perplexity change with the budget
    shaded (middle); 95% intervals, worse cache dtype; filled: the installed release builds
    it, hollow: it needs a newer one; the recommended point ringed. Right, where ``cost``
    (``bench.recommendation.store_cost``) has rows: each serde's store and load GB/s through
    LMCache per adapter (interquartile bars), the same run's direct put or get of its bytes
    with the store's own client as a tick."""
    rows = table[table["l2_bytes_per_token"].notna()].reset_index(drop=True)
    width, height = ANSWER_SIZE
    fig = plt.figure(figsize=(width / DPI, height / DPI), layout="constrained")
    panels = [5, 3, 3] if not cost.empty else [3, 2]
    grid = fig.add_gridspec(1, len(panels), width_ratios=panels)
    ax_kl = fig.add_subplot(grid[0])
    ax_ppl = fig.add_subplot(grid[1], sharey=ax_kl)
    ax_ppl.tick_params(labelleft=False)
    if not cost.empty:
        _store_cost_panel(fig.add_subplot(grid[2]), cost)
    positive = rows["kl"][rows["kl"] > 0]
    floor = float(positive.min()) / 10 if not positive.empty else 1e-6
    serdes = list(dict.fromkeys(rows["serde"]))
    colors = {s: f"C{i % 10}" for i, s in enumerate(serdes)}
    y = rows["l2_bytes_per_token"].to_numpy(float)
    for ax, metric, scale in ((ax_kl, "kl", 1.0), (ax_ppl, "ppl_change", 100.0)):
        value = rows[metric].to_numpy(float) * scale
        low = rows[f"{metric}_low"].to_numpy(float) * scale
        high = rows[f"{metric}_high"].to_numpy(float) * scale
        if metric == "kl":
            value, low, high = (np.where(value > 0, a, floor) for a in (value, low, high))
        labels = _serde_labels(rows, value) if ax is ax_kl else {}
        for i, row in rows.iterrows():
            k = int(cast(int, i))
            color = colors[row["serde"]]
            filled = bool(row.get("lmcache_writes", True))
            ax.errorbar(
                value[k],
                y[k],
                xerr=[[max(value[k] - low[k], 0)], [max(high[k] - value[k], 0)]],
                fmt=SCOPE_MARKER.get(str(row["scope"]), "o"),
                color=color,
                markerfacecolor=color if filled else "white",
                markersize=7,
                capsize=2,
                linewidth=1,
            )
            if bool(row.get("chosen", False)):
                ax.plot(
                    value[k],
                    y[k],
                    "o",
                    markersize=17,
                    markerfacecolor="none",
                    markeredgecolor="black",
                    markeredgewidth=1.6,
                )
            if k in labels:
                ax.annotate(
                    labels[k],
                    (value[k], y[k]),
                    xytext=(6, 3),
                    textcoords="offset points",
                    fontsize=7,
                    color=color,
                )
    ax_kl.set_xscale("log")
    ticks = [t for t in ax_kl.get_xticks() if t > floor * 3]
    ax_kl.set_xticks([floor, *ticks], ["0, bit-exact", *(f"{t:.0e}" for t in ticks)])
    ax_kl.set_xlim(floor / 3, max(float(rows["kl_high"].max()), floor) * 3)
    ax_kl.set_xlabel("next-token KL (nats, log), 95% interval")
    ax_kl.set_ylabel("bytes in L2 per token")
    ax_kl.yaxis.set_major_formatter(ticker.StrMethodFormatter("{x:,.0f}"))
    ax_ppl.axvspan(-1e9, budget * 100, color="#c9efcf", alpha=0.6)
    finite = rows[["ppl_change_low", "ppl_change_high"]].to_numpy(float) * 100
    span = np.nanmax(np.abs(finite)) if np.isfinite(finite).any() else 1.0
    ax_ppl.set_xlim(-max(span, budget * 100) * 1.2, max(span, budget * 100) * 1.2)
    ax_ppl.axvline(0.0, color="0.5", linewidth=0.8)
    ax_ppl.set_xlabel("perplexity change (%)")
    for ax in (ax_kl, ax_ppl):
        ax.grid(True, alpha=0.3)
    handles = [
        Line2D([], [], marker="o", linestyle="", color="0.3", label="installed release builds it"),
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            color="0.3",
            markerfacecolor="white",
            label="needs a newer release",
        ),
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            markersize=12,
            markerfacecolor="none",
            color="black",
            label="recommended",
        ),
        Patch(color="#c9efcf", label=f"perplexity budget (+{budget:.0%} at 95%)"),
    ]
    scopes = [str(sc) for sc in dict.fromkeys(rows["scope"]) if str(sc) in SCOPE_MARKER]
    handles += [
        Line2D([], [], marker=SCOPE_MARKER[sc], linestyle="", color="0.3", label=sc)
        for sc in scopes
    ]
    fig.legend(handles=handles, fontsize=7, loc="outside right upper", title="markers")
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _store_cost_panel(ax: Axes, cost: pd.DataFrame) -> None:
    """Horizontal bars: store and load GB/s per (serde, adapter), interquartile whiskers,
    the limit (the same bytes put or got with the store's own client, same run) as a black
    tick."""
    labels = list(dict.fromkeys(f"{r.serde} {r.adapter}" for r in cost.itertuples()))
    y = {label: i for i, label in enumerate(labels)}
    for offset, (op, color) in ((-0.2, ("store", "C0")), (0.2, ("load", "C2"))):
        rows = cost[cost["op"] == op]
        ys = [y[f"{r.serde} {r.adapter}"] + offset for r in rows.itertuples()]
        gbps = rows["gbps"].to_numpy(float)
        spread = np.vstack(
            [gbps - rows["gbps_q25"].to_numpy(float), rows["gbps_q75"].to_numpy(float) - gbps]
        )
        ax.barh(ys, gbps, height=0.38, color=color, label=op)
        ax.errorbar(gbps, ys, xerr=np.clip(spread, 0, None), fmt="none", color="0.2", lw=0.8)
        ax.plot(rows["limit_gbps"].to_numpy(float), ys, "|", color="black", markersize=9)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("GB/s through LMCache (|: direct put/get)")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("store path, this machine", fontsize=8)
