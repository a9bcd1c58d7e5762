"""The throughput figure knows every limit the bench writes; flagged CUDA rows are listed."""

from __future__ import annotations

import pandas as pd

from lmckv.bench.common.rows import LIMIT_IMPLS
from lmckv.reports.bench_section import flagged_rows
from lmckv.reports.figures import LIMIT_COLOR


def test_every_limit_the_schema_names_has_a_colour() -> None:
    assert set(LIMIT_COLOR) == set(LIMIT_IMPLS)
    assert LIMIT_COLOR["d2h_pageable"] != LIMIT_COLOR["d2h_pinned"]  # drawn in one panel
    assert LIMIT_COLOR["h2d_pageable"] != LIMIT_COLOR["h2d_pinned"]


def test_launch_bound_and_throttled_rows_are_flagged() -> None:
    base = {
        "machine": "m",
        "device": "cuda",
        "op": "encode",
        "impl": "reference",
        "scope": "PER_TENSOR",
        "dtype": "float16",
        "median_s": 1e-5,
        "gbps": 1.0,
    }
    rows = pd.DataFrame(
        [
            {**base, "case": "a", "launch_bound": True, "throttled": False},
            {**base, "case": "b", "launch_bound": None, "throttled": True},
            {**base, "case": "c", "launch_bound": True, "throttled": True},
            {**base, "case": "d", "launch_bound": False, "throttled": None},
        ]
    )
    flagged = flagged_rows(rows)
    assert list(flagged["case"]) == ["a", "b", "c"]
    assert list(flagged["flags"]) == ["launch_bound", "throttled", "launch_bound, throttled"]
    assert flagged_rows(rows.drop(columns=["launch_bound", "throttled"])).empty
