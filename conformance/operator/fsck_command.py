"""``lmckv fsck DIR``: check a store on disk (SPEC.md "A store on disk", rules STORE-*).

Importing this module loads torch (through the reference codec), so the command line imports
it only when ``fsck`` runs. Prints the totals per model and kv_rank and every problem with
its rule; ``--json PATH`` writes the report (schema ``fsck``; ``-`` for standard output).
Exit status: 0 no problem, 1 any problem, 2 usage (bad arguments, a directory that cannot be
read). The checking lives in ``lmckv.conformance.store.fsck``; this module only parses,
shows progress and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..store.fsck import DEFAULT_JOBS, Verdict, check_store

EXIT_CLEAN, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
Progress = Callable[[Iterable[Verdict], int], Iterable[Verdict]]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lmckv fsck",
        description="Check a store directory written by an FS L2 adapter: every file name "
        "is an ObjectKey's, every blob valid (streamed, bounded memory), totals per model "
        "and kv_rank. Exit status: 0 clean, 1 problems, 2 usage.",
    )
    parser.add_argument("directory", type=Path, metavar="DIR")
    parser.add_argument(
        "--json", metavar="PATH", help="write the report as JSON here ('-': stdout)"
    )
    parser.add_argument("--jobs", type=int, default=None, metavar="N", help="files checked at once")
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (default: on a terminal)"
    )
    return parser


def _progress(show: bool) -> Progress:
    """A progress wrapper for ``check_store``: tqdm's bar on standard error when asked and
    installed (the ``bench`` extra), else the stream as it is."""

    def plain(items: Iterable[Verdict], total: int) -> Iterable[Verdict]:
        return items

    if not show:
        return plain
    try:
        from tqdm import tqdm
    except ImportError:
        return plain

    def bar(items: Iterable[Verdict], total: int) -> Iterator[Verdict]:
        yield from tqdm(items, total=total, unit="file", file=sys.stderr, leave=False)

    return bar


def format_report(doc: dict[str, object]) -> str:
    """The human-readable form of the ``--json`` document."""
    lines = [
        f"{doc['directory']}: {doc['entries']} entries, {doc['blob_files']} blob files, "
        f"{doc['valid_blobs']} valid, {doc['bytes']} bytes"
    ]
    totals = doc["totals"]
    assert isinstance(totals, list)
    for t in totals:
        lines.append(
            f"  {t['model_name']}  kv_rank {t['kv_rank']:#010x} (world {t['world_size']}, "
            f"rank {t['global_rank']}, local {t['local_rank']}/{t['local_world_size']}): "
            f"{t['blobs']} blobs ({t['k_less']} without K), {t['bytes']} bytes"
        )
    problems = doc["problems"]
    assert isinstance(problems, list)
    lines.append(f"{len(problems)} problems" + (":" if problems else ""))
    lines += [f"  {p['rule']}  {p['file']}: {p['message']}" for p in problems]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_CLEAN
    if args.jobs is not None and args.jobs < 1:
        print(f"lmckv fsck: --jobs must be >= 1, got {args.jobs}", file=sys.stderr)
        return EXIT_USAGE
    show = not args.no_progress and sys.stderr.isatty()
    try:
        report = check_store(
            args.directory, jobs=args.jobs or DEFAULT_JOBS, progress=_progress(show)
        )
    except OSError as exc:
        print(f"lmckv fsck: cannot read {args.directory}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    doc = report.document()
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    if args.json == "-":
        sys.stdout.write(text)
    else:
        print(format_report(doc))
        if args.json:
            Path(args.json).write_text(text, encoding="utf-8")
    return EXIT_PROBLEMS if doc["problems"] else EXIT_CLEAN
