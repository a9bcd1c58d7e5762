"""bench.throughput.stats and bench.throughput.timing: medians, quartiles, calibration and
interleaving."""

from __future__ import annotations

import pytest

from lmckv.bench.common.quantiles import quantile
from lmckv.bench.throughput.stats import gbps, summarize
from lmckv.bench.throughput.timing import Timed, calibrate, run_interleaved


def test_summary_of_known_sample() -> None:
    s = summarize([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (s.median, s.q25, s.q75, s.iqr, s.n) == (3.0, 2.0, 4.0, 2.0, 5)


def test_quantiles_interpolate_between_order_statistics() -> None:
    values = [10.0, 20.0]
    assert quantile(values, 0.5) == 15.0
    assert quantile(values, 0.25) == 12.5
    assert summarize([7.0]).iqr == 0.0


def test_quantile_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="empty"):
        quantile([], 0.5)
    with pytest.raises(ValueError, match="outside"):
        quantile([1.0], 1.5)


def test_gbps_is_decimal_gigabytes_per_second() -> None:
    assert gbps(2_000_000_000, 0.5) == 4.0
    with pytest.raises(ValueError):
        gbps(1, 0.0)


class FakeClock:
    """Calls fn ``number`` times and reports a fixed time per call."""

    def __init__(self, per_call: float) -> None:
        self.per_call = per_call

    def elapsed(self, fn, number: int) -> float:  # type: ignore[no-untyped-def]
        for _ in range(number):
            fn()
        return self.per_call * number


def test_calibration_grows_number_until_sample_is_long_enough() -> None:
    item = Timed(("x",), lambda: None, FakeClock(1e-4))
    calibrate(item, min_sample_s=0.01)
    assert item.number * 1e-4 >= 0.01
    assert item.error is None


def test_rounds_are_interleaved_and_rotated() -> None:
    order: list[str] = []
    items = [Timed((n,), (lambda n=n: order.append(n)), FakeClock(1.0)) for n in "abc"]
    live = run_interleaved(items, rounds=3, warmup=0, min_sample_s=0.5)
    assert [len(i.samples) for i in live] == [3, 3, 3]
    # one calibrating call each (long enough on its own), then rounds abc, bca, cab
    assert "".join(order) == "abc" + "abc" + "bca" + "cab"
    assert all(s == 1.0 for i in live for s in i.samples)


def test_a_failing_benchmark_is_recorded_not_raised() -> None:
    def boom() -> None:
        raise RuntimeError("cannot dequantize")

    ok = Timed(("ok",), lambda: None, FakeClock(1.0))
    bad = Timed(("bad",), boom, FakeClock(1.0))
    live = run_interleaved([ok, bad], rounds=2, warmup=1, min_sample_s=0.1)
    assert live == [ok]
    assert bad.error == "RuntimeError: cannot dequantize"
    assert bad.samples == []


def test_progress_is_planned_without_the_refused_benchmarks() -> None:
    """A bar sized before calibration would stop short of 100% when an implementation refuses
    an op; the plan counts only the benchmarks that will be timed."""

    def boom() -> None:
        raise RuntimeError("EXTERNAL needs a static scale")

    planned: list[int] = []
    done: list[None] = []
    items = [Timed((n,), lambda: None, FakeClock(1.0)) for n in "ab"]
    items.append(Timed(("refused",), boom, FakeClock(1.0)))
    run_interleaved(
        items, rounds=4, warmup=0, min_sample_s=0.1,
        on_planned=planned.append, on_sample=lambda: done.append(None),
    )  # fmt: skip
    assert planned == [2 * 4]
    assert len(done) == planned[0]
