"""Differential fuzzing against the C testee: the same inputs go to the reference (through
the suite's Python driver) and to the testee over its stdio protocol, in batches.

Responses come back in request order, so when the testee dies or stalls, the first
unanswered request is the one it died on: that input is recorded (with the sanitizer's
report from stderr) under the finding kind of the failure (``TESTEE_KINDS``) and a fresh
process takes the rest of the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..core import wire
from ..core.error_names import RAW_PREFIX, family_of, op_family
from ..core.testee_process import TesteeFailure, TesteeProcess
from ..drivers.base import Driver
from .findings import TESTEE_KINDS

#: How much of the testee's stderr a finding keeps (bytes, from the end).
STDERR_QUOTE = 3000

#: Error names of the suite's driver for a text that is not JSON (key.encoded.read): the
#: driver parses the text before the reference sees it, so these are plain rejections.
JSON_LAYER_ERRORS = (
    "raw:json.decoder.JSONDecodeError",
    "raw:builtins.RecursionError",
    "raw:builtins.ValueError",
)


def compare(op: str, ref: dict[str, Any], got: dict[str, Any]) -> str | None:
    """None when the testee's response agrees with the reference's, else what differs.

    Accepted inputs must give equal fields; rejected ones the same codec error, or an error
    of the operation's family (protocol, keys). A raw reference error is not compared: the
    reference's own fuzz check reports it."""
    got = {k: v for k, v in got.items() if k != "id"}
    ref_error = str(ref.get("error", ""))
    if not ref["ok"] and op == "key.encoded.read" and ref_error in JSON_LAYER_ERRORS:
        ref = {"ok": False, "error": "KeyFormatError"}
        ref_error = "KeyFormatError"
    if not ref["ok"] and ref_error.startswith(RAW_PREFIX):
        return None
    if got.get("error") in ("BadRequest", "UnsupportedOperation"):
        return f"testee answered {got['error']}\n{got.get('message')}"
    if ref["ok"] and got["ok"]:
        names = [n for n in sorted(set(ref) | set(got)) if ref.get(n) != got.get(n)]
        diffs = [f"{n}: reference {ref.get(n)!r}, C {got.get(n)!r}" for n in names]
        return f"fields {', '.join(names)} differ\n" + "; ".join(diffs)[:1500] if names else None
    if ref["ok"]:
        return f"reference accepts, C rejects with {got['error']}\n{got.get('message')}"
    if got["ok"]:
        return f"reference rejects with {ref_error}, C accepts\n{ref.get('message')}"
    family = op_family(op)
    if family is None:
        if got["error"] != ref_error:
            return f"reference raises {ref_error}, C raises {got['error']}"
        return None
    if family_of(str(got["error"])) != family:
        return f"C raises {got['error']}, not a {family} (reference: {ref_error})"
    return None


#: Disagreements whose resolution is an open SPEC question, each with the draft section that
#: states it. A matching input is counted under its name instead of as a failure, and the
#: count is reported; an entry is deleted when SPEC.md settles the question.
PENDING: dict[str, tuple[str, Callable[[str, dict[str, Any], dict[str, Any]], bool]]] = {
    "group-id-above-int64": (
        "KEY-GROUP-RANGE sets no upper bound; the C testee keeps object_group_id in int64 "
        "and refuses larger ids (spec-c-fuzz-findings.md, 'object_group_id has no bound')",
        lambda op, ref, got: (
            bool(ref.get("ok"))
            and not got.get("ok")
            and isinstance(ref.get("object_group_id"), int)
            and ref["object_group_id"] > 2**63 - 1
        ),
    ),
}


def pending_reason(op: str, ref: dict[str, Any], got: dict[str, Any]) -> str | None:
    """The PENDING entry a disagreement falls under, if any."""
    return next((name for name, (_, match) in PENDING.items() if match(op, ref, got)), None)


def answer_all(
    process: TesteeProcess, requests: list[dict[str, Any]]
) -> list[dict[str, Any] | TesteeFailure]:
    """One answer per request: its reply, or the failure of the request the testee died
    on, stalled on or answered badly; a fresh process takes the requests after it."""
    answers: list[dict[str, Any] | TesteeFailure] = []
    while len(answers) < len(requests):
        try:
            answers += process.exchange(requests[len(answers) :])
        except TesteeFailure as failure:
            answers += [*failure.answered, failure]
    return answers


def finding_detail(op: str, failure: TesteeFailure) -> str:
    """A testee failure as a finding's detail: what happened, then the stderr's tail."""
    tail = failure.stderr[-STDERR_QUOTE:]
    return f"{op}: {failure}\n{tail}" if tail else f"{op}: {failure}"


def as_sent(result: dict[str, Any]) -> dict[str, Any]:
    """The reference's result as the suite receives a testee's: through the wire encoding,
    so that what the wire cannot carry (see the findings draft: a list holding one empty
    string reads back as the empty list) is not reported as the testee's disagreement."""
    return wire.from_wire(wire.to_wire(result))


class Differential:
    """Buffers (input, request) pairs and compares reference and testee a batch at a time."""

    def __init__(
        self,
        reference: Driver,
        argv: list[str],
        env: Mapping[str, str] | None = None,
        batch: int = 256,
        timeout: float = 10.0,
    ) -> None:
        self.reference = reference
        self.process = TesteeProcess(argv, env=env, timeout=timeout)
        self.batch = batch
        self.buffer: list[tuple[bytes, str, dict[str, Any]]] = []
        self.compared = 0
        self.pending: dict[str, int] = {}

    def add(self, data: bytes, op: str, fields: dict[str, Any]) -> list[tuple[str, str, bytes]]:
        """Queue one input; returns the failures of a batch when one was run."""
        self.buffer.append((data, op, fields))
        return self.flush() if len(self.buffer) >= self.batch else []

    def flush(self) -> list[tuple[str, str, bytes]]:
        """Run the queued inputs; failures as (kind, detail, input)."""
        items, self.buffer = self.buffer, []
        if not items:
            return []
        answers = answer_all(self.process, [{"op": op, **fields} for _, op, fields in items])
        failures = []
        for (data, op, fields), answer in zip(items, answers, strict=True):
            self.compared += 1
            if isinstance(answer, TesteeFailure):
                failures.append((TESTEE_KINDS[answer.kind], finding_detail(op, answer), data))
                continue
            ref = as_sent(self.reference.call(op, **fields))
            problem = compare(op, ref, answer)
            if problem is None:
                continue
            known = pending_reason(op, ref, answer)
            if known is not None:
                self.pending[known] = self.pending.get(known, 0) + 1
                continue
            failures.append(("disagree", f"{op}: {problem}", data))
        return failures

    def close(self) -> None:
        self.process.close()
