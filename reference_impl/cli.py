"""The ``lmckv`` command: ``inspect`` blobs here; ``bench`` and ``report`` run their packages."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from reference_impl.inspect_blob import inspect_bytes

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
#: Subcommands whose arguments belong to another package's ``main(argv) -> int``.
HANDED_OVER = {"bench": "bench.cli", "report": "reports.cli"}


def _table(record: dict[str, Any]) -> str:
    lines = [record["path"]]
    if not record["valid"]:
        lines.append(f"  INVALID  {record['error']}: {record['message']}")
        return "\n".join(lines)
    header = record["header"]
    hashes = header.pop("hashes")
    width = max(len(k) for k in (*header, *hashes))
    lines.append("  valid")
    lines += [f"  {k:<{width}}  {v}" for k, v in header.items()]
    lines += [f"  {k:<{width}}  {v!r}" for k, v in hashes.items()]
    if "stats" in record:
        lines.append("  decoded:")
        lines += [f"    {k:<{width}}  {v}" for k, v in record["stats"].items()]
    if "stats_error" in record:
        lines.append(f"  stats: {record['stats_error']}")
    return "\n".join(lines)


def inspect_main(args: argparse.Namespace) -> int:
    """Exit 0 when every file is a valid blob, 1 when any is not, 2 when any is unreadable."""
    status = EXIT_OK
    for path in args.files:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            print(f"lmckv inspect: cannot read {path}: {e.strerror or e}", file=sys.stderr)
            status = EXIT_USAGE
            continue
        record = inspect_bytes(path, data, decode=args.decode)
        if not record["valid"] and status == EXIT_OK:
            status = EXIT_INVALID
        print(json.dumps(record) if args.json else _table(record), flush=True)
    return status


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lmckv", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    insp = sub.add_parser("inspect", help="verify encoded-KV blobs and print their headers")
    insp.add_argument("--json", action="store_true", help="one JSON object per file per line")
    insp.add_argument("--decode", action="store_true", help="add tensor statistics")
    insp.add_argument("files", nargs="+", metavar="FILE")
    sub.add_parser("bench", help="run or compare benchmarks (lmckv bench --help)", add_help=False)
    sub.add_parser("report", help="build the HTML report (lmckv report --help)", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lmckv`` console script."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in and args_in[0] in HANDED_OVER:
        module = importlib.import_module(HANDED_OVER[args_in[0]])
        return int(module.main(args_in[1:]))
    try:
        args = _parser().parse_args(args_in)
    except SystemExit as e:
        return int(e.code or 0) and EXIT_USAGE
    return inspect_main(args)


if __name__ == "__main__":
    sys.exit(main())
