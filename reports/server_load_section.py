"""The cache servers under load: the plain load table (``lmckv bench load``) and, beside it,
the hostile-load table (``lmckv bench load --hostile``, bench/server_load/hostile.py): per attack,
the
canary's success rate and p99 latency and the server's peak RSS against its stated bound."""

from __future__ import annotations

import pandas as pd

from .html import Section, note, paragraph, table
from .inputs import ReportInputs
from .output import Output


def _mib(value: float | None) -> str:
    return "-" if value is None or pd.isna(value) else f"{value / 2**20:.0f}"


def hostile_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per server x attack, in the units a reader compares."""
    out = pd.DataFrame(
        {
            "server": rows["impl"],
            "attack": rows["attack"],
            "canary served": [
                f"{int(s)}/{int(n)}"
                for s, n in zip(rows["canary_served"], rows["canary_requests"], strict=True)
            ],
            "canary p99 ms": rows["canary_p99_ms"].map(lambda v: "-" if pd.isna(v) else f"{v:.1f}"),
            "peak RSS MiB": rows["peak_rss_bytes"].map(_mib),
            "stated bound MiB": rows["memory_bound_bytes"].map(_mib),
            "capacity MiB": rows["capacity_bytes"].map(_mib),
            "threads": rows["peak_threads"],
            "fds": rows["peak_fds"],
            "attacker conns": rows["attacker_connections"],
        }
    )
    return out.reset_index(drop=True)


def server_load_section(inputs: ReportInputs, out: Output) -> Section | None:
    """None when the files hold neither load nor hostile rows (the page keeps its
    sections)."""
    if not inputs.bench:
        return None
    load = inputs.bench_table("load")
    hostile = inputs.bench_table("hostile")
    if load.empty and hostile.empty:
        return None
    body = []
    if load.empty:
        body.append(note("no plain load rows in this run (lmckv bench load)"))
    else:
        out.csv(load, "load.csv")
        shown = load[["impl", "size", "clients", "round_trips", "requests_per_s", "p99_ms"]]
        body.append(paragraph("Plain load: N clients x PUT+GET round trips per value size."))
        body.append(table(shown.reset_index(drop=True)))
    if hostile.empty:
        body.append(note("no hostile-load rows in this run (lmckv bench load --hostile)"))
    else:
        out.csv(hostile, "hostile.csv")
        body.append(
            paragraph(
                "Hostile load: each attack beside a canary client (one fresh connection and "
                "one PUT+GET per turn) on a fresh server, loopback only; the server's peak "
                "RSS against the bound it states (SPEC PROTO-SRV-MEMORY)."
            )
        )
        body.append(table(hostile_table(hostile)))
    return Section("server-load", "Cache servers under load", "".join(body))
