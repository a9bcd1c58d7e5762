"""The "Stores" section: what ``lmckv fsck --json`` found in each store it was given
(``lmckv report ... --store FSCK.json``): the store, how its objects ended (verified, size
checked, problems), the problems by rule and the first of them, the totals per model, kv_rank,
object group and cache_salt (all of them in a CSV beside the page).

Input: the fsck report (schema ``fsck``, SPEC.md "A store"), validated before it is shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from lmckv.base.schemas import SchemaError, validate
from lmckv.base.untrusted_json import JSONLimits, load_path

from .html import Section, note, paragraph, table
from .output import Output

SECTION_ID = "stores"
TITLE = "Stores"
#: Problems listed on the page for one store (every one is in its fsck JSON).
SHOWN_PROBLEMS = 50


#: What an fsck report may hold (lmckv/base/untrusted_json.py).
REPORT_LIMITS = JSONLimits(max_bytes=64 << 20)


class StoreInputError(ValueError):
    """An fsck report that cannot be read or is not one."""


def load_fsck(path: Path) -> dict[str, Any]:
    try:
        document = load_path(path, REPORT_LIMITS)
        validate(document, "fsck")
    except (OSError, ValueError) as exc:  # UntrustedJSONError and SchemaError included
        detail = exc.at(str(path)) if isinstance(exc, SchemaError) else exc
        raise StoreInputError(f"{path}: not an lmckv fsck report: {detail}") from None
    return dict(document)


def _summary(doc: dict[str, Any]) -> str:
    store, counts = doc["store"], doc["counts"]
    detected = " (detected)" if store["serde_detected"] else ""
    verdict = "clean" if not doc["problems"] else f"{len(doc['problems'])} problems"
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
        shown = pd.DataFrame(
            doc["problems"][:SHOWN_PROBLEMS], columns=["name", "rule", "message", "size"]
        )
        body += paragraph(_summary(doc))
        if len(rules):
            body += table(rules) + table(shown, wrap_columns=frozenset({"name", "message"}))
        columns = ["model_name", "kv_rank", "object_group_id", "cache_salt", "objects", "bytes"]
        columns += ["verified", "size_checked", "partial", "problems", "gone"]
        if len(totals):
            body += table(totals[columns], wrap_columns=frozenset({"model_name", "cache_salt"}))
    return Section(SECTION_ID, TITLE, body)
