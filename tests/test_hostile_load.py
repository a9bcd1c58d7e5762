"""The hostile-load run in short (``bench.server_load.hostile``): each attack beside a canary on a
fresh
reference server at its default slots and timeouts (capacity 64 MiB), loopback only,
3 s each. Every bound of SPEC "Bounds a peer cannot stretch" is exercised: the canary is
served through an idle flood that holds and reconnects every slot (PROTO-SRV-SLOTS), slow
headers (PROTO-SRV-DEADLINES), replies never read and garbage; the server's peak RSS stays
within its stated bound (capacity + base + per-connection buffers, PROTO-SRV-MEMORY)
under every attack, stalled payloads included (PROTO-SRV-BUDGET)."""

from __future__ import annotations

import pytest

from lmckv.base.schemas import validate
from lmckv.bench.server_load.hostile import ATTACKS, HostilePlan, run_attack

PLAN = HostilePlan(duration_s=3.0)
#: Attacks a canary must get through (a stalled payload refreshed every second can hold
#: the whole budget: the canary's PUTs are refused then, SPEC PROTO-SRV-BUDGET).
CANARY_SERVED = {"none", "idle-flood", "slow-headers", "unread-replies", "garbage"}


@pytest.mark.parametrize("attack", ATTACKS)
def test_bounds_hold_under_attack(attack: str) -> None:
    row = run_attack(attack, PLAN)
    validate({**row, "machine_id": "0" * 16}, "bench-row")
    assert row["server_alive"], "the server died"
    assert row["within_bound"], (
        f"peak RSS {row['peak_rss_bytes']} above the stated {row['memory_bound_bytes']}"
    )
    assert row["peak_fds"] <= PLAN.max_connections + 32, f"{row['peak_fds']} descriptors open"
    assert row["peak_threads"] <= 4, f"{row['peak_threads']} threads"
    if attack in CANARY_SERVED:
        assert row["canary_requests"] >= 10, row
        assert row["canary_success"] >= 0.95, (
            f"the canary got {row['canary_served']} of {row['canary_requests']} served "
            f"(first failure: {row['canary_first_failure']})"
        )
