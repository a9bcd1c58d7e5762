"""The conformance pytest plugin: implementations, rules, known failures, results.

Options (see conformance/README.md): ``--impl`` (repeatable), ``--level``,
``--results-json``, ``--draft-expectations``. Every test carries a ``rule`` marker; the
plugin derives its level, applies the implementation's known failures as strict xfails,
collects every outcome (under pytest-xdist the controller receives all workers' reports,
so the results file is written once, merged), checks the producer x consumer pair count
and stale expectation lines, and prints the implementation x level table.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from conformance.core.rules import RULES, SHOULD
from conformance.drivers import Driver, DriverError
from conformance.runner import known_failures as exp
from conformance.runner.impl_specs import load_driver
from conformance.runner.results_file import OUTCOMES, utc_now, write_results
from conformance.runner.terminal_summary import write_summary
from conformance.suite.matrix import matrix_cases, matrix_checks, matrix_pairs

PLUGIN_NAME = "lmckv-conformance"
#: Driver kinds that are their own fixtures (a server or client, not a codec driver).
SOCKET_KINDS = ("server", "client")


def get_plugin(config: pytest.Config) -> ConformancePlugin:
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    assert isinstance(plugin, ConformancePlugin)
    return plugin


def _reason(report: pytest.TestReport) -> str | None:
    if report.passed:
        return None
    if hasattr(report, "wasxfail"):
        return str(report.wasxfail)
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):
        return str(longrepr[2])
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(longrepr)
    return text[:1000]


class ConformancePlugin:
    """Holds the drivers of this run and everything reported about them."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.started_utc = utc_now()
        self.is_worker = hasattr(config, "workerinput")
        specs = config.getoption("impl") or ["reference"]
        self.drivers: dict[str, Driver] = {}
        for spec in specs:
            try:
                driver = load_driver(spec)
            except DriverError as exc:
                raise pytest.UsageError(str(exc)) from exc
            if driver.name in self.drivers:
                raise pytest.UsageError(f"two --impl values are both named {driver.name!r}")
            self.drivers[driver.name] = driver
        self.expectations = {
            name: exp.load(name, d.info.version) for name, d in self.drivers.items()
        }
        self.records: dict[str, dict[str, Any]] = {}
        self.narrowed: list[str] = []

    # -- collection -----------------------------------------------------------------------

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        names = list(self.drivers)
        by_kind = {
            fixture: [n for n, d in self.drivers.items() if d.info.kind == fixture]
            for fixture in SOCKET_KINDS
        }
        codec = [n for n in names if self.drivers[n].info.kind not in SOCKET_KINDS]
        if "impl" in metafunc.fixturenames:
            metafunc.parametrize("impl", codec, indirect=True, ids=codec)
        for fixture, kind_names in by_kind.items():  # servers and clients: their own tests
            if fixture in metafunc.fixturenames:
                metafunc.parametrize(fixture, kind_names, indirect=True, ids=kind_names)
        if "pair" in metafunc.fixturenames:
            pairs = matrix_pairs(self.drivers)
            metafunc.parametrize(
                "pair", pairs, indirect=True, ids=[f"{p}-to-{c}" for p, c in pairs]
            )

    def _known_reason(self, short: str, impls: list[str]) -> str | None:
        for name in impls:
            reason = self.expectations[name].reason_for(short)
            if reason is not None:
                return reason
        return None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        level = config.getoption("level")
        keep, dropped = [], []
        for item in items:
            marker = item.get_closest_marker("rule")
            if marker is None or not marker.args:
                raise pytest.UsageError(f"{item.nodeid} has no rule marker")
            rule = RULES.get(marker.args[0])
            if rule is None:
                raise pytest.UsageError(f"{item.nodeid}: unknown rule {marker.args[0]!r}")
            if level and rule.level != level:
                dropped.append(item)
                continue
            params = getattr(item, "callspec", None)
            params = params.params if params is not None else {}
            producer = consumer = None
            if "pair" in params:
                if not isinstance(params["pair"], tuple):
                    dropped.append(item)  # no producer x consumer pair: nothing to run
                    continue
                producer, consumer = params["pair"]
            if any(f in params and params[f] not in self.drivers for f in ("impl", *SOCKET_KINDS)):
                dropped.append(item)  # no implementation of this kind: nothing to run
                continue
            impl = next((params[f] for f in ("impl", *SOCKET_KINDS) if f in params), consumer)
            item.user_properties += [
                ("rule", rule.id),
                ("level", rule.level),
                ("impl", impl),
                ("producer", producer),
            ]
            participants = [n for n in (impl, producer) if n is not None]
            reason = self._known_reason(exp.short_id(item.nodeid), participants)
            if reason is not None:
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
            keep.append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    # -- outcomes (controller) ------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        props = dict(report.user_properties)
        if "rule" not in props:
            return
        record = self.records.get(report.nodeid)
        if record is None:
            record = {
                "id": report.nodeid,
                "rule": props["rule"],
                "level": props["level"],
                "impl": props["impl"],
                "producer": props["producer"],
                "outcome": "pass",
                "reason": None,
            }
            self.records[report.nodeid] = record
        outcome = None
        if report.when == "call":
            if report.passed:
                outcome = "pass"
            elif report.skipped and hasattr(report, "wasxfail"):
                outcome = "known_failure"
            elif report.skipped:
                outcome = "skip"
            elif str(report.longrepr).startswith("[XPASS(strict)]"):
                outcome = "unexpected_pass"
            else:
                outcome = "fail"
        elif report.failed:
            outcome = "fail"
        elif report.skipped and report.when == "setup":
            outcome = "known_failure" if hasattr(report, "wasxfail") else "skip"
        if outcome is not None and record["outcome"] != "fail":
            record["outcome"] = outcome
            record["reason"] = _reason(report)

    def _selection_is_full(self) -> bool:
        opt = self.config.option
        reasons = []
        if getattr(opt, "keyword", ""):
            reasons.append("-k")
        if getattr(opt, "markexpr", ""):
            reasons.append("-m")
        if getattr(opt, "deselect", None):
            reasons.append("--deselect")
        if getattr(opt, "lf", False) or getattr(opt, "failedfirst", False):
            reasons.append("--lf/--ff")
        if getattr(opt, "maxfail", 0):
            reasons.append("-x/--maxfail")
        if self.config.getoption("level"):
            reasons.append("--level")
        if any("::" in str(a) or str(a).endswith(".py") for a in self.config.args):
            reasons.append("test file or node selection")
        self.narrowed = reasons
        return not reasons

    def _pair_check(self) -> tuple[list[dict[str, Any]], str | None]:
        rows: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for rec in self.records.values():
            if rec["producer"] is not None:
                rows[(rec["producer"], rec["impl"])][rec["outcome"]] += 1
        matrix = []
        for (producer, consumer), counts in sorted(rows.items()):
            matrix.append(
                {
                    "producer": producer,
                    "consumer": consumer,
                    "cases": sum(counts.values()),
                    "pass": counts["pass"],
                    "fail": counts["fail"] + counts["unexpected_pass"],
                    "known_failure": counts["known_failure"],
                }
            )
        expected = matrix_checks(self.drivers)
        ran = sum(
            1
            for rec in self.records.values()
            if rec["producer"] is not None and rec["outcome"] != "skip"
        )
        problem = None
        if ran != expected:
            problem = (
                f"producer x consumer matrix ran {ran} pair-case checks, expected {expected} "
                f"({len(matrix_pairs(self.drivers))} pairs x {len(matrix_cases())} cases, "
                "payload always, dequantized V where the consumer declares codec.dequant); "
                "a pair was skipped or lost"
            )
        return matrix, problem

    def _stale_expectations(self) -> list[str]:
        """Lines that name no test of this run although every implementation they name ran."""
        seen = [exp.short_id(nodeid) for nodeid in self.records]
        impls = list(self.drivers)
        stale = []
        for e in self.expectations.values():
            for line in e.reasons:
                if exp.participants(line, impls) is None:
                    continue  # it names an implementation this run did not load
                if not any(exp.matches(line, test_id) for test_id in seen):
                    stale.append(f"{e.path.name if e.path else e.impl}: {line}")
        return stale

    def _summary(self) -> list[dict[str, Any]]:
        """Per implementation and level; matrix checks involve two implementations and are
        counted in the matrix rows instead."""
        counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for rec in self.records.values():
            if rec["producer"] is None:
                counts[(rec["impl"], rec["level"])][rec["outcome"]] += 1
        rows = []
        for name in self.drivers:
            for level in ("MUST", SHOULD):
                c = counts[(name, level)]
                rows.append({"impl": name, "level": level, **{o: c[o] for o in OUTCOMES}})
        return rows

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker:
            return
        self.problems: list[str] = []
        full = self._selection_is_full() and bool(self.records)
        self.matrix, pair_problem = self._pair_check()
        if full:
            if pair_problem:
                self.problems.append(pair_problem)
            self.problems += [
                f"stale expectation (no such test ran): {s}" for s in self._stale_expectations()
            ]
        if self.problems and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        path = self.config.getoption("results_json")
        if path:
            self._write_results(Path(path))
        draft = self.config.getoption("draft_expectations")
        if draft:
            self._write_drafts(Path(draft))

    def _write_results(self, path: Path) -> None:
        write_results(
            path,
            started_utc=self.started_utc,
            wall_s=time.monotonic() - self.started,
            impls=[d.info for d in self.drivers.values()],
            tests=list(self.records.values()),
            summary=self._summary(),
            matrix=self.matrix,
        )

    def _write_drafts(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        by_impl: dict[str, list[str]] = defaultdict(list)
        for rec in sorted(self.records.values(), key=lambda r: r["id"]):
            if rec["outcome"] in ("fail", "known_failure"):
                reason = " ".join((rec["reason"] or "").split())[:300]
                owner = rec["producer"] if rec["producer"] not in (None, "reference") else None
                by_impl[owner or rec["impl"]].append(f"{exp.short_id(rec['id'])} {reason}")
        for name, lines in by_impl.items():
            (directory / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker or not self.records:
            return
        write_summary(
            terminalreporter,
            self._summary(),
            self.matrix,
            self.narrowed,
            getattr(self, "problems", []),
        )

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        for driver in self.drivers.values():
            driver.close()
