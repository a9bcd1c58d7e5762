"""The conformance pytest plugin: implementations, rules, known failures, results.

Options (see conformance/README.md): ``--impl`` (repeatable), ``--level``, ``--known-failures``,
``--results-json``, ``--summary-md``, ``--draft-expectations``, ``--testee-timeout``,
``--testee-max-failures``, ``--transcript``. Every test carries a ``rule`` marker; the plugin
derives its level, applies the implementation's known failures as strict xfails, starts every
failure message with the rule's id and SPEC.md anchor, ends at once the tests of an exec testee
that stopped answering, collects every outcome (under pytest-xdist the controller receives all
workers' reports, so the results file is written once, merged), checks the producer x consumer
pair count and stale expectation lines, and prints the implementation x level table and the
failures grouped by rule.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from ..core import observations
from ..core.rules import RULES, SHOULD
from ..drivers import Driver, DriverError
from ..drivers.exec_driver import ExecSettings, Transcript
from ..suite.matrix import matrix_cases, matrix_checks, matrix_pairs
from . import known_failures as exp
from .impl_specs import load_driver
from .known_failures import display_path
from .markdown_summary import write_markdown
from .options import COMMAND, in_command, testee_timeout
from .results_file import OUTCOMES, utc_now, write_results
from .rule_groups import RuleGroup, group_failures, rule_tag, spec_link
from .terminal_summary import write_summary

PLUGIN_NAME = "lmckv-conformance"
#: workerinput key: the controller's invocation directory, for resolving exec testees.
INVOCATION_DIR = "lmckv_invocation_dir"
#: The implementations a test runs (its impl, and a matrix test's producer).
PARTICIPANTS = pytest.StashKey[list[str]]()
#: Why a test was not run: an implementation's testee stopped answering.
STOPPED = pytest.StashKey[str]()
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


def _observe(exc: BaseException) -> str:
    """What a failing test observed: the verdict's record when a verdict failed it, else
    its message (conformance/core/observations.py)."""
    recorded = observations.take()
    if isinstance(exc, pytest.fail.Exception):
        return recorded or observations.from_message(str(exc.msg))
    return observations.from_message(f"{type(exc).__name__}: {exc}")


def usage_error(config: pytest.Config, message: str) -> pytest.UsageError:
    """The error that ends the run before any test: one line, ``lmckv conformance: ...``
    under that command (printed here, the exception then carries nothing to print), else
    pytest's ``ERROR: ...``."""
    if in_command(config):
        print(f"{COMMAND}: {message}", file=sys.stderr, flush=True)
        return pytest.UsageError()
    return pytest.UsageError(message)


#: The suite's test files: the folder of the installed ``lmckv.conformance.suite`` package.
SUITE_DIR = Path(__file__).resolve().parent.parent / "suite"
SUITE_PACKAGE = __name__.rpartition(".runner.")[0] + ".suite"


class _SuiteModule(pytest.Module):
    """A suite test file, imported as ``SUITE_PACKAGE.<stem>`` (see
    ``pytest_pycollect_makemodule``); assertion rewriting applies as to any test file."""

    def _getobj(self) -> Any:
        return importlib.import_module(f"{SUITE_PACKAGE}.{self.path.stem}")


class ConformancePlugin:
    """Holds the drivers of this run and everything reported about them."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.started_utc = utc_now()
        self.is_worker = hasattr(config, "workerinput")
        self.drivers: dict[str, Driver] = {}
        self.verdicts = exp.Verdicts({})
        self.records: dict[str, dict[str, Any]] = {}
        #: node id -> why it was not run (its testee had stopped answering)
        self.not_run: dict[str, str] = {}
        self.narrowed: list[str] = []
        self.problems: list[str] = []
        self.matrix: list[dict[str, Any]] = []
        #: node id -> the golden vector set a codec read test reads (v1, v2).
        self.vector_sets: dict[str, str] = {}
        #: (list, listed test ids) whose observation --update-expectations rewrote
        self.updated: list[tuple[str, list[str]]] = []
        self.settings = self._exec_settings()
        if config.getoption("help", False):
            return  # pytest --help: nothing to load
        try:
            self._load_drivers(config.getoption("impl") or ["reference"])
        except BaseException:
            self.close()
            raise

    def _exec_settings(self) -> ExecSettings:
        config = self.config
        if self.is_worker:
            workerinput: dict[str, Any] = getattr(config, "workerinput", {})
            cwd = Path(workerinput.get(INVOCATION_DIR, config.invocation_params.dir))
        else:
            cwd = Path(config.invocation_params.dir)
        try:
            timeout = testee_timeout(config)
        except pytest.UsageError as exc:
            raise usage_error(config, str(exc)) from None
        max_failures = config.getoption("testee_max_failures")
        if max_failures < 0:
            raise usage_error(config, f"--testee-max-failures: must be >= 0, got {max_failures}")
        transcript = None
        path = config.getoption("transcript")
        if path and not config.getoption("help", False):
            worker = getattr(config, "workerinput", {}).get("workerid")
            transcript = Transcript(cwd / path, truncate=not self.is_worker, worker=worker)
        return ExecSettings(cwd, timeout, max_failures, transcript)

    def _load_drivers(self, specs: list[str]) -> None:
        for spec in specs:
            try:
                driver = load_driver(spec, self.settings)
            except DriverError as exc:
                raise usage_error(self.config, str(exc)) from None
            if driver.name in self.drivers:
                driver.close()
                raise usage_error(self.config, f"two --impl values are both named {driver.name!r}")
            self.drivers[driver.name] = driver
        given = self._given_lists()
        try:
            lists = {
                name: exp.load(name, d.info.version, given.get(name))
                for name, d in self.drivers.items()
            }
        except exp.KnownFailuresError as exc:
            raise usage_error(self.config, f"known-failure list {exc}") from None
        self.verdicts = exp.Verdicts(lists, bool(self.config.getoption("update_expectations")))

    def _given_lists(self) -> dict[str, Path]:
        """``--known-failures [IMPL=]FILE`` values: implementation name -> list file."""
        given: dict[str, Path] = {}
        for value in self.config.getoption("known_failures") or []:
            name, sep, path = value.partition("=")
            name, path = (name, path) if sep else ("upstream", value)
            if name not in self.drivers:
                raise usage_error(
                    self.config, f"--known-failures {value}: no --impl is named {name!r}"
                )
            given[name] = self.settings.cwd / path
        return given

    def known_failures_path(self, name: str) -> str | None:
        """The known-failure list used for implementation ``name`` (None: it has none)."""
        kf = self.verdicts.lists.get(name)
        return display_path(kf.path) if kf is not None else None

    def known_failures_source(self, name: str) -> str | None:
        """:meth:`known_failures_path` and, when it is not the implementation's own list,
        why the run uses it: ``conformance/known_failures/upstream-0.5.7rc2.txt (newest
        release; 0.1.dev1+g1234567 is a development version without an earlier list)``."""
        path = self.known_failures_path(name)
        kf = self.verdicts.lists.get(name)
        choice = kf.choice if kf is not None else None
        return path if path is None or choice is None else f"{path} ({choice})"

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """pytest-xdist: workers resolve exec testees from the controller's directory."""
        node.workerinput[INVOCATION_DIR] = str(self.settings.cwd)

    def pytest_pycollect_makemodule(
        self, module_path: Path, parent: pytest.Collector
    ) -> pytest.Module | None:
        """A test file of the suite is imported under its installed name
        (``lmckv.conformance.suite.test_codec_read``). pytest would name it after the folders
        that hold an ``__init__.py`` (``conformance.suite.test_codec_read`` in a checkout, whose
        folders install under ``lmckv``), a second copy of the package beside the one the
        plugin and the drivers run in, and one its relative imports cannot leave."""
        if module_path.parent.resolve() != SUITE_DIR:
            return None
        return _SuiteModule.from_parent(parent, path=module_path)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return [
            f"known failures of {name}: {self.known_failures_source(name) or 'none'}"
            for name in self.drivers
        ]

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
            vector_set = item.get_closest_marker("vector_set")
            item.user_properties += [
                ("rule", rule.id),
                ("level", rule.level),
                ("impl", impl),
                ("producer", producer),
                ("vector_set", vector_set.args[0] if vector_set is not None else None),
            ]
            participants = [n for n in (impl, producer) if n is not None]
            item.stash[PARTICIPANTS] = participants
            reason = self.verdicts.reason(exp.short_id(item.nodeid), participants)
            if reason is not None:
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
            keep.append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    # -- running (workers, or the only process) -------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Name the test in the transcript; end it at once when a testee it needs has
        stopped answering."""
        if self.settings.transcript is not None:
            self.settings.transcript.test = item.nodeid
        observations.take()  # nothing a previous test recorded
        for name in item.stash.get(PARTICIPANTS, []):
            stopped = getattr(self.drivers.get(name), "stopped", None)
            if stopped:
                item.stash[STOPPED] = stopped
                pytest.fail(stopped, pytrace=False)

    def pytest_runtest_logfinish(self) -> None:
        if self.settings.transcript is not None:
            self.settings.transcript.test = None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Every failure starts with ``[RULE-ID SPEC.md#anchor]``; a strict unexpected pass
        says which line of which list to delete; a test a stopped testee could not run is a
        failure even when it is a listed known failure."""
        report = yield
        if STOPPED in item.stash and report.when == "setup":
            report.outcome = "failed"
            if hasattr(report, "wasxfail"):
                del report.wasxfail
            report.user_properties.append(("not_run", item.stash[STOPPED]))
        elif call.excinfo is not None and (report.failed or hasattr(report, "wasxfail")):
            now = _observe(call.excinfo.value)
            report.user_properties.append(("observed", now))
            changed = (
                self.verdicts.on_failure(
                    exp.short_id(item.nodeid), item.stash.get(PARTICIPANTS, []), now
                )
                if hasattr(report, "wasxfail")
                else None
            )
            if changed is not None:
                report.outcome = "failed"
                del report.wasxfail
                report.longrepr = changed
        if not report.failed:
            return report
        rule = dict(item.user_properties).get("rule")
        if not isinstance(rule, str):
            return report
        tag = rule_tag(rule)
        longrepr = report.longrepr
        if isinstance(longrepr, str) and longrepr.startswith("[XPASS(strict)]"):
            short = exp.short_id(item.nodeid)
            message = self.verdicts.on_pass(short, item.stash.get(PARTICIPANTS, []))
            report.longrepr = f"{tag} {message}"
        elif isinstance(longrepr, str):
            report.longrepr = f"{tag} {longrepr}"
        else:
            crash = getattr(longrepr, "reprcrash", None)
            if crash is not None and hasattr(crash, "message"):
                crash.message = f"{tag} {crash.message}"
            known = RULES.get(rule)
            if known is not None and STOPPED not in item.stash:
                report.sections.append(
                    (f"rule {rule} ({known.level})", f"{spec_link(rule)}: {known.summary}")
                )
        return report

    # -- outcomes (controller) ------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        props = dict(report.user_properties)
        nodeid = exp.without_group(report.nodeid)
        if "rule" not in props:
            return
        if "not_run" in props:
            self.not_run[nodeid] = str(props["not_run"])
        if props.get("vector_set") is not None:
            self.vector_sets[nodeid] = str(props["vector_set"])
        record = self.records.get(nodeid)
        if record is None:
            record = {
                "id": nodeid,
                "rule": props["rule"],
                "level": props["level"],
                "impl": props["impl"],
                "producer": props["producer"],
                "outcome": "pass",
                "reason": None,
                "observed": None,
            }
            self.records[nodeid] = record
        outcome = exp.Verdicts.outcome(
            report.when, report.outcome, hasattr(report, "wasxfail"), str(report.longrepr)
        )
        if outcome is not None and record["outcome"] != "fail":
            record["outcome"] = outcome
            reason = _reason(report)
            tag = rule_tag(str(props["rule"])) + " "
            record["reason"] = reason.removeprefix(tag) if reason is not None else None
            observed = props.get("observed")
            record["observed"] = str(observed) if observed is not None else None

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

    def _versions(self) -> list[dict[str, Any]]:
        """The compatibility matrix: each reader x each golden vector set, the checks run
        (skips left out) and their outcomes; ``reads`` says whether the reader declares
        codec.v2 (``v1, v2``) or is a v1 reader (``v1``)."""
        rows: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for node, vector_set in self.vector_sets.items():
            rec = self.records.get(node)
            if rec is not None and rec["outcome"] != "skip":
                rows[(rec["impl"], vector_set)][rec["outcome"]] += 1
        return [
            {
                "reader": reader,
                "reads": "v1, v2" if self.drivers[reader].supports("codec.v2") else "v1",
                "vectors": vector_set,
                "cases": sum(counts.values()),
                "pass": counts["pass"],
                "fail": counts["fail"] + counts["unexpected_pass"],
                "known_failure": counts["known_failure"],
            }
            for (reader, vector_set), counts in sorted(rows.items())
            if reader in self.drivers
        ]

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
        self.problems = []
        full = self._selection_is_full() and bool(self.records)
        self.matrix, pair_problem = self._pair_check()
        if full:
            if pair_problem and not self.not_run:  # tests not run skip no capability
                self.problems.append(pair_problem)
            self.problems += [
                f"stale expectation (no such test ran): {s}"
                for s in self.verdicts.stale(map(exp.short_id, self.records), list(self.drivers))
            ]
        self.problems += self._stopped_testees()
        if self.verdicts.updating:
            rewritten = self.verdicts.rewrite(
                (
                    exp.short_id(rec["id"]),
                    [n for n in (rec["impl"], rec["producer"]) if n is not None],
                    rec["observed"],
                )
                for rec in self.records.values()
                if rec["outcome"] == "known_failure" and rec.get("observed") is not None
            )
            self.updated = rewritten.lists
            self.problems += rewritten.problems
        if self.problems and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        path = self.config.getoption("results_json")
        if path:
            self._write_results(Path(path))
        path = self.config.getoption("summary_md")
        if path:
            self._write_markdown(Path(path), session)
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
            versions=self._versions(),
            known_failures={name: self.known_failures_path(name) for name in self.drivers},
            known_failures_choice={name: kf.choice for name, kf in self.verdicts.lists.items()},
        )

    def _write_markdown(self, path: Path, session: pytest.Session) -> None:
        write_markdown(
            path,
            impls=[d.info for d in self.drivers.values()],
            known_failures={name: self.known_failures_source(name) for name in self.drivers},
            summary=self._summary(),
            matrix=self.matrix,
            groups=self._groups(),
            problems=self.problems,
            narrowed=self.narrowed,
            exit_status=int(session.exitstatus),
            wall_s=time.monotonic() - self.started,
        )

    def _stopped_testees(self) -> list[str]:
        """One line per testee that stopped answering, with the number of tests it left
        unrun (under xdist each worker's testee stops on its own)."""
        counts = Counter(
            why.partition("; remaining tests not run")[0] for why in self.not_run.values()
        )
        return [f"{what}; {n} tests not run" for what, n in sorted(counts.items())]

    def _groups(self) -> list[RuleGroup]:
        """Unexpected outcomes by rule, leaving out the tests that were not run."""
        return group_failures(r for r in self.records.values() if r["id"] not in self.not_run)

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
            self.problems,
            known_failures={name: self.known_failures_source(name) for name in self.drivers},
            groups=self._groups(),
            outputs=[
                (what, self.config.getoption(option))
                for what, option in (
                    ("results", "results_json"),
                    ("Markdown summary", "summary_md"),
                    ("transcript", "transcript"),
                )
                if self.config.getoption(option)
            ],
        )
        for where, changed in self.updated:
            terminalreporter.write_line(
                f"--update-expectations: rewrote the observation of {len(changed)} lines of {where}"
            )

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.close()

    def close(self) -> None:
        """Stop every testee and close the transcript."""
        for driver in self.drivers.values():
            driver.close()
        if self.settings.transcript is not None:
            self.settings.transcript.close()
