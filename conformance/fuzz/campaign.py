"""One target's campaign state: checks each input on the reference, feeds the differential
with the C testee, counts, and collects the findings (used by both engines and the tests)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..drivers.v1_reader import v1_reader
from .checks import Checker, Limits
from .decoders import Target
from .differential import Differential
from .findings import Failure, Findings


class Campaign:
    """Call it with each input; ``finish()`` returns the statistics."""

    def __init__(
        self,
        target: Target,
        limits: Limits | None = None,
        findings_dir: Path | None = None,
        c_argv: list[str] | None = None,
        c_env: dict[str, str] | None = None,
    ) -> None:
        """``c_argv`` starts the testee to compare with (None: the reference only)."""
        self.target = target
        self.limits = limits or Limits()
        self.checker = Checker(target, self.limits)
        self.findings = Findings(findings_dir)
        self.differential = None
        if c_argv is not None:
            # The C testee is a v1 reader (it does not declare codec.v2): it is compared with
            # the reference's v1-only reader, which refuses a v2 blob as it must.
            reference = v1_reader("reference")
            self.differential = Differential(reference, c_argv, c_env)
        self.inputs = 0
        self.accepted = 0
        self.started = time.monotonic()
        self.stats: dict[str, Any] | None = None

    def __call__(self, data: bytes) -> None:
        data = data[: self.target.max_len]
        self.inputs += 1
        verdict = self.checker(data)
        self.accepted += verdict.accepted
        if verdict.failure is not None:
            self.findings.add(verdict.failure)
        if self.differential is not None:
            request = self.target.request(data)
            if request is not None:
                for kind, detail, failed in self.differential.add(data, *request):
                    self.findings.add(Failure(self.target.name, kind, detail, failed))

    def finish(self) -> dict[str, Any]:
        """Compare what is still queued, stop the testee, and return the statistics."""
        if self.stats is not None:
            return self.stats
        compared, pending = 0, {}
        if self.differential is not None:
            for kind, detail, failed in self.differential.flush():
                self.findings.add(Failure(self.target.name, kind, detail, failed))
            compared, pending = self.differential.compared, dict(self.differential.pending)
            self.differential.close()
        self.stats = {
            "target": self.target.name,
            "inputs": self.inputs,
            "accepted": self.accepted,
            "c_compared": compared,
            "pending": pending,
            "seconds": round(time.monotonic() - self.started, 3),
            "failures": self.findings.total,
            "findings": self.findings.as_json(),
            "max_alloc_ratio": round(self.checker.max_alloc_ratio, 1),
            "alloc_every": self.limits.alloc_every,
        }
        return self.stats
