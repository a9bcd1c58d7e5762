"""The adapter x serde x fault matrix: what each L2 adapter of a release served from a damaged
store (the suite's ``test_store_load`` tests; SPEC.md "Reading a damaged store"), then the
serving cases (``test_store_serve``; SPEC.md "Serving from a store"): what whole tasks, a
long-lived process and tasks in flight together were served."""

from __future__ import annotations

import pandas as pd

from ..conformance.store import catalogue
from ..conformance.store.faults import FAULTS, adapters, can_know, serdes
from ..conformance.store.serving import cases
from .conformance_section import LABEL, SEVERITY, spec_link
from .html import OUTCOME_CLASS, Section, note, outcome_legend, paragraph, table
from .inputs import ReportInputs
from .output import Output

#: The tests the matrix is made of: the damaged store's reads, and the serving cases (a row
#: per case; its one judged read is the case's tasks).
TEST = "test_store_load.py::test_store_load["
SERVE_TEST = "test_store_load.py::test_store_serve["
TITLE = "L2 adapters × serde × fault"
FAULT_ORDER = {n: i for i, n in enumerate([*(f.name for f in FAULTS), *(c.id for c in cases())])}
BY_FAULT = {f.name: f for f in FAULTS}


def adapter_cells(tests: pd.DataFrame) -> pd.DataFrame:
    """One row per implementation, adapter, serde, fault and judged read (target or
    neighbours) of the store-load tests, with its rule, outcome and observation."""
    rows = []
    for _, t in tests.iterrows():
        test_id, impl = str(t["id"]), str(t["impl"])
        if TEST in test_id:
            params = test_id.split(TEST, 1)[1].rstrip("]")
            adapter, serde, rest = params.removeprefix(f"{impl}-").split("-", 2)
            fault, judged = rest.rsplit("-", 1)
        elif SERVE_TEST in test_id:
            params = test_id.split(SERVE_TEST, 1)[1].rstrip("]")
            adapter, serde, fault = params.removeprefix(f"{impl}-").split("-", 2)
            judged = "target"
        else:
            continue
        observed = t.get("observed")
        rows.append(
            {
                "impl": impl, "adapter": adapter, "serde": serde, "fault": fault,
                "judged": judged, "rule": t["rule"], "outcome": t["outcome"],
                "observed": observed if isinstance(observed, str) else "",
            }
        )  # fmt: skip
    columns = ["impl", "adapter", "serde", "fault", "judged", "rule", "outcome", "observed"]
    return pd.DataFrame(rows, columns=columns)


def _in_order(seen: pd.Series, known: list[str]) -> list[str]:
    """``known`` (the catalogue's order), then the names of ``seen`` it lacks (a results file
    of a run whose catalogue had more rows)."""
    return known + sorted({str(v) for v in seen} - set(known))


def _worst(outcomes: list[str]) -> str:
    return min(outcomes, key=lambda o: SEVERITY.index(o) if o in SEVERITY else len(SEVERITY))


def _cell(group: pd.DataFrame, fault: str, serde: str) -> tuple[str, str]:
    """A matrix cell: what the damaged object's read gave (marked when the serde cannot tell
    the damage), the intact objects' reads when they were not plain hits, and the worst
    outcome of its tests."""
    target = group[group["judged"] == "target"]
    near = group[group["judged"] == "neighbours"]
    seen = target["observed"].iloc[0] if not target.empty else "—"
    text = f"{seen or '—'}"
    known = fault in BY_FAULT and serde in catalogue.SERDES
    if seen == "wrong-bytes" and known and not can_know(BY_FAULT[fault], serde):
        text += " (undetectable here)"
    worst = _worst(list(group["outcome"]))
    if worst != "pass":
        text += f" ({LABEL[worst]})"
    if not near.empty and near["observed"].iloc[0] not in ("", "exact, exact, exact"):
        text += f"; intact: {near['observed'].iloc[0]}"
    return text, OUTCOME_CLASS.get(worst, "")


def adapter_section(inputs: ReportInputs, out: Output, spec_href: str) -> Section | None:
    """The matrix, or None when the conformance results hold no store-load tests."""
    if not inputs.conformance:
        return None
    cells = adapter_cells(inputs.conformance_table("tests"))
    if cells.empty:
        return None
    out.csv(cells, "adapter_matrix.csv")
    ran = cells.groupby("impl")["outcome"].apply(lambda o: bool((o != "skip").any()))
    skipped = sorted(str(i) for i, any_run in ran.items() if not any_run)
    cells = cells[cells["impl"].isin([i for i, any_run in ran.items() if any_run])]
    adapter_order = _in_order(cells["adapter"], adapters())
    columns = _in_order(cells["serde"], serdes())
    order = cells.assign(
        a=cells["adapter"].map({a: i for i, a in enumerate(adapter_order)}),
        f=cells["fault"].map(FAULT_ORDER).fillna(len(FAULT_ORDER)),
    ).sort_values(["impl", "a", "f"], kind="stable")
    impls = inputs.conformance_table("impls")
    version = {str(n): str(v) for n, v in zip(impls["name"], impls["version"], strict=True) if v}
    shown_rows: list[dict[str, str]] = []
    classes: dict[str, list[str]] = {s: [] for s in columns}
    for (impl, adapter, fault), group in order.groupby(["impl", "adapter", "fault"], sort=False):
        target_rule = group[group["judged"] == "target"]["rule"]
        rule = str(target_rule.iloc[0]) if not target_rule.empty else ""
        row = {
            "implementation": f"{impl} {version.get(str(impl), '')}".strip(),
            "adapter": str(adapter), "fault": str(fault),
            "rule": spec_link(spec_href, "#" + rule.lower()) if rule else "—",
        }  # fmt: skip
        for serde in columns:
            part = group[group["serde"] == serde]
            text, css = _cell(part, str(fault), serde) if not part.empty else ("not run", "o-skip")
            row[serde] = text
            classes[serde].append(css)
        shown_rows.append(row)
    frame = pd.DataFrame(shown_rows)
    body = (
        paragraph(
            "Each cell: what LMCache served when the fault's object was read back through the "
            "adapter with the serde (exact, wrong-bytes, miss, timeout, error), then the intact "
            "objects read before and after it when they were not all exact hits. A raw or fp8 "
            "store cannot see a changed byte or another key's object (its cells pass while "
            "serving them); aesgcm sees a changed byte. The rows after the faults are the "
            "serving cases (task-, after-, later-, mixed, together, race, crash-): per task, each "
            "key group's chunks as E (exact hit), W (hit with other bytes) or - (miss), groups "
            "split by /; a crash-k row: the kinds of reads of a burst whose writer was killed "
            "once k objects were stored, what the store held under the objects' names, and the "
            "unfinished writes with fsck's rule for them. "
            "Colour: the worst outcome of the cell's tests."
        )
        + outcome_legend()
        + table(
            frame,
            cell_class={s: pd.Series(classes[s]) for s in columns},
            raw_columns=frozenset({"rule"}),
        )
    )
    if skipped:
        body += note(f"not run for {', '.join(skipped)}: no L2 adapters to drive (skipped)")
    if frame.empty:
        body = note("no store-load tests ran")
    return Section("adapters", TITLE, body)
