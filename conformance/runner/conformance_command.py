"""``lmckv conformance [--impl SPEC]... [--out DIR] [PYTEST ARGS]``: the conformance suite
under pytest, from any directory.

Runs the tests of the installed ``conformance`` package (its plugin registers the options)
with every argument passed through to pytest, and writes ``junit.xml``, ``results.json``
and ``summary.md`` into ``--out DIR`` (default ``./lmckv-conformance`` under the current
directory; an explicit ``--junitxml``, ``--results-json`` or ``--summary-md`` wins).
``exec:`` testees are resolved from, and run in, the current directory. Nothing is written
inside the package: no pytest cache and no bytecode.

Exit status: 0 every outcome as expected, 1 an unexpected outcome, 2 a usage or setup
error (conformance/README.md, "Exit status").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_USAGE = 2
DEFAULT_OUT = "lmckv-conformance"
#: The files written into --out DIR, by the pytest option that writes each.
OUTPUTS = (
    (("--junitxml", "--junit-xml"), "junit.xml"),
    (("--results-json",), "results.json"),
    (("--summary-md",), "summary.md"),
)


def _option_value(argv: Sequence[str], name: str) -> str | None:
    """The value of ``--name VALUE`` or ``--name=VALUE`` (the last one given), before any
    ``--``."""
    value = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg.partition("=")[2]
    return value


def _given(argv: Sequence[str], names: Sequence[str]) -> bool:
    return any(a in names or a.partition("=")[0] in names for a in argv)


def _without_out(argv: Sequence[str]) -> list[str]:
    """``argv`` less ``--out DIR`` (pytest-xdist workers parse the arguments again, without
    the plugin that declares --out)."""
    kept: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg == "--":
            kept += argv[i:]
            break
        elif arg == "--out" and i + 1 < len(argv):
            skip = True
        elif not arg.startswith("--out="):
            kept.append(arg)
    return kept


#: pytest plugins a suite run does without: its cache (a run writes nothing beside the
#: outputs it names), and hypothesis's (the suite has no property tests; the plugin imports
#: hypothesis, a second of CPU in every process that collects the suite).
PLUGINS_OFF = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def pytest_args(argv: Sequence[str], cwd: Path, suite: Path) -> list[str]:
    """The arguments ``lmckv conformance ARGV`` hands to pytest from directory ``cwd``."""
    args = [str(suite), *PLUGINS_OFF, *_without_out(argv)]
    if _given(argv, ("-h", "--help")):
        return args
    out = cwd / (_option_value(argv, "--out") or DEFAULT_OUT)
    for names, filename in OUTPUTS:
        if not _given(argv, names):
            args.append(f"{names[0]}={out / filename}")
    return args


def main(argv: Sequence[str]) -> int:
    """0 every outcome as expected, 1 an unexpected outcome, and 2 for any usage, setup,
    collection or internal error (pytest's 2 to 5)."""
    import pytest

    from .options import CommandLine

    suite = Path(__file__).resolve().parent.parent  # the installed conformance package
    wrote_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # also stops pytest caching rewritten test modules
    try:
        args = pytest_args(argv, Path.cwd(), suite)
        code = int(pytest.main(args, plugins=[CommandLine()]))
    finally:
        sys.dont_write_bytecode = wrote_bytecode
    return code if code in (0, 1) else EXIT_USAGE
