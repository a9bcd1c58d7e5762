"""``lmckv bench load`` on the reference server, small: every value verified, rows valid
under the bench-row schema, the server stopped afterwards."""

from __future__ import annotations

from lmckv.bench.common.rows import validate_record
from lmckv.bench.server_load.load import LoadPlan, format_table, run_load

#: What the results writer stamps on every row after the header.
MACHINE_ID = "0123456789abcdef"


def test_small_load_on_the_reference_server() -> None:
    plan = LoadPlan(clients=2, ops=5, time_cap_s=10, sizes=("page-16", "chunk-256"))
    rows = run_load(["reference-server"], plan)
    assert [r["size"] for r in rows] == ["page-16", "chunk-256"]
    for row in rows:
        validate_record({**row, "machine_id": MACHINE_ID})  # the writer stamps it
        assert row["errors"] == 0 and row["verified"] == row["round_trips"] == 10
        assert row["p50_ms"] <= row["p99_ms"] and row["bytes_per_s"] > 0
    assert "reference-server" in format_table(rows)


def test_load_rows_validate_with_unknown_process_figures() -> None:
    row = {
        "kind": "load",
        "impl": "server-at",
        "size": "page-16",
        "value_bytes": 65536,
        "clients": 1,
        "round_trips": 0,
        "requests_per_s": None,
        "bytes_per_s": None,
        "p50_ms": None,
        "p99_ms": None,
        "peak_rss_mb": None,
        "peak_threads": None,
        "verified": 0,
        "errors": 1,
        "machine_id": MACHINE_ID,
    }
    validate_record(row)
