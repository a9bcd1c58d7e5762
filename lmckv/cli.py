"""The ``lmckv`` command: one table of subcommands, ``--version`` and the dispatch.

Every subcommand follows one convention: ``lmckv NAME ARGS`` runs ``main(ARGS) -> int`` of the
module ``COMMANDS`` names, a ``NAME_command.py`` in the folder that owns it; that module owns
its arguments (``lmckv NAME --help``). The module is imported only when its subcommand runs,
by its installed name, so that ``lmckv --help`` loads neither torch nor any optional
dependency, and the command line depends on no folder below it at import time.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from lmckv.base.untrusted_text import safe_streams
from lmckv.extras import missing_extra_message

EXIT_USAGE = 2
#: A command interrupted (Ctrl-C), or whose reader went away (``lmckv inspect F | head -1``):
#: 128 + the signal's number, as a shell reports a process that signal ended.
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 128 + signal.SIGINT, 128 + signal.SIGPIPE
DESCRIPTION = (
    "Conformance and benchmark kit for LMCache's KV-cache formats. "
    "Run 'lmckv COMMAND --help' for a command's options."
)


@dataclass(frozen=True)
class Command:
    """One subcommand: the installed module whose ``main(argv) -> int`` runs it, and the
    one-line help ``lmckv --help`` shows."""

    module: str
    help: str

    def load(self) -> Callable[[list[str]], int]:
        """The module's ``main``, imported now."""
        return cast(Callable[[list[str]], int], importlib.import_module(self.module).main)


#: Every subcommand, in the order ``lmckv --help`` lists them.
COMMANDS: dict[str, Command] = {
    "inspect": Command(
        "lmckv.conformance.operator.inspect_command",
        "verify encoded-KV blobs and print their headers",
    ),
    "fsck": Command(
        "lmckv.conformance.operator.fsck_command",
        "check a store directory of blob files (names, blobs, totals)",
    ),
    "serve": Command(
        "lmckv.conformance.operator.serve_command",
        "run the reference cache server (lm:// protocol) on loopback",
    ),
    "conformance": Command(
        "lmckv.conformance.runner.conformance_command",
        "run the conformance suite: [--impl SPEC]... [pytest args]",
    ),
    "golden": Command(
        "lmckv.conformance.golden.golden_command",
        "regenerate the golden vectors, or --check them byte for byte",
    ),
    "fuzz": Command(
        "lmckv.conformance.fuzz.fuzz_command", "fuzz every decoder (reference and C testee)"
    ),
    "bench": Command("lmckv.bench.bench_command", "run, compare or check benchmarks"),
    "report": Command(
        "lmckv.reports.report_command",
        "build the HTML/PNG report from bench and conformance results",
    ),
}


def version() -> str:
    """The installed distribution's version, or "unknown" in a source tree never installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as distribution_version

    try:
        return distribution_version("lmckv")
    except PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``, reading the version only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"lmckv {version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``lmckv`` itself: ``--version`` and the list of subcommands."""
    parser = argparse.ArgumentParser(prog="lmckv", description=DESCRIPTION)
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub.add_parser(name, help=command.help, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lmckv`` console script; returns the exit status."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    safe_streams()  # a file's name or a peer's text never crashes the output
    if not args_in or args_in[0] not in COMMANDS:
        try:
            build_parser().parse_args(args_in)
        except SystemExit as exc:  # --help, --version, or a usage error
            return int(exc.code or 0) and EXIT_USAGE
        return EXIT_USAGE
    name = args_in[0]
    try:
        return int(COMMANDS[name].load()(args_in[1:]))
    except KeyboardInterrupt:
        print(f"lmckv {name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader stopped reading: nothing more is written, not even at exit's flush.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
    except ModuleNotFoundError as exc:
        message = missing_extra_message(name, exc)
        if message is None:
            raise
        print(message, file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # argparse's --help or usage error inside the subcommand
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        raise
