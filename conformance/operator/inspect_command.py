"""``lmckv inspect``: one verdict per blob file, as a table or as JSON lines.

The header check imports no torch (``reference_impl.kv_codec.header_fields``): a file is
verified in the memory of a small process; only ``--decode`` loads torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from lmckv.base.untrusted_text import shown

from ...reference_impl.kv_codec.blob_file import BlobFileError
from ...reference_impl.kv_codec.inspection import inspect_file

EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE = 0, 1, 2


def format_table(record: dict[str, Any]) -> str:
    """The human-readable form of one ``inspect_file`` record."""
    lines = [shown(record["path"])]
    if not record["valid"]:
        rule = f" [{record['rule']}]" if record["rule"] else ""
        lines.append(f"  INVALID{rule}  {record['error']}: {record['message']}")
        return "\n".join(lines)
    header = dict(record["header"])
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lmckv inspect",
        description="Verify encoded-KV blobs and print their headers. Exit status: 0 all "
        "valid, 1 any invalid, 2 any unreadable or bad usage.",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per file per line")
    parser.add_argument("--decode", action="store_true", help="add tensor statistics")
    parser.add_argument("files", nargs="+", metavar="FILE")
    return parser


def main(argv: Sequence[str]) -> int:
    """``lmckv inspect [--json] [--decode] FILE...``: the exit status of ``run``."""
    args = build_parser().parse_args(argv)
    return run(args.files, as_json=args.json, decode=args.decode)


def run(files: Sequence[str], *, as_json: bool, decode: bool) -> int:
    """Print each file's record; 0 when all are valid blobs, 1 when any is not, 2 when any
    cannot be checked (unreadable, not a regular file; a header past the reader's limit is a
    BlobFileLimitError record, exit 1).
    Each file is read as a stream, in bounded memory (``check_blob_file``)."""
    status = EXIT_OK
    for path in files:
        try:
            record = inspect_file(path, decode=decode)
        except (BlobFileError, OSError) as e:
            print(f"lmckv inspect: {e}", file=sys.stderr)
            status = EXIT_UNREADABLE
            continue
        if not record["valid"] and status == EXIT_OK:
            status = EXIT_INVALID
        print(json.dumps(record) if as_json else format_table(record), flush=True)
    return status
