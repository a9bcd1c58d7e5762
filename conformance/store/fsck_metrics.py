"""``lmckv fsck --metrics FILE``: what a check found, as a Prometheus text file that
node_exporter's textfile collector reads (written with ``prometheus_client``'s
``write_to_textfile``: a temporary file beside FILE, renamed over it, so a collector never
reads half a file). Names and labels:

- ``lmckv_fsck_info{adapter, store, serde}`` 1: the store checked (its location without
  secrets) and the serde it was checked under;
- ``lmckv_fsck_entries{status}``: listed entries by their verdict (verified, size_checked,
  partial, problem, in_flight, gone, adapter, directory);
- ``lmckv_fsck_problems{rule}``: problems by STORE-* rule;
- ``lmckv_fsck_model_objects{model}``, ``lmckv_fsck_model_bytes{model}``,
  ``lmckv_fsck_model_problems{model}``: per model name (a store's text: the exposition escapes
  it);
- ``lmckv_fsck_checked_objects``, ``lmckv_fsck_bytes``: objects whose content or size was
  checked, bytes of every entry listed;
- ``lmckv_fsck_read_bytes``: bytes read from the store's objects (what ``--max-rate`` paces);
- ``lmckv_fsck_repairs{outcome}``: with ``--repair``, problems by how their repair ended
  (removed, quarantined, changed, gone, failed, left); ``lmckv_fsck_repaired{rule}``: objects
  removed or quarantined by rule; ``lmckv_fsck_uncorrected``: problems the store still holds;
- ``lmckv_fsck_incomplete``: 1 when the run stopped at ``--time-limit``;
- ``lmckv_fsck_duration_seconds``, ``lmckv_fsck_last_run_timestamp_seconds``: how long the
  check took and when it finished (Unix time).
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from .fsck import STATUSES, Report

PREFIX = "lmckv_fsck"


class MetricsPathError(OSError):
    """``--metrics FILE`` cannot be written (found before the check)."""


def check_writable(path: Path) -> None:
    """MetricsPathError when FILE's folder is missing or not writable, or FILE is a folder."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise MetricsPathError(f"--metrics {path}: a folder")
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise MetricsPathError(f"--metrics {path}: its folder {folder} cannot be written")


def write(report: Report, path: Path, duration_s: float, finished: float) -> None:
    """The run's metrics into ``path``, atomically (this module's docstring)."""
    from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

    registry = CollectorRegistry()
    head = report.header()
    store = head["store"]

    def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
        return Gauge(f"{PREFIX}_{name}", doc, labels, registry=registry)

    info = gauge("info", "The store checked and its serde.", ("adapter", "store", "serde"))
    info.labels(store["adapter"], store["location"], store["serde"]).set(1)
    entries = gauge("entries", "Listed entries by verdict.", ("status",))
    for status in STATUSES:
        entries.labels(status).set(head["counts"][status])
    problems = gauge("problems", "Problems by rule.", ("rule",))
    for rule, count in head["problems_by_rule"].items():
        problems.labels(rule).set(count)
    per_model: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for total in head["totals"]:
        model = per_model[total["model_name"]]
        for field in ("objects", "bytes", "problems"):
            model[field] += total[field]
    for field, doc in (
        ("objects", "Objects per model name."),
        ("bytes", "Bytes of objects per model name."),
        ("problems", "Problems per model name."),
    ):
        metric = gauge(f"model_{field}", doc, ("model",))
        for name, values in per_model.items():
            metric.labels(name).set(values[field])
    gauge("checked_objects", "Objects whose content or size was checked.").set(head["checked"])
    gauge("bytes", "Bytes of every listed entry.").set(head["bytes"])
    gauge("read_bytes", "Bytes read from the store's objects.").set(head["read_bytes"])
    if (repair := head["repair"]) is not None:
        repairs = gauge("repairs", "Problems by how their repair ended.", ("outcome",))
        for outcome, count in repair["outcomes"].items():
            repairs.labels(outcome).set(count)
        repaired = gauge("repaired", "Objects removed or quarantined, by rule.", ("rule",))
        for rule, count in repair["repaired_by_rule"].items():
            repaired.labels(rule).set(count)
        gauge("uncorrected", "Problems left in the store.").set(repair["uncorrected"])
    gauge("incomplete", "1 when the check stopped at its time limit.").set(
        1 if head["incomplete"] else 0
    )
    gauge("duration_seconds", "Seconds the check took.").set(duration_s)
    gauge("last_run_timestamp_seconds", "When the check finished (Unix time).").set(finished)
    write_to_textfile(str(path), registry)
