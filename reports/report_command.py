"""``lmckv report RESULTS... --out DIR [--baseline BENCH.jsonl]``: build the report."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from lmckv.base.resources import package_path

from ..conformance.store.serde_plugins import PluginError, load_all
from .adapter_section import adapter_section
from .bench_section import accuracy_section, comparison_section, throughput_section
from .conformance_section import interop_section, matrix_section
from .e2e_section import e2e_section
from .environment import environment_section
from .html import page
from .inputs import ReportInputError, ReportInputs, load_inputs
from .output import Output
from .releases_section import ReleasesInputError, releases_section
from .server_load_section import server_load_section
from .store_section import StoreInputError, store_section
from .summary_section import summary_section

SPEC = package_path("lmckv.reference_impl", "SPEC.md")
TITLE = "lmckv report: KV-cache format conformance and benchmarks"


def _progress(message: str) -> None:
    print(f"report: {message}", file=sys.stderr, flush=True)


def build(
    inputs: ReportInputs,
    out_dir: Path,
    releases: Path | None = None,
    stores: list[Path] | None = None,
) -> Path:
    """Write index.html, its figures and tables into ``out_dir``; return the index path.
    ``releases``: the releases.json of ``nox -s upstream_versions``, for the releases
    section; ``stores``: ``lmckv fsck --json`` reports, for the stores section."""
    out = Output(out_dir)
    generated = datetime.now(UTC)
    spec_href = Path(os.path.relpath(SPEC, out_dir.resolve())).as_posix()
    _progress("conformance sections")
    conformance = matrix_section(inputs, out, spec_href)
    interop = interop_section(inputs, out)
    adapters = adapter_section(inputs, out, spec_href)
    # Only with --releases: the page of a plain run keeps its sections.
    release_table = [releases_section(releases, out)] if releases is not None else []
    store_table = [store_section(stores, out)] if stores else []
    _progress("throughput figures")
    throughput = throughput_section(inputs, out)
    _progress("accuracy figures")
    e2e = e2e_section(inputs, out)
    accuracy = accuracy_section(inputs, out)
    _progress("comparison, summary, environment")
    comparison, verdict_counts = comparison_section(inputs, out)
    summary = summary_section(inputs, out, verdict_counts)
    environment = environment_section(inputs, out, generated)
    sources = [run.path.name for run in inputs.conformance] + [r.path.name for r in inputs.bench]
    sources += [f"model {r.path.name}" for r in inputs.models]
    if inputs.baseline is not None:
        sources.append(f"baseline {inputs.baseline.path.name}")
    subtitle = (
        f"Built {generated.isoformat(timespec='seconds')} from {', '.join(sources)}. "
        "Tables behind every figure are CSV/JSON files beside this page."
    )
    server_load = server_load_section(inputs, out)
    sections = [summary, e2e, accuracy, throughput, *([server_load] if server_load else [])]
    sections += [conformance, interop, *([adapters] if adapters else [])]
    sections += [*release_table, *store_table]
    sections += [comparison, environment]
    index = out.path("index.html")
    index.write_text(page(TITLE, subtitle, sections), encoding="utf-8")
    out.finish()
    return index


def main(argv: list[str]) -> int:
    """Parse arguments, load the results files, build the report; 0 on success, 2 on bad input."""
    parser = argparse.ArgumentParser(
        prog="lmckv report",
        description="Build the lmckv HTML/PNG report from bench JSONL and conformance JSON.",
    )
    parser.add_argument(
        "results",
        nargs="+",
        type=Path,
        metavar="RESULTS",
        help="bench results (.jsonl, first record kind=header) and/or conformance results (.json)",
    )
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--baseline", type=Path, help="bench results file to compare against")
    parser.add_argument(
        "--releases",
        type=Path,
        help="releases.json of `nox -s upstream_versions` (the LMCache releases section)",
    )
    parser.add_argument(
        "--store",
        type=Path,
        action="append",
        default=[],
        help="an `lmckv fsck --json` report (the stores section); may repeat",
    )
    parser.add_argument(
        "--serde-plugin", action="append", default=[], metavar="MODULE[:FUNCTION]",
        help="import MODULE (and call FUNCTION) first: a package that registers serdes with "
        "LMCache's factory, so that the table's pasted specs naming them build (may repeat)",
    )  # fmt: skip
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        load_all(args.serde_plugin)
    except PluginError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        inputs = load_inputs(args.results, args.baseline)
    except ReportInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _progress(f"loaded {len(inputs.bench)} bench and {len(inputs.conformance)} conformance file(s)")
    try:
        index = build(inputs, args.out, args.releases, args.store)
    except (ReleasesInputError, StoreInputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _progress(f"wrote {index} ({len(list(args.out.iterdir()))} files in {args.out})")
    return 0
