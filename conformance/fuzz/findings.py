"""Failures found by the fuzzers: deduplicated by signature, each saved with its input.

A failure's signature is its target, its kind and the first line of its detail with numbers
blanked, so that one bug seen with many inputs is reported once (with the count and the
smallest input), while different bugs stay apart.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.testee_process import FailureKind

#: The finding kind of each way the C testee can fail a request.
TESTEE_KINDS = {
    FailureKind.CRASH: "c-crash",  # it died (sanitizer report, allocation cap, signal)
    FailureKind.TIMEOUT: "c-hang",  # it did not answer in time
    FailureKind.PROTOCOL: "c-protocol",  # it broke the stdio protocol
}

#: The kinds of property violation.
KINDS = (
    "escape",  # an exception outside the decoder's documented error classes
    "hang",  # one input took longer than the time bound
    "alloc",  # the decoder allocated more than the bound for the input's size
    "roundtrip",  # a valid input did not survive write-after-read, or an oracle failed
    "disagree",  # the reference and the C testee disagree on the input
    *TESTEE_KINDS.values(),
)

_NUMBERS = re.compile(r"\d+")


@dataclass(frozen=True)
class Failure:
    target: str
    kind: str
    detail: str
    data: bytes

    @property
    def signature(self) -> str:
        first = self.detail.splitlines()[0] if self.detail else ""
        return f"{self.target}|{self.kind}|{_NUMBERS.sub('#', first)[:160]}"


@dataclass
class Finding:
    """One signature: how often it was seen and the smallest input that shows it."""

    target: str
    kind: str
    detail: str
    count: int
    input_hex: str
    input_file: str | None


class Findings:
    """Collects failures of one worker; writes the smallest input of each signature."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.by_signature: dict[str, Finding] = {}
        self.total = 0

    def add(self, failure: Failure) -> None:
        self.total += 1
        known = self.by_signature.get(failure.signature)
        if known is not None:
            known.count += 1
            if len(failure.data) * 2 >= len(known.input_hex):
                return
        path = None
        if self.directory is not None:
            digest = hashlib.sha256(failure.data).hexdigest()[:16]
            folder = self.directory / failure.target
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{failure.kind}-{digest}.bin"
            path.write_bytes(failure.data)
        self.by_signature[failure.signature] = Finding(
            failure.target,
            failure.kind,
            failure.detail[:2000],
            known.count if known is not None else 1,
            failure.data.hex() if len(failure.data) <= 4096 else failure.data[:4096].hex(),
            str(path) if path is not None else None,
        )

    def as_json(self) -> list[dict[str, object]]:
        return [asdict(f) for f in self.by_signature.values()]


def dump(path: Path, payload: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n", encoding="utf-8")
