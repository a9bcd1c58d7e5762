"""The ``lmckv`` command: its parser, ``--version`` and the dispatch to each subcommand.

``inspect`` is parsed here. The other subcommands own their arguments: everything after
their name goes to their package's ``main(argv)``, imported only when that subcommand runs,
so that ``lmckv --help`` loads neither torch nor any optional dependency.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from lmckv.extras import missing_extra_message

EXIT_USAGE = 2
DESCRIPTION = (
    "Conformance and benchmark kit for LMCache's KV-cache formats. "
    "Run 'lmckv COMMAND --help' for a command's options."
)


def _bench(argv: list[str]) -> int:
    from lmckv.bench import cli

    return cli.main(argv)


def _report(argv: list[str]) -> int:
    from lmckv.reports import cli

    return cli.main(argv)


def _golden(argv: list[str]) -> int:
    from lmckv.conformance.golden import cli

    return cli.main(argv)


def _fuzz(argv: list[str]) -> int:
    from lmckv.conformance.fuzz import cli

    return cli.main(argv)


def _serve(argv: list[str]) -> int:
    from lmckv.reference_impl.protocol import server

    return server.main(argv)


def _fsck(argv: list[str]) -> int:
    from lmckv import fsck_command

    return fsck_command.run(argv)


def _conformance(argv: list[str]) -> int:
    from lmckv import conformance_command

    return conformance_command.run(argv)


#: Subcommands whose arguments are their own: name -> (one-line help, handler).
HANDED_OVER: dict[str, tuple[str, Callable[[list[str]], int]]] = {
    "bench": ("run, compare or check benchmarks", _bench),
    "report": ("build the HTML/PNG report from bench and conformance results", _report),
    "golden": ("regenerate the golden vectors, or --check them byte for byte", _golden),
    "fuzz": ("fuzz every decoder (reference and C testee)", _fuzz),
    "serve": ("run the reference cache server (lm:// protocol) on loopback", _serve),
    "conformance": ("run the conformance suite: [--impl SPEC]... [pytest args]", _conformance),
    "fsck": ("check a store directory of blob files (names, blobs, totals)", _fsck),
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
    """The parser of ``lmckv``; the handed-over subcommands appear in its help only."""
    parser = argparse.ArgumentParser(prog="lmckv", description=DESCRIPTION)
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    insp = sub.add_parser(
        "inspect",
        help="verify encoded-KV blobs and print their headers",
        description="Verify encoded-KV blobs and print their headers. Exit status: 0 all "
        "valid, 1 any invalid, 2 any unreadable or bad usage.",
    )
    insp.add_argument("--json", action="store_true", help="one JSON object per file per line")
    insp.add_argument("--decode", action="store_true", help="add tensor statistics")
    insp.add_argument("files", nargs="+", metavar="FILE")
    for name, (help_text, _) in HANDED_OVER.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lmckv`` console script; returns the exit status."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in and args_in[0] in HANDED_OVER:
        command = args_in[0]
        _, handler = HANDED_OVER[command]
        try:
            return int(handler(args_in[1:]))
        except ModuleNotFoundError as exc:
            message = missing_extra_message(command, exc)
            if message is None:
                raise
            print(message, file=sys.stderr)
            return EXIT_USAGE
        except SystemExit as exc:  # argparse's --help or usage error inside the subcommand
            if exc.code is None or isinstance(exc.code, int):
                return exc.code or 0
            raise
    try:
        args = build_parser().parse_args(args_in)
    except SystemExit as exc:
        return int(exc.code or 0) and EXIT_USAGE
    from lmckv import inspect_command

    return inspect_command.run(args.files, as_json=args.json, decode=args.decode)
