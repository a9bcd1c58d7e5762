"""What a release's L2 adapters serve from a damaged store (SPEC.md "Reading a damaged store",
rules STORE-LOAD-*): each adapter that runs here (fs, fs_native, resp against a loopback
redis-server, s3 against moto), with each serde (none, fp8, aesgcm), is an implementation of
"keep these bytes under this key and give back exactly them, or a miss".

Per adapter (:mod:`..store.fault_run`): one store per serde, written by the release's own
StorageManager, damaged from outside with the store's own client (:mod:`..store.faults`),
then read back object by object through a fresh StorageManager; the server adapters through
a proxy that cuts the connection while one object is on its way. One test per adapter x serde
x fault judges the read of that fault's target; one per adapter x serde judges the intact
objects. Each adapter is written and read once per process (the tests of one adapter share an
xdist group).

Runs for an implementation that declares ``store.l2-adapters`` (a release with a
StorageManager). A machine without redis-server, moto, redis-py or boto3 skips the adapter that
needs it, naming what is missing; with ``LMCKV_REQUIRE_STORES`` set (``nox -s tests``) that is
a failure instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from lmckv.base.untrusted_text import shown

from ..core import observations
from ..drivers.base import Driver
from ..store import catalogue
from ..store.fault_run import AdapterRun, run_adapter
from ..store.faults import (
    AFTER,
    AGAIN,
    BEFORE,
    BY_NAME,
    DAMAGED,
    FAULTS,
    adapters,
    neighbours_verdict,
    serdes,
    verdict,
)
from ..store.lmcache_writer import StoreWriteError
from ..store.servers import StoreUnavailable
from ..store.serving import cases, judge
from .verdicts import require

#: The capability a release needs (conformance/drivers/upstream_driver.py).
L2_ADAPTERS = "store.l2-adapters"
#: Set: a store that cannot be opened here fails its tests instead of skipping them.
REQUIRE_STORES = "LMCKV_REQUIRE_STORES"
NEIGHBOURS_RULE = "STORE-LOAD-NEIGHBOURS"
#: What a test judges: the read of the fault's target, or the intact objects' reads.
TARGET_READ, NEIGHBOURS = "target", "neighbours"
_RUNS: dict[str, AdapterRun | str] = {}


def fault_cells() -> list[object]:
    """adapter x serde x fault of the catalogue's fault-suite rows, each judged twice: by the
    fault's rule and by STORE-LOAD-NEIGHBOURS."""
    cells: list[object] = []
    for adapter in adapters():
        group = pytest.mark.xdist_group(f"store-load-{adapter}")
        for serde in serdes():
            for fault in (f for f in FAULTS if f.applies(adapter)):
                for rule, judged in ((fault.rule, TARGET_READ), (NEIGHBOURS_RULE, NEIGHBOURS)):
                    marks = [pytest.mark.rule(rule), group]
                    cell_id = f"{adapter}-{serde}-{fault.name}-{judged}"
                    cells.append(
                        pytest.param(adapter, serde, fault.name, judged, marks=marks, id=cell_id)
                    )
    return cells


def _run(adapter: str) -> AdapterRun:
    """The adapter's fault run, once per process; a store that cannot be opened skips (or,
    when stores are required, fails) every test of the adapter, a write that fails fails it."""
    if adapter not in _RUNS:
        try:
            _RUNS[adapter] = run_adapter(adapter)
        except StoreUnavailable as exc:
            _RUNS[adapter] = f"unavailable: {exc}"
        except StoreWriteError as exc:
            _RUNS[adapter] = f"LMCache could not write the {adapter} stores: {exc}"
    run = _RUNS[adapter]
    if isinstance(run, str):
        if run.startswith("unavailable: ") and not os.environ.get(REQUIRE_STORES):
            pytest.skip(run)
        pytest.fail(run, pytrace=False)
    return run


@pytest.mark.parametrize(("adapter", "serde", "fault", "judged"), fault_cells())
def test_store_load(
    impl: Driver,
    adapter: str,
    serde: str,
    fault: str,
    judged: str,
    record_property: Callable[[str, object], None],
) -> None:
    """The read of the fault's target keeps the fault's rule; the intact objects read before
    and after it keep STORE-LOAD-NEIGHBOURS."""
    require(impl, L2_ADAPTERS)
    run = _run(adapter).stores[serde]
    reads = run.sessions[fault]
    damaged = BY_NAME[fault]
    if judged == NEIGHBOURS:
        seen = [reads[i].outcome for i in (BEFORE, AFTER, AGAIN)]
        record_property("observed", ", ".join(seen))
        why = neighbours_verdict(damaged, reads)
        if why is not None:
            observations.record(", ".join(seen))
            pytest.fail(f"{adapter} with {serde}, {damaged.does}: {why}", False)
        return
    read = reads[DAMAGED]
    record_property("observed", read.outcome)
    if fault == "dropped" and run.drops == 0:
        pytest.fail(f"the proxy never saw {adapter} request the object: nothing was cut", False)
    why = verdict(damaged, serde, read)
    if why is not None:
        observations.record(read.outcome)
        pytest.fail(f"{adapter} with {serde}, object {damaged.does}: {why}", False)


def serve_cells() -> list[object]:
    """adapter x serde x serving case (:func:`..store.serving.cases`); the capacity case
    where the adapter takes a capacity (its catalogue row)."""
    cells: list[object] = []
    for adapter in adapters():
        group = pytest.mark.xdist_group(f"store-load-{adapter}")
        capacity = catalogue.adapter(adapter).capacity
        for serde in serdes():
            for case in cases():
                if case.id == "capacity" and not capacity:
                    continue
                marks = [pytest.mark.rule(case.rule), group]
                cells.append(
                    pytest.param(
                        adapter, serde, case.id, marks=marks, id=f"{adapter}-{serde}-{case.id}"
                    )
                )
    return cells


@pytest.mark.parametrize(("adapter", "serde", "case"), serve_cells())
def test_store_serve(
    impl: Driver,
    adapter: str,
    serde: str,
    case: str,
    record_property: Callable[[str, object], None],
) -> None:
    """LMCache as it serves (SPEC.md "Serving from a store"): whole tasks with one object
    damaged keep STORE-SERVE-PREFIX; a process that read a damaged task still serves intact
    ones (STORE-SERVE-AFTER); objects changed after a read (STORE-SERVE-LATER); a task of
    mixed layouts and tasks in flight together are served exact (STORE-SERVE-MIXED,
    STORE-SERVE-TOGETHER); an object rewritten while read is never torn (STORE-SERVE-RACE); a
    writer killed mid-burst leaves nothing served wrong and fsck names what it left
    (STORE-SERVE-CRASH); an adapter filled past its capacity stays within it and serves what
    it holds (STORE-SERVE-CAPACITY)."""
    require(impl, L2_ADAPTERS)
    seen, why = judge(case, serde, _run(adapter).serving[serde])
    record_property("observed", seen)
    if why is not None:
        observations.record(seen)
        pytest.fail(f"{adapter} with {serde}, {case}: {shown(why)}", False)


def _name_cells() -> list[object]:
    """Each adapter's names both ways, judged by the rule of its name form."""
    cells: list[object] = []
    for adapter in adapters():
        group = pytest.mark.xdist_group(f"store-load-{adapter}")
        rule = catalogue.adapter(adapter).form.rule
        for way in ("written", "served"):
            marks = [pytest.mark.rule(rule), group]
            cells.append(pytest.param(adapter, way, marks=marks, id=f"{adapter}-{way}"))
    return cells


@pytest.mark.parametrize(("adapter", "way"), _name_cells())
def test_store_names(impl: Driver, adapter: str, way: str) -> None:
    """Both ways of an adapter's names (SPEC.md "A store", "Names"): the objects LMCache
    writes are named as the reference names them (``written``), and LMCache serves the objects
    lmckv wrote under the reference's names (``served``)."""
    require(impl, L2_ADAPTERS)
    run = _run(adapter)
    if way == "written":
        missing = sorted(set(run.names_expected) - set(run.names_listed))
        unexpected = sorted(set(run.names_listed) - set(run.names_expected))
        if missing or unexpected:
            observations.record("names", f"{len(missing)} missing, {len(unexpected)} unexpected")
            pytest.fail(
                f"{adapter} named objects otherwise than the reference: the store lacks "
                f"{[shown(n) for n in missing[:3]]} and holds {[shown(n) for n in unexpected[:3]]}",
                False,
            )
        return
    bad = [(r.obj.key(), r.outcome) for r in run.served if not r.exact]
    if bad:
        observations.record(", ".join(sorted({outcome for _, outcome in bad})))
        pytest.fail(f"{adapter} did not serve objects named by the reference: {bad[:3]}", False)
