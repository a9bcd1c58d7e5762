"""The "Stores" section: what ``lmckv fsck --json`` found in each store it was given
(``lmckv report ... --store FSCK.json``): the store, how its objects ended (verified, size
checked, problems), the problems by rule and the first of them, the totals per model, kv_rank,
object group and cache_salt (all of them in a CSV beside the page).

Input: the fsck report (schema ``fsck``, SPEC.md "A store"), validated before it is shown.
A report as fsck writes it (one problem per line after its header) is read as a stream, so
that a store with millions of problems reads back: its header, the first problems (those the
page shows) and the count of the rest. Any other layout of the document is read whole, within
:data:`REPORT_LIMITS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from lmckv.base.schemas import SchemaError, validate
from lmckv.base.untrusted_json import JSONLimits, load_path, loads

from .html import Section, note, paragraph, table
from .output import Output

SECTION_ID = "stores"
TITLE = "Stores"
#: Problems listed on the page for one store (every one is in its fsck JSON).
SHOWN_PROBLEMS = 50


#: What an fsck report read whole may hold (lmckv/base/untrusted_json.py).
REPORT_LIMITS = JSONLimits(max_bytes=64 << 20)
#: The line that opens the problems in fsck's own layout (``Report.write_json``): each
#: problem follows on a line of its own, then `` ]`` and ``}``.
PROBLEMS_OPEN = ' "problems": ['
#: What one streamed problem line may hold.
PROBLEM_LIMITS = JSONLimits(max_bytes=1 << 20)


class StoreInputError(ValueError):
    """An fsck report that cannot be read or is not one."""


def load_fsck(path: Path) -> dict[str, Any]:
    """The report with its first :data:`SHOWN_PROBLEMS` problems, and ``problem_count``."""
    try:
        document = _streamed(path)
        if document is None:
            document = dict(load_path(path, REPORT_LIMITS))
            validate(document, "fsck")
            document["problem_count"] = len(document["problems"])
            document["problems"] = document["problems"][:SHOWN_PROBLEMS]
    except (OSError, ValueError) as exc:  # UntrustedJSONError and SchemaError included
        detail = exc.at(str(path)) if isinstance(exc, SchemaError) else exc
        raise StoreInputError(f"{path}: not an lmckv fsck report: {detail}") from None
    return document


def _streamed(path: Path) -> dict[str, Any] | None:
    """The report read as fsck writes it, or None when it has another layout. The header
    (everything before :data:`PROBLEMS_OPEN`) is held to :data:`REPORT_LIMITS`, each problem
    line to :data:`PROBLEM_LIMITS` (read so, whether shown or only counted), and the
    document to the schema with the problems shown."""
    head: list[bytes] = []
    size = 0
    with path.open("rb") as f:
        while line := _line(f):
            size += len(line)
            if size > REPORT_LIMITS.max_bytes:
                return None
            if line.rstrip(b"\n") == PROBLEMS_OPEN.encode():
                break
            head.append(line)
        else:
            return None
        text = b"".join(head).decode("utf-8").rstrip().rstrip(",") + "\n}"
        document = dict(loads(text, REPORT_LIMITS))
        shown: list[Any] = []
        count = 0
        while line := _line(f):
            item = line.strip()
            if item == b"]":
                if _line(f).strip() != b"}" or f.read(1):
                    return None
                break
            if count < SHOWN_PROBLEMS:
                shown.append(loads(item.removesuffix(b","), PROBLEM_LIMITS, what="a problem"))
            count += 1
        else:
            return None  # cut short
    document["problems"] = shown
    validate(document, "fsck")
    if count != document["counts"]["problem"]:
        raise ValueError(f"{count} problems listed, {document['counts']['problem']} counted")
    document["problem_count"] = count
    return document


def _line(f: BinaryIO) -> bytes:
    """The next line, at most :data:`PROBLEM_LIMITS` bytes long (ValueError past it)."""
    line = f.readline(PROBLEM_LIMITS.max_bytes + 1)
    if len(line) > PROBLEM_LIMITS.max_bytes:
        raise ValueError(f"a line longer than {PROBLEM_LIMITS.max_bytes} bytes")
    return line


def _summary(doc: dict[str, Any]) -> str:
    store, counts = doc["store"], doc["counts"]
    detected = " (detected)" if store["serde_detected"] else ""
    verdict = "clean" if not doc["problem_count"] else f"{doc['problem_count']} problems"
    unverifiable = (
        ""
        if doc["content_verifiable"]
        else "; their content carries no checksum: only sizes were checked"
    )
    return (
        f"{store['adapter']} store {store['location']}, serde {store['serde']}{detected}: "
        f"{verdict}. {doc['objects']} objects, {doc['bytes']} bytes; {counts['verified']} "
        f"verified, {counts['size_checked']} size checked, {counts['partial']} partial "
        f"chunks{unverifiable}."
        + (f" Incomplete: {doc['incomplete']}." if doc["incomplete"] else "")
        + _repaired(doc)
    )


def _repaired(doc: dict[str, Any]) -> str:
    """What ``--repair`` did, in one sentence ("" when it was not asked)."""
    repair = doc.get("repair")
    if repair is None:
        return ""
    n = repair["outcomes"]
    where = f" to {repair['quarantine']}" if repair["quarantine"] else ""
    return (
        f" Repaired: {n['removed']} removed, {n['quarantined']} quarantined{where}, "
        f"{n['changed']} rewritten since judged and left, {n['gone']} gone, {n['failed']} "
        f"failed; {repair['uncorrected']} problems left in the store."
    )


def store_section(paths: list[Path], out: Output) -> Section:
    """The section for these fsck reports; a note when none was given."""
    if not paths:
        return Section(
            SECTION_ID, TITLE, note("no store checked: pass `lmckv fsck --json` files with --store")
        )
    body = ""
    for i, path in enumerate(paths):
        doc = load_fsck(path)
        totals = pd.DataFrame(doc["totals"])
        out.csv(totals, f"store_{i}_totals.csv")
        rules = pd.DataFrame(sorted(doc["problems_by_rule"].items()), columns=["rule", "objects"])
        repaired = doc.get("repair") is not None
        listed = ["name", "rule", "message", "size"] + (["repair"] if repaired else [])
        shown = pd.DataFrame(doc["problems"], columns=listed)
        body += paragraph(_summary(doc))
        if len(rules):
            if repaired:
                by_rule = doc["repair"]["repaired_by_rule"]
                rules["repaired"] = [by_rule.get(rule, 0) for rule in rules["rule"]]
            body += table(rules) + table(shown, wrap_columns=frozenset({"name", "message"}))
        columns = ["model_name", "kv_rank", "object_group_id", "cache_salt", "objects", "bytes"]
        columns += ["verified", "size_checked", "partial", "problems", "gone"]
        columns += ["repaired"] if repaired and "repaired" in totals else []
        if len(totals):
            body += table(totals[columns], wrap_columns=frozenset({"model_name", "cache_salt"}))
    return Section(SECTION_ID, TITLE, body)
