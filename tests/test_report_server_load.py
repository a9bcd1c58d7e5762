"""The report's server-load section: hostile rows tabled beside the plain load rows."""

from __future__ import annotations

import pandas as pd

from lmckv.reports.server_load_section import hostile_table


def test_hostile_table_units() -> None:
    rows = pd.DataFrame(
        [
            {
                "impl": "reference-server",
                "attack": "idle-flood",
                "canary_served": 19,
                "canary_requests": 20,
                "canary_p99_ms": 12.345,
                "peak_rss_bytes": 300 << 20,
                "memory_bound_bytes": 544 << 20,
                "capacity_bytes": 64 << 20,
                "peak_threads": 2,
                "peak_fds": 270,
                "attacker_connections": 3000,
            },
            {
                "impl": "upstream-server",
                "attack": "none",
                "canary_served": 0,
                "canary_requests": 0,
                "canary_p99_ms": None,
                "peak_rss_bytes": None,
                "memory_bound_bytes": None,
                "capacity_bytes": 64 << 20,
                "peak_threads": None,
                "peak_fds": None,
                "attacker_connections": 0,
            },
        ]
    )
    table = hostile_table(rows)
    first, second = table.iloc[0], table.iloc[1]
    assert (first["canary served"], first["canary p99 ms"]) == ("19/20", "12.3")
    assert (first["peak RSS MiB"], first["stated bound MiB"]) == ("300", "544")
    assert (second["canary p99 ms"], second["peak RSS MiB"], second["stated bound MiB"]) == (
        "-",
        "-",
        "-",
    )
