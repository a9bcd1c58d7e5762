"""``python -m lmckv.conformance.golden [--check] [--out DIR]``.

Without ``--check``: regenerate golden_blobs/v1 and v2 (files no longer produced are deleted).
With ``--check``: regenerate in memory and exit 1 if any file differs from, is missing
from, or is extra in the committed tree, naming each.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from lmckv.base.resources import golden_dir

from .build import GOLDEN_DIR, build_all

#: The vector sets under golden_blobs/, one folder each.
SETS = ("v1", "v2")


def _committed(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root).as_posix()): p.read_bytes()
        for name in SETS
        if (root / name).is_dir()
        for p in sorted((root / name).rglob("*"))
        if p.is_file()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lmckv golden",
        description="Without --check: regenerate golden_blobs/v1 and v2 (files no longer "
        "produced are deleted). With --check: regenerate in memory and exit 1 if any file "
        "differs from, is missing from, or is extra in the committed tree, naming each.",
    )
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    parser.add_argument(
        "--out",
        type=Path,
        default=GOLDEN_DIR,
        help="golden_blobs directory (default: the checkout's; --check alone compares with "
        "the installed vectors)",
    )
    args = parser.parse_args(argv)
    if args.out is None:
        if not args.check:
            parser.error("no source checkout here: name the folder to write with --out DIR")
        args.out = golden_dir()
    start = time.monotonic()
    files = build_all(progress=lambda msg: print(msg, file=sys.stderr))
    committed = _committed(args.out)
    changed = sorted(p for p in files if p in committed and committed[p] != files[p])
    missing = sorted(p for p in files if p not in committed)
    extra = sorted(p for p in committed if p not in files)
    total = sum(len(b) for b in files.values())
    if args.check:
        for label, paths in (("differs", changed), ("missing", missing), ("extra", extra)):
            for p in paths:
                print(f"golden check: {label}: {p}")
        bad = len(changed) + len(missing) + len(extra)
        verdict = "FAILED" if bad else "ok"
        print(
            f"golden check {verdict}: {len(files)} files, {total} bytes, {bad} differences "
            f"({time.monotonic() - start:.1f} s)"
        )
        return 1 if bad else 0
    for p in extra:
        (args.out / p).unlink()
    for p, data in files.items():
        target = args.out / p
        target.parent.mkdir(parents=True, exist_ok=True)
        if committed.get(p) != data:
            target.write_bytes(data)
    print(
        f"golden: wrote {len(changed) + len(missing)} files, removed {len(extra)}, "
        f"{len(files)} files / {total} bytes in total ({time.monotonic() - start:.1f} s)"
    )
    return 0
