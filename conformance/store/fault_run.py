"""One adapter's fault run: per serde, a store written by LMCache's StorageManager, damaged
from outside (:mod:`.faults`), then read back through LMCache in fresh processes
(:func:`.lmcache_writer.probe_store`); the servers' stores are read through a
:class:`.drop_proxy.DropProxy` that cuts the connection while the ``dropped`` target is on
its way. What each read gave is the observation the suite judges (SPEC.md "Reading a damaged
store"). The same run checks the adapter's names both ways (:mod:`.name_plan`)."""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import catalogue
from .drop_proxy import DropProxy
from .faults import FAULTS, TARGET, damage, fault_plan, serdes, session
from .lmcache_writer import (
    PlannedObject,
    ReadObject,
    expected_names,
    probe_store,
    write_stores,
)
from .name_plan import by_lmcache, by_lmckv
from .serving import Served, serving_plan
from .serving_run import damage_before, raw_bytes, serve
from .spec import l2_adapter_spec
from .views import StoreView, open_view

#: Bytes of the aesgcm master key file (any 32 bytes: only its use matters).
MASTER_KEY = bytes(range(32))
#: The session label of the objects lmckv wrote under the reference's names.
SERVED = "served"


@dataclass(frozen=True)
class AdapterRun:
    """One adapter's run: per serde, what its damaged store served; the names LMCache gave
    the objects of :func:`.name_plan.by_lmcache` (listed from the store, before any damage)
    beside the reference's; what LMCache served of the objects lmckv wrote under the
    reference's names (:func:`.name_plan.by_lmckv`, in the store without a serde)."""

    adapter: str
    stores: dict[str, StoreRun]
    names_expected: list[str]
    names_listed: list[str]
    served: list[ReadObject]
    #: Per serde, the serving script's run (:mod:`.serving`).
    serving: dict[str, Served]


@dataclass(frozen=True)
class StoreRun:
    """What one damaged store of ``adapter`` with ``serde`` served: per fault, the reads of
    its session (:func:`.faults.session`), and how many connections the proxy cut."""

    adapter: str
    serde: str
    sessions: dict[str, list[ReadObject]]
    drops: int


def run_adapter(adapter: str, *, python: str = sys.executable) -> AdapterRun:
    """Write, name-check, damage and read back one store of ``adapter`` per serde.
    :class:`.views.StoreUnavailable` when a store cannot be opened here,
    :class:`.lmcache_writer.StoreWriteError` when LMCache cannot write it."""
    plan, named, foreign = fault_plan(), by_lmcache(), by_lmckv()
    tasks = serving_plan()
    written = [*plan, *named, *tasks.written()]
    with (
        tempfile.TemporaryDirectory(prefix=f"lmckv-faults-{adapter}-") as tmp,
        contextlib.ExitStack() as servers,
    ):
        root = Path(tmp)
        master_key = root / "master.key"
        master_key.write_bytes(MASTER_KEY)
        views = {serde: open_view(adapter, root / serde, servers) for serde in serdes()}
        specs = {s: l2_adapter_spec(adapter, v.fields, s, master_key) for s, v in views.items()}
        # The name objects' names are what test_store_names judges: only the plan's must be there.
        required = [*plan, *tasks.written()]
        write_stores(list(specs.values()), written, python=python, required=required)
        raw = views[catalogue.NONE.name]
        ours = expected_names(adapter, required)
        listed = sorted(set(raw.sizes()) - set(ours))
        for obj, name in zip(foreign, expected_names(adapter, foreign), strict=True):
            raw.put(name, raw_bytes(obj))
        names = expected_names(adapter, plan)
        for serde, view in views.items():
            damage(view.source, names, serde, adapter)
            damage_before(view, adapter, serde, tasks)
        everything = [*plan, *named, *foreign]
        # Each serde's damaged reads and its serving script at once: the stores are apart, the
        # serving objects are not the fault plan's, and most of their time is LMCache's waits
        # (start-up, closes, the reads that never end waiting out their bound).
        with ThreadPoolExecutor(2 * len(views)) as pool:
            reading = {
                s: pool.submit(_read_damaged, adapter, s, v, everything, master_key, python)
                for s, v in views.items()
            }
            running = {
                s: pool.submit(serve, specs[s], views[s], tasks, s, python=python) for s in views
            }
            stores = {s: future.result() for s, future in reading.items()}
            serving = {s: future.result() for s, future in running.items()}
    served = stores[catalogue.NONE.name].sessions.pop(SERVED)
    return AdapterRun(adapter, stores, expected_names(adapter, named), listed, served, serving)


def _read_damaged(
    adapter: str,
    serde: str,
    view: StoreView,
    plan: list[PlannedObject],
    master_key: Path,
    python: str,
) -> StoreRun:
    """Each fault's session, and for the store without a serde the session of the objects
    lmckv named (:data:`SERVED`); the server stores through a proxy that cuts the
    ``dropped`` target's transfer."""
    faults = [f for f in FAULTS if f.applies(adapter)]
    sessions = [session(f) for f in faults]
    raw = serde == catalogue.NONE.name
    if raw:
        sessions.append(list(range(len(fault_plan()) + len(by_lmcache()), len(plan))))
    labels = [f.name for f in faults] + ([SERVED] if raw else [])
    server = view.row.server
    if server is None:
        spec = l2_adapter_spec(adapter, view.fields, serde, master_key)
        reads = probe_store(spec, plan, sessions, python=python)
        return StoreRun(adapter, serde, dict(zip(labels, reads, strict=True)), drops=0)
    target = expected_names(adapter, plan)[TARGET["dropped"]]
    cut_after = len(view.get(target)) // 2
    with DropProxy(server.port(view.fields), server.needle(target), cut_after) as proxy:
        spec = l2_adapter_spec(adapter, view.with_port(proxy.port), serde, master_key)
        reads = probe_store(spec, plan, sessions, python=python)
        return StoreRun(adapter, serde, dict(zip(labels, reads, strict=True)), proxy.drops)


def main(argv: list[str]) -> int:
    """``python -m lmckv.conformance.store.fault_run ADAPTER``: the run as JSON on stdout
    (for a look by hand)."""
    (adapter,) = argv
    run = run_adapter(adapter)
    doc = {
        "names_missing": sorted(set(run.names_expected) - set(run.names_listed)),
        "names_unexpected": sorted(set(run.names_listed) - set(run.names_expected)),
        "served": [r.outcome for r in run.served],
        "stores": {
            serde: {
                "drops": store.drops,
                "sessions": {f: [r.outcome for r in reads] for f, reads in store.sessions.items()},
            }
            for serde, store in run.stores.items()
        },
    }
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
