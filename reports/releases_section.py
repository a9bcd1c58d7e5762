"""The "LMCache releases" section: each rule's outcome on every release, and one sentence per
format saying whether it changed and where.

Input: the ``releases.json`` of ``nox -s upstream_versions`` (conformance/releases/cross.py)
and the per-release results files it names (paths relative to it).
"""

from __future__ import annotations

import itertools
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from lmckv.base.untrusted_json import load_path

from .html import Section, note, paragraph, table
from .inputs import RESULTS_LIMITS
from .output import Output

SECTION_ID = "releases"
TITLE = "LMCache releases"
#: The formats and the rule-id prefixes that belong to each.
FORMATS = {
    "encoded KV blob": ("KV-", "Q-"),
    "protocol messages": ("PROTO-",),
    "object keys": ("KEY-",),
    "store on disk": ("STORE-",),
}
STATUS_CLASS = {"pass": "o-pass", "known failure": "o-known", "skipped": "o-skip", "FAIL": "o-fail"}


class ReleasesInputError(ValueError):
    """releases.json or a results file it names is missing or malformed."""


def load_releases(path: Path) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """releases.json and, per release, the upstream tests of its results file."""
    try:
        summary = load_path(path, RESULTS_LIMITS)
    except (OSError, ValueError) as exc:
        raise ReleasesInputError(f"{path}: {exc}") from None
    if not isinstance(summary, dict) or summary.get("kind") != "lmckv-releases":
        raise ReleasesInputError(f"{path}: not a releases.json (kind lmckv-releases)")
    tests: dict[str, list[dict[str, Any]]] = {}
    for version, name in summary.get("results", {}).items():
        try:
            document = load_path(path.parent / name, RESULTS_LIMITS)
        except (OSError, ValueError) as exc:
            raise ReleasesInputError(f"{path.parent / name}: {exc}") from None
        tests[version] = [
            t
            for t in document["tests"]
            if t["impl"] == "upstream" or t.get("producer") == "upstream"
        ]
    return summary, tests


def format_of(rule: str) -> str:
    return next((f for f, prefixes in FORMATS.items() if rule.startswith(prefixes)), "other")


def _status(outcomes: list[str]) -> str:
    counts = {o: outcomes.count(o) for o in set(outcomes)}
    if counts.get("fail") or counts.get("unexpected_pass"):
        return "FAIL"
    if counts.get("skip") == len(outcomes):
        return "skipped"
    if counts.get("known_failure"):
        return "known failure"
    return "pass"


def rule_table(versions: list[str], tests: dict[str, list[dict[str, Any]]]) -> pd.DataFrame:
    """Rows: rules; columns: format, rule, then one status per release (pass, known failure,
    skipped: the release lacks the capability, FAIL)."""
    rows: dict[str, dict[str, str]] = {}
    for version in versions:
        by_rule: dict[str, list[str]] = {}
        for t in tests.get(version, []):
            by_rule.setdefault(t["rule"], []).append(t["outcome"])
        for rule, outcomes in by_rule.items():
            rows.setdefault(rule, {"format": format_of(rule), "rule": rule})[version] = _status(
                outcomes
            )
    frame = pd.DataFrame(list(rows.values()), columns=["format", "rule", *versions])
    return frame.sort_values(["format", "rule"]).reset_index(drop=True)


def _missing_names(tests: list[dict[str, Any]]) -> list[str]:
    """The names a release lacks, from skip reasons ``...: lmcache X has no NAME``."""
    found = {
        str(t["reason"]).rpartition(" has no ")[2]
        for t in tests
        if t["outcome"] == "skip" and " has no " in str(t.get("reason") or "")
    }
    return sorted(found)


def format_sentences(
    summary: dict[str, Any], tests: dict[str, list[dict[str, Any]]]
) -> dict[str, str]:
    """One sentence per format: unchanged since the first release, or what changed where."""
    versions = [v for v in summary["versions"] if v in tests]
    sentences = {}
    for fmt in FORMATS:

        def outcomes(version: str, fmt: str = fmt) -> dict[str, str]:
            return {t["id"]: t["outcome"] for t in tests[version] if format_of(t["rule"]) == fmt}

        changes = []
        for before, after in itertools.pairwise(versions):
            old, new = outcomes(before), outcomes(after)
            changed = sorted(i for i in old.keys() | new.keys() if old.get(i) != new.get(i))
            if not changed:
                continue
            lost = _missing_names(
                [t for t in tests[after] if t["id"] in changed and format_of(t["rule"]) == fmt]
            )
            tests_text = f"{len(changed)} test{'s' if len(changed) != 1 else ''}"
            if lost:
                changes.append(
                    f"lmcache {after} has no {', '.join(lost)}, so {tests_text} that ran on "
                    f"{before} skip{'s' if len(changed) == 1 else ''} there"
                )
            else:
                changes.append(f"{tests_text} change outcome from {before} to {after}")
        if not versions:
            sentences[fmt] = "no release was run"
        elif not changes:
            sentences[fmt] = f"unchanged since {versions[0]}: every test has the same outcome"
        else:
            sentences[fmt] = (
                "changed: " + "; ".join(changes) + f"; every other test as on {versions[0]}"
            )
    blob = "encoded KV blob"
    if blob in sentences:
        sentences[blob] += "; " + _blob_evidence(summary)
    return sentences


def _blob_evidence(summary: dict[str, Any]) -> str:
    encode: dict[str, dict[str, str]] = summary.get("encode", {})
    versions = summary["versions"]
    agreed = [
        next(iter(by_version.values()))
        for by_version in encode.values()
        if len(by_version) == len(versions) and len(set(by_version.values())) == 1
    ]
    same_bytes = sum(1 for value in agreed if not value.startswith("error"))
    same_error = len(agreed) - same_bytes
    reads = summary.get("read", {})
    total = ok = 0
    for consumer in reads.values():
        for cases in consumer.values():
            total += len(cases)
            ok += sum(1 for verdict in cases.values() if verdict == "pass")
    refused = f" (every release refuses the other {same_error} alike)" if same_error else ""
    return (
        f"{same_bytes} of {len(encode)} canonical inputs encode to identical bytes in every "
        f"release{refused}, and {ok} of {total} cross-release reads (every release reading "
        "every release's blobs) return the golden payload"
    )


def store_table(summary: dict[str, Any]) -> pd.DataFrame:
    """Rows: the release that wrote a store; columns: what ``lmckv fsck`` found in it, then
    one cell per release reading it (``8/8`` files read back to the chunk's K and V)."""
    reads: dict[str, dict[str, dict[str, str]]] = summary.get("store_read", {})
    fsck: dict[str, dict[str, Any]] = summary.get("store_fsck", {})
    readers = [v for v in summary["versions"] if v in reads]
    rows = []
    for producer in summary["versions"]:
        if producer not in fsck:
            continue
        problems = fsck[producer]["problems"]
        found = ", ".join(f"{n} {rule}" for rule, n in sorted(problems.items())) or "clean"
        row = {"written by": producer, "files": fsck[producer]["files"], "lmckv fsck": found}
        for consumer in readers:
            files = reads[consumer].get(producer, {})
            passed = sum(1 for verdict in files.values() if verdict == "pass")
            row[f"read by {consumer}"] = f"{passed}/{len(files)}" if files else "-"
        rows.append(row)
    columns = ["written by", "files", "lmckv fsck", *(f"read by {c}" for c in readers)]
    return pd.DataFrame(rows, columns=columns)


def releases_section(path: Path | None, out: Output) -> Section:
    """The section; a note when no releases.json was given."""
    if path is None:
        return Section(
            SECTION_ID,
            TITLE,
            note(
                "no release comparison in this report: `nox -s upstream_versions` writes "
                ".lmckv/upstream-versions/releases.json; pass it with --releases"
            ),
        )
    summary, tests = load_releases(path)
    versions = [v for v in summary["versions"] if v in tests]
    frame = rule_table(versions, tests)
    out.csv(frame, "releases_rules.csv")
    sentences = format_sentences(summary, tests)
    out.json({"versions": versions, "formats": sentences}, "releases_formats.json")
    cell_class = {v: frame[v].map(lambda s: STATUS_CLASS.get(s, "")) for v in versions}
    items = "".join(
        f"<li><b>{escape(fmt)}</b>: {escape(text)}.</li>" for fmt, text in sentences.items()
    )
    body = (
        paragraph(
            "Upstream lmcache, one release per column, against the same golden vectors: "
            "pass, known failure (listed in the release's known-failure list), skipped (the "
            "release lacks the API: the skip reason names it), or FAIL."
        )
        + f"<ul>{items}</ul>"
        + table(frame, cell_class=cell_class)
    )
    stores = store_table(summary)
    if len(stores):
        out.csv(stores, "releases_stores.csv")
        body += paragraph(
            "Stores on disk: each release writes a store (its serializers, both serde modes, "
            "through its FS adapter) and every release reads every store back (its filename "
            "reader and deserializers: K bit for bit, V within FP8); `lmckv fsck` judges each "
            "store by SPEC.md's STORE rules."
        ) + table(stores)
    return Section(SECTION_ID, TITLE, body)
