"""Known-failure lists: conformance/known_failures/<impl>.txt, one test id per line.

A line is ``<test id> <reason> [observed: <observation>]``: the test id is the pytest node
id without its directory (``test_codec_read.py::test_parse[upstream-kv-crc-zero]``), the
reason is free text and mandatory, the observation (conformance/core/observations.py) says
how the test failed when the line was written: ``raw:builtins.ValueError: <stable key of
the message>``, ``accepted``, ``fields: a, b`` or ``failed: <key>``. ``#`` starts a comment
line. A listed test that passes fails the run, and so does a listed test that no longer
exists: the lists can only shrink. A listed test that fails with another observation fails
the run as "failure changed"; ``--update-expectations`` rewrites the observations of the
listed tests that still fail (it never adds or removes a line).

A ``*`` in a test id matches any text: ``test_matrix_payload[upstream-to-*-enc-...]`` lists
a producer's failure whatever implementation consumes its output.

Upstream has one list per LMCache release, ``upstream-<version>.txt``; a release without its
own list uses the nearest earlier release's (:func:`upstream_list_path`), so a new release
starts from its predecessor's expectations, and a checkout without tags (setuptools-scm's
``0.1.dev1+g<commit>``, earlier than every release) uses the newest release's. A list given
on the command line (``--known-failures [IMPL=]FILE``) replaces the chosen one.
:attr:`KnownFailures.source` says which file a run used and why.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from lmckv.conformance.core.observations import join_reason, split_reason
from lmckv.conformance.core.resources import package_path

#: Set LMCKV_KNOWN_FAILURES_DIR to read the lists from another directory (self-tests do).
KNOWN_FAILURES_DIR = Path(
    os.environ.get("LMCKV_KNOWN_FAILURES_DIR")
    or package_path("lmckv.conformance", "known_failures")
)
UPSTREAM_PREFIX = "upstream-"


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


def short_id(nodeid: str) -> str:
    """``conformance/suite/test_x.py::test_y[p]`` -> ``test_x.py::test_y[p]``."""
    path, sep, rest = nodeid.partition("::")
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
