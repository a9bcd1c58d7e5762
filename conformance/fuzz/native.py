"""Native coverage-guided fuzzing of the C testee's decoders with libFuzzer (clang only).

The harness (conformance/testees/c/fuzz/lk_fuzz_decoders.c) picks a decoder with the first
input byte: 0 blob, 1 ClientMetaMessage, 2 RemoteMetadata/ServerMetaMessage, 3 key strings,
4 JSON. Seeds are the Python targets' seeds with that byte in front. libFuzzer stops at the
first crash (sanitizer report, allocation cap, failed self-check) and writes the input under
``findings/c.decoders/``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ..core.testee_process import FailureKind
from .decoders import TARGETS
from .findings import TESTEE_KINDS

NAME = "c.decoders"

#: Which harness decoder reads each Python target's seeds (flag bytes removed first).
SEED_ROUTES = {
    "codec.deserialize_header": (0, 1),
    "proto.client": (1, 0),
    "proto.server": (2, 0),
    "proto.remote": (2, 0),
    "key.cache": (3, 0),
    "key.s3": (3, 0),
    "key.fs": (3, 0),
    "key.encoded": (4, 0),
}
_DONE = re.compile(rb"Done (\d+) runs in (\d+) second")


def available() -> str | None:
    """None when the libFuzzer binary builds here, else why not."""
    from ..testees.c.build import BuildError, build_libfuzzer

    try:
        build_libfuzzer()
    except BuildError as exc:
        return str(exc).splitlines()[0]
    return None


def run(seconds: float, runs: int, out: Path) -> dict[str, Any]:
    """One libFuzzer campaign; the statistics in the workers' format."""
    from ..testees.c.build import build_libfuzzer

    binary = build_libfuzzer()
    findings = out / "findings" / NAME
    shutil.rmtree(findings, ignore_errors=True)
    findings.mkdir(parents=True)
    log = out / "logs" / f"{NAME}.log"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lmckv-libfuzzer-") as tmp:
        corpus, seeds = Path(tmp) / "corpus", Path(tmp) / "seeds"
        corpus.mkdir()
        seeds.mkdir()
        count = 0
        for name, (route, skip) in SEED_ROUTES.items():
            for seed in TARGETS[name].seeds():
                (seeds / f"{count:05d}").write_bytes(bytes([route]) + seed[skip:])
                count += 1
        cmd = [
            str(binary),
            str(corpus),
            str(seeds),
            f"-max_total_time={max(1, int(seconds))}",
            f"-runs={runs}",
            "-max_len=8192",
            f"-artifact_prefix={findings}/",
            "-print_final_stats=1",
        ]
        with log.open("wb") as f:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=seconds + 300)
    text = log.read_bytes()
    done = _DONE.search(text)
    executed = re.search(rb"stat::number_of_executed_units:\s*(\d+)", text)
    inputs = int(done.group(1)) if done else int(executed.group(1)) if executed else 0
    crashes = sorted(p for p in findings.iterdir() if p.is_file())
    failures = len(crashes) or (0 if proc.returncode == 0 else 1)
    return {
        "target": NAME,
        "engine": "libfuzzer",
        "inputs": inputs,
        "failures": failures,
        "seconds": round(time.monotonic() - started, 3),
        "c_compared": 0,
        "findings": [
            {
                "kind": TESTEE_KINDS[FailureKind.CRASH],
                "detail": f"libFuzzer artifact {p.name}; see {log}",
                "count": 1,
                "input_hex": p.read_bytes()[:4096].hex(),
                "input_file": str(p),
            }
            for p in crashes
        ],
        "pending": {},
    }
