"""Known-failure lists: conformance/known_failures/<impl>.txt, one test id per line.

A line is ``<test id> <reason> [observed: <observation>]``: the test id is the pytest node
id without its directory (``test_codec_read.py::test_parse[upstream-kv-crc-zero]``), the
reason is free text and mandatory, the observation (conformance/core/observations.py) says
how the test failed when the line was written: ``raw:builtins.ValueError: <stable key of
the message>``, ``accepted``, ``fields: a, b`` or ``failed: <key>``. ``#`` starts a comment
line. A listed test that passes fails the run, and so does a listed test that no longer
exists: the lists can only shrink. A listed test that fails with another observation fails
the run as "failure changed" (a line may list several observations, separated by ``‖``,
where timing decides which way the test fails); ``--update-expectations`` rewrites the
observations of the listed tests that still fail (it never adds or removes a line).

A ``*`` in a test id matches any text: ``test_matrix_payload[upstream-to-*-enc-...]`` lists
a producer's failure whatever implementation consumes its output.

Upstream has one list per LMCache release, ``upstream-<version>.txt``; a release without its
own list uses the nearest earlier release's (:func:`upstream_list_path`), so a new release
starts from its predecessor's expectations, and a checkout without tags (setuptools-scm's
``0.1.dev1+g<commit>``, earlier than every release) uses the newest release's. A list given
on the command line (``--known-failures [IMPL=]FILE``) replaces the chosen one.
:attr:`KnownFailures.source` says which file a run used and why.

:class:`Verdicts` owns every decision these lists make about a run: the strict xfail reason
a listed test is collected with, the outcome of a report (pass, fail, skip, known failure,
unexpected pass), the message of a listed test that passes or fails otherwise than its line
records, the stale lines, and what ``--update-expectations`` rewrites. The pytest plugin
(conformance/runner/plugin.py) only hands it test ids and reports.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.version import InvalidVersion, Version

from lmckv.base.resources import package_path

from ..core.observations import (
    OBSERVED_CLOSE,
    OBSERVED_OPEN,
    join_reason,
    recorded,
    split_reason,
)
from . import differences

#: Set LMCKV_KNOWN_FAILURES_DIR to read the lists from another directory (self-tests do).
KNOWN_FAILURES_DIR = Path(
    os.environ.get("LMCKV_KNOWN_FAILURES_DIR")
    or package_path("lmckv.conformance", "known_failures")
)
UPSTREAM_PREFIX = "upstream-"
#: The message of a listed test that passes starts with this.
UNEXPECTED_PASS = "unexpected pass: "
#: The message of a listed test that fails otherwise than its line records starts with this.
FAILURE_CHANGED = "failure changed: "
#: What became of one test (the results file's ``outcome``, conformance/SCHEMAS.md).
Outcome = Literal["pass", "fail", "skip", "known_failure", "unexpected_pass"]


class KnownFailuresError(ValueError):
    """An expectations file is malformed."""


@dataclass(frozen=True)
class KnownFailures:
    """The known failures of one implementation."""

    impl: str
    path: Path | None
    reasons: dict[str, str]
    #: test id (as listed) -> its line number in the file
    numbers: dict[str, int] = field(default_factory=dict)

    def line_for(self, test_id: str) -> tuple[int, str] | None:
        """(line number, listed test id) of the line naming ``test_id``."""
        listed = test_id if test_id in self.reasons else None
        listed = listed or next((line for line in self.reasons if matches(line, test_id)), None)
        return None if listed is None else (self.numbers.get(listed, 0), listed)

    #: Why the run uses this list when it is not the implementation's own (another
    #: release's, or one given on the command line), else None.
    choice: str | None = None
    #: test id (as listed) -> the observation its line records
    observations: dict[str, str] = field(default_factory=dict)

    def observation_for(self, listed: str) -> str | None:
        """The observation the line of ``listed`` (a test id as listed) records."""
        return self.observations.get(listed)

    @property
    def source(self) -> str:
        """Which list the run used, for people: ``upstream-0.5.6.txt``, ``upstream-0.5.6.txt
        (nearest earlier release; no upstream-0.5.7rc2.txt)`` or ``none``."""
        if self.path is None:
            return "none"
        return self.path.name if self.choice is None else f"{self.path.name} ({self.choice})"

    def reason_for(self, test_id: str) -> str | None:
        """The reason of the line naming ``test_id`` (exactly, or through a ``*``)."""
        if test_id in self.reasons:
            return self.reasons[test_id]
        return next((r for line, r in self.reasons.items() if matches(line, test_id)), None)


def matches(line: str, test_id: str) -> bool:
    """``line`` names ``test_id``: equal, or equal with each ``*`` standing for any text."""
    if "*" not in line:
        return line == test_id
    return re.fullmatch(".*".join(map(re.escape, line.split("*"))), test_id) is not None


def participants(line: str, impls: list[str]) -> set[str] | None:
    """The implementations a line's test id names (``[impl-...]`` or ``[p-to-c-...]``, where
    ``*`` names none), or None when it names one that is not among ``impls``."""
    param = line.partition("[")[2]
    if "::test_matrix_" not in line:
        return next(({n} for n in impls if param.startswith(f"{n}-")), None)
    for producer in impls:
        for consumer in [*impls, "*"]:
            if param.startswith(f"{producer}-to-{consumer}-"):
                return {producer} | ({consumer} - {"*"})
    return None


def without_group(nodeid: str) -> str:
    """The node id without the ``@<group>`` that pytest-xdist's ``--dist loadgroup`` appends to
    a test of an ``xdist_group`` (after its parameters' closing bracket)."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") else nodeid


def short_id(nodeid: str) -> str:
    """``conformance/suite/test_x.py::test_y[p]`` (and any ``@group``) ->
    ``test_x.py::test_y[p]``."""
    path, sep, rest = without_group(nodeid).partition("::")
    return path.rsplit("/", 1)[-1] + sep + rest


def list_path(impl: str, version: str | None) -> Path:
    """upstream -> upstream-<version>.txt; anything else -> <impl>.txt (which may not exist)."""
    if impl == "upstream" and version:
        return KNOWN_FAILURES_DIR / f"{UPSTREAM_PREFIX}{version}.txt"
    return KNOWN_FAILURES_DIR / f"{impl}.txt"


def upstream_versions(directory: Path | None = None) -> dict[Version, Path]:
    """The releases that have a list of their own, ordered, with the list's path."""
    found: dict[Version, Path] = {}
    for path in (directory or KNOWN_FAILURES_DIR).glob(f"{UPSTREAM_PREFIX}*.txt"):
        try:
            found[Version(path.stem.removeprefix(UPSTREAM_PREFIX))] = path
        except InvalidVersion:
            continue
    return dict(sorted(found.items()))


def upstream_list_path(version: str, directory: Path | None = None) -> Path | None:
    """The list of LMCache ``version``: its own ``upstream-<version>.txt``, else the nearest
    earlier release's (ordered by ``packaging.version``: 0.5.6 < 0.5.7rc2 < 0.5.7), else,
    for a development version earlier than every list (a checkout without tags), the newest
    release's, else None (a release older than every list, or not a version)."""
    own = (directory or KNOWN_FAILURES_DIR) / f"{UPSTREAM_PREFIX}{version}.txt"
    if own.is_file():
        return own
    try:
        wanted = Version(version)
    except InvalidVersion:
        return None
    lists = upstream_versions(directory)
    earlier = [p for v, p in lists.items() if v < wanted]
    if earlier:
        return earlier[-1]
    if wanted.is_devrelease and lists:
        return list(lists.values())[-1]
    return None


def _choice(version: str, path: Path) -> str:
    """Why ``path`` is the list of LMCache ``version`` although it is not its own."""
    own = f"{UPSTREAM_PREFIX}{version}.txt"
    if Version(path.stem.removeprefix(UPSTREAM_PREFIX)) < Version(version):
        return f"nearest earlier release; no {own}"
    return f"newest release; {version} is a development version without an earlier list"


def load(impl: str, version: str | None, given: Path | None = None) -> KnownFailures:
    """The implementation's list (for upstream, see :func:`upstream_list_path`), or the
    list ``given`` on the command line, or an empty one when it has none."""
    path: Path | None = list_path(impl, version)
    choice = None
    if given is not None:
        if not given.is_file():
            raise KnownFailuresError(f"{given}: no such file (given with --known-failures)")
        path, choice = given, "given with --known-failures"
    elif impl == "upstream" and version:
        path = upstream_list_path(version)
        if path is not None and path != list_path(impl, version):
            choice = _choice(version, path)
    if path is None or not path.is_file():
        return KnownFailures(impl, None, {})
    reasons: dict[str, str] = {}
    numbers: dict[str, int] = {}
    observations: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        test_id, _, rest = line.partition(" ")
        reason, observed = split_reason(rest)
        if not reason:
            raise KnownFailuresError(f"{path.name}:{number}: {test_id} has no reason")
        if test_id in reasons:
            raise KnownFailuresError(f"{path.name}:{number}: {test_id} is listed twice")
        reasons[test_id] = reason
        numbers[test_id] = number
        if observed is not None:
            observations[test_id] = observed
    return KnownFailures(impl, path, reasons, numbers, choice, observations)


def rewrite_observations(kf: KnownFailures, observed: dict[str, str]) -> list[str]:
    """Write ``observed`` (listed test id -> observation) into the lines of ``kf``'s file,
    leaving every other line, comment and the order as they are; returns the listed ids
    whose observation changed. Only lines already in the file are touched."""
    if kf.path is None:
        return []
    lines = kf.path.read_text(encoding="utf-8").splitlines()
    changed = []
    for listed, now in sorted(observed.items()):
        number = kf.numbers.get(listed)
        if number is None or kf.observations.get(listed) == now:
            continue
        lines[number - 1] = f"{listed} {join_reason(kf.reasons[listed], now)}"
        changed.append(listed)
    if changed:
        kf.path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return changed


def display_path(path: Path | None) -> str | None:
    """A known-failure list as the results and messages name it: relative to the directory
    holding the ``conformance`` package when it lies there, else absolute."""
    if path is None:
        return None
    try:
        return path.resolve().relative_to(package_path("lmckv.conformance").parent).as_posix()
    except ValueError:
        return str(path.resolve())


@dataclass(frozen=True)
class Listed:
    """The line of a known-failure list that names a test."""

    known: KnownFailures
    number: int
    #: the test id as the line spells it (it may hold a ``*``)
    test_id: str

    @property
    def where(self) -> str:
        return f"line {self.number} of {display_path(self.known.path)}"


@dataclass(frozen=True)
class Rewritten:
    """What ``--update-expectations`` did: the lists rewritten (as :func:`display_path`
    names them, with the listed ids whose observation changed) and the lines it left as they
    are because their tests disagree."""

    lists: list[tuple[str, list[str]]]
    problems: list[str]


@dataclass(frozen=True)
class Verdicts:
    """The known-failure verdicts of one run, over the lists of the implementations it
    loaded (name -> list). A test is named by its short id (:func:`short_id`) and the
    implementations it runs, consumer first (a matrix test's producer second): the first of
    them whose list names the test owns the verdict."""

    lists: dict[str, KnownFailures]
    #: --update-expectations: a changed failure is rewritten, not reported
    updating: bool = False

    def listed(self, test_id: str, impls: list[str]) -> Listed | None:
        """The line naming the test, in the list of the first of ``impls`` that has one."""
        for name in impls:
            kf = self.lists.get(name)
            found = kf.line_for(test_id) if kf is not None else None
            if kf is not None and found is not None:
                return Listed(kf, found[0], found[1])
        return None

    def reason(self, test_id: str, impls: list[str]) -> str | None:
        """The reason a listed test is collected as a strict xfail with (None: not listed)."""
        line = self.listed(test_id, impls)
        return None if line is None else line.known.reasons[line.test_id]

    def on_pass(self, test_id: str, impls: list[str]) -> str:
        """The failure message of a listed test that passed: which line to delete, or which
        pattern to narrow."""
        line = self.listed(test_id, impls)
        if line is None:
            return f"{UNEXPECTED_PASS}a known-failure line names this passing test: {test_id}"
        where = line.where
        entry = differences.entry_for(line.known.reason_for(test_id))
        if entry is not None:  # the fixed finding's description goes too, or changes
            where += f" (described in {entry}: update or remove that entry)"
        if line.test_id == test_id:
            return f"{UNEXPECTED_PASS}delete {where}: {line.test_id}"
        return (
            f"{UNEXPECTED_PASS}{where} ({line.test_id}) names this passing test: narrow "
            f"the pattern or delete the line: {test_id}"
        )

    def on_failure(self, test_id: str, impls: list[str], observed: str) -> str | None:
        """The failure message of a listed test that failed with ``observed`` while its line
        records another observation (None: as recorded, none recorded, not listed, or
        updating)."""
        line = self.listed(test_id, impls)
        if line is None or self.updating:
            return None
        was = line.known.observation_for(line.test_id)
        if was is None or recorded(was, observed):
            return None
        return (
            f"{FAILURE_CHANGED}{line.where} ({line.test_id}) lists"
            f"{OBSERVED_OPEN}{was}{OBSERVED_CLOSE}; now{OBSERVED_OPEN}{observed}"
            f"{OBSERVED_CLOSE}; if the new failure is the known one, rewrite the line with "
            "--update-expectations"
        )

    @staticmethod
    def outcome(when: str, state: str, xfailed: bool, message: str) -> Outcome | None:
        """The outcome one report of a test gives it (None: this report decides nothing).
        ``when`` is the phase (setup, call, teardown), ``state`` the report's outcome
        (passed, failed, skipped), ``xfailed`` whether it was a strict xfail that failed as
        listed, ``message`` its failure text. A skip is a skip whether the test is listed or
        not; a failed call whose message is a strict xfail's pass is an unexpected pass."""
        if when == "call":
            if state == "passed":
                return "pass"
            if state == "skipped":
                return "known_failure" if xfailed else "skip"
            return "unexpected_pass" if is_unexpected_pass(message) else "fail"
        if state == "failed":
            return "fail"
        if state == "skipped" and when == "setup":
            return "known_failure" if xfailed else "skip"
        return None

    def stale(self, test_ids: Iterable[str], impls: list[str]) -> list[str]:
        """``<list>: <line>`` for each line that names no test of ``test_ids`` although every
        implementation it names is among ``impls`` (the run's)."""
        seen = list(test_ids)
        stale = []
        for kf in self.lists.values():
            for line in kf.reasons:
                if participants(line, impls) is None:
                    continue  # it names an implementation this run did not load
                if not any(matches(line, test_id) for test_id in seen):
                    stale.append(f"{kf.path.name if kf.path else kf.impl}: {line}")
        return stale

    def rewrite(self, failures: Iterable[tuple[str, list[str], str]]) -> Rewritten:
        """--update-expectations: write into each line the observation of the listed tests
        that still fail (``failures``: test id, its implementations, its observation); a line
        several tests match must see one observation, disagreeing ones are a problem and
        leave the line as it is."""
        seen: dict[tuple[str, str], set[str]] = defaultdict(set)
        for test_id, impls, observed in failures:
            line = self.listed(test_id, impls)
            if line is not None:
                seen[(line.known.impl, line.test_id)].add(observed)
        lists: list[tuple[str, list[str]]] = []
        problems: list[str] = []
        for name, kf in self.lists.items():
            chosen: dict[str, str] = {}
            for (owner, listed), found in sorted(seen.items()):
                if owner != name:
                    continue
                if len(found) == 1:
                    chosen[listed] = next(iter(found))
                else:
                    problems.append(
                        f"--update-expectations: the tests of {listed} ({kf.source}) observe "
                        f"{len(found)} different failures: {sorted(found)}; line left "
                        "as it is"
                    )
            changed = rewrite_observations(kf, chosen)
            if changed:
                lists.append((display_path(kf.path) or name, changed))
        return Rewritten(lists, problems)


def is_unexpected_pass(message: str) -> bool:
    """``message`` is the failure text of a listed test that passed: pytest's strict xpass,
    or it after the rule tag put in front of it (``[RULE SPEC.md#anchor] unexpected ...``)."""
    if message.startswith("[XPASS(strict)]"):
        return True
    return message.startswith("[") and message.partition("] ")[2].startswith(UNEXPECTED_PASS)
