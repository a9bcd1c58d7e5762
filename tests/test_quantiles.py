"""One quantile definition: ``bench.common.quantiles`` (linear interpolation between the
closest ranks, numpy's default ``"linear"``, ``statistics.quantiles(method="inclusive")``).

The definition is pinned on small samples, and no other shipped module computes a quantile
itself: none calls a ``quantile``/``percentile`` function of numpy, statistics, scipy, torch or
pandas, imports one, or defines one. Medians may still come from ``statistics.median`` or
pandas' ``median()``: with an interpolated middle they are the same definition at 0.5.
"""

from __future__ import annotations

import ast
import math
import random
import statistics

import numpy as np
import pytest
from test_import_graph import MODULES

from lmckv.bench.common.quantiles import iqr, quantile, quantile_or_none, quantiles
from lmckv.bench.throughput.stats import summarize

HOME = "lmckv.bench.common.quantiles"
#: Names of quantile functions elsewhere (numpy, statistics, scipy, torch, pandas methods).
FOREIGN = {
    "quantile",
    "quantiles",
    "percentile",
    "nanquantile",
    "nanpercentile",
    "scoreatpercentile",
    "mquantiles",
}


def test_the_definition_on_small_samples() -> None:
    assert quantile([1, 2, 3, 4], 0.25) == 1.75
    assert quantile([1, 2, 3, 4], 0.5) == 2.5
    assert quantile([1, 2, 3, 4], 0.75) == 3.25
    assert quantile([4, 1, 3, 2], 0.25) == 1.75  # any order
    assert quantile(range(1, 101), 0.99) == pytest.approx(99.01)
    assert quantile(range(1, 101), 0.5) == 50.5
    assert quantile([10.0, 20.0], 0.25) == 12.5
    assert quantile([7.0], 0.99) == 7.0
    assert quantile([3.0, 1.0], 0.0) == 1.0 and quantile([3.0, 1.0], 1.0) == 3.0
    assert quantiles([1, 2, 3, 4], (0.75, 0.25)) == [3.25, 1.75]
    assert iqr([1, 2, 3, 4]) == 1.5 and iqr([5.0, 5.0, 5.0]) == 0.0


def test_empty_samples_bad_levels_and_nan() -> None:
    with pytest.raises(ValueError, match="empty"):
        quantile([], 0.5)
    with pytest.raises(ValueError, match="outside"):
        quantile([1.0], 1.5)
    with pytest.raises(ValueError, match="outside"):
        quantile([1.0], math.nan)
    assert quantile_or_none([], 0.99) is None
    assert quantile_or_none([2.0, 1.0], 0.5) == 1.5
    assert math.isnan(quantile([1.0, math.nan, 3.0], 0.5))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 10, 17, 100, 2000])
def test_it_is_numpys_linear_and_statistics_inclusive(n: int) -> None:
    rng = random.Random(n)
    sample = [rng.lognormvariate(0.0, 1.0) for _ in range(n)]
    levels = [0.0, 0.01, 0.025, 0.25, 0.5, 0.75, 0.975, 0.99, 1.0]
    ours = quantiles(sample, levels)
    assert ours == [float(q) for q in np.quantile(sample, levels, method="linear")]
    assert quantile(sample, 0.5) == pytest.approx(statistics.median(sample), rel=1e-12)
    if n > 1:
        quartiles = statistics.quantiles(sample, n=4, method="inclusive")
        assert ours[3:6] == pytest.approx(quartiles, rel=1e-12)
        percentiles = statistics.quantiles(sample, n=100, method="inclusive")
        assert ours[7] == pytest.approx(percentiles[98], rel=1e-12)


def test_the_timing_summary_uses_it() -> None:
    s = summarize([4.0, 1.0, 3.0, 2.0])
    assert (s.median, s.q25, s.q75, s.iqr, s.n) == (2.5, 1.75, 3.25, 1.5, 4)


def _own_quantiles(tree: ast.AST) -> list[tuple[int, str]]:
    """Where ``tree`` computes a quantile other than through the home module."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in FOREIGN
        ):
            found.append((node.lineno, f"calls .{node.func.attr}()"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [a.name for a in node.names if a.name in FOREIGN]
            if names:
                found.append((node.lineno, f"imports {', '.join(names)} from {node.module}"))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = node.name.lower()
            if "quantile" in name or "percentile" in name:
                found.append((node.lineno, f"defines {node.name}()"))
    return found


def test_no_other_module_computes_a_quantile() -> None:
    found = sorted(
        f"{module} line {line}: {what}"
        for module, path in MODULES.items()
        if module != HOME
        for line, what in _own_quantiles(ast.parse(path.read_text(encoding="utf-8")))
    )
    assert not found, "use lmckv.bench.common.quantiles instead:\n" + "\n".join(found)


def test_the_scan_sees_a_quantile() -> None:
    """The scan finds what it looks for (a scan that finds nothing anywhere would pass
    vacuously): the home module's definitions, and each foreign spelling."""
    assert {what for _, what in _own_quantiles(ast.parse(MODULES[HOME].read_text()))} >= {
        "defines quantile()",
        "defines quantiles()",
    }
    snippets = [
        "np.quantile(x, 0.5)",
        "np.percentile(x, 99)",
        "statistics.quantiles(x, n=4, method='inclusive')",
        "frame['x'].quantile(0.99)",
        "from statistics import quantiles",
        "from numpy import percentile",
        "def percentile(v, q): return v[0]",
        "def _p99_quantile(v): return v[-1]",
    ]
    for code in snippets:
        assert _own_quantiles(ast.parse(code)), code
    allowed = "from ..common.quantiles import quantile\nquantile(x, 0.5)\nstatistics.median(x)"
    assert not _own_quantiles(ast.parse(allowed))
