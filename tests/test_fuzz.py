"""The fuzzing harness (conformance/fuzz): every target runs clean on a few thousand inputs,
and each property catches a bug injected on purpose."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from lmckv.conformance.drivers.python_driver import load_package
from lmckv.conformance.fuzz import mutate
from lmckv.conformance.fuzz.campaign import Campaign
from lmckv.conformance.fuzz.checks import Limits
from lmckv.conformance.fuzz.decoders import TARGETS, RoundTripError, Target
from lmckv.conformance.fuzz.differential import Differential
from lmckv.conformance.testees.c.build import build_testee, compiler

REPO = Path(__file__).resolve().parents[1]


DECODERS = {
    "codec.deserialize_header",
    "codec.from_bytes",
    "codec.decode",
    "proto.client",
    "proto.server",
    "proto.remote",
    "key.cache",
    "key.s3",
    "key.fs",
    "key.encoded",
    "proto.server.connection",  # not a decoder: the server's connection handler
    "json.untrusted",  # the one JSON reader for peers and files
    "store.resp-replies",  # what fsck makes of a RESP server's replies
    "store.s3-listing",  # what fsck makes of an S3 listing
    "model.safetensors-header",  # a model folder's weights header
}


@pytest.fixture(scope="module")
def c_argv() -> list[str] | None:
    if shutil.which(compiler()) is None:
        return None
    return [str(build_testee())]


def _run(target: Target, runs: int, limits: Limits | None = None, **kw: Any) -> dict[str, Any]:
    campaign = Campaign(target, limits or Limits(alloc_every=4), **kw)
    deadline = time.monotonic() + 60
    done = mutate.campaign(target, target.seeds(), campaign, runs, deadline, per_plan=8, seed=3)
    stats = campaign.finish()
    assert done == runs == stats["inputs"]
    return stats


def _kinds(stats: dict[str, Any]) -> set[tuple[str, str]]:
    return {(f["kind"], f["detail"].splitlines()[0]) for f in stats["findings"]}


def test_every_decoder_is_a_target() -> None:
    assert set(TARGETS) == DECODERS
    for target in TARGETS.values():
        assert target.seeds(), f"{target.name} has no seeds"
        assert all(len(s) <= target.max_len for s in target.seeds()) or target.max_len >= 4096


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_target_runs_clean(name: str, c_argv: list[str] | None) -> None:
    """2000 mutated golden inputs: no escaping exception, hang, oversized allocation, failed
    round trip or disagreement with the C testee."""
    target = TARGETS[name]
    stats = _run(target, 2000, c_argv=c_argv)
    if c_argv is not None and target.request(target.seeds()[0]) is not None:
        assert stats["c_compared"] == 2000
    assert stats["findings"] == [], json.dumps(stats["findings"], indent=1)[:3000]
    assert stats["accepted"] > 0, "no mutant was valid: the oracles were never exercised"


def _injected(base: str, **changes: Any) -> Target:
    return dataclasses.replace(TARGETS[base], name=f"{base}-injected", **changes)


def test_detects_an_escaping_exception() -> None:
    base = TARGETS["key.s3"].run

    def run(data: bytes) -> Any:
        if data.count(b"@") == 3:
            raise KeyError(data[:4])
        return base(data)

    stats = _run(_injected("key.s3", run=run), 300)
    assert ("escape", "builtins.KeyError") in _kinds(stats)


def test_detects_a_hang() -> None:
    base = TARGETS["proto.server"].run

    def run(data: bytes) -> Any:
        if data[:1] == b"\xc8":  # code 200
            time.sleep(5)
        return base(data)

    stats = _run(_injected("proto.server", run=run), 200, Limits(seconds_per_input=0.05))
    assert any(kind == "hang" for kind, _ in _kinds(stats))
    assert stats["seconds"] < 30, "the time bound did not interrupt the sleeping input"


def test_detects_an_oversized_allocation() -> None:
    base = TARGETS["proto.client"].run

    def run(data: bytes) -> Any:
        if len(data) > 100:
            bytearray(64 * 1024 * 1024)
        return base(data)

    # 40 inputs (seeded): the first over 100 bytes comes well within them.
    stats = _run(_injected("proto.client", run=run), 40, Limits(alloc_every=1))
    assert any(kind == "alloc" for kind, _ in _kinds(stats))


def test_a_cost_paid_once_per_process_is_no_oversized_allocation() -> None:
    """The first non-seed input of a campaign pays a one-time 64 MiB (as a numba kernel's first
    compile for a signature does): measured again, it is within the bound, not a finding."""
    target = TARGETS["proto.client"]
    seeds = set(target.seeds())
    paid: list[bytearray] = []

    def run(data: bytes) -> Any:
        if data not in seeds and not paid:
            paid.append(bytearray(64 * 1024 * 1024))
        return target.run(data)

    stats = _run(_injected("proto.client", run=run), 200, Limits(alloc_every=1))
    assert paid and not any(kind == "alloc" for kind, _ in _kinds(stats))


def test_detects_a_failed_round_trip() -> None:
    def check(data: bytes, key: Any) -> None:
        if key.model_name:
            raise RoundTripError("a named model does not round-trip")

    stats = _run(_injected("key.s3", check=check), 300)
    assert ("roundtrip", "a named model does not round-trip") in _kinds(stats)


FAKE_TESTEE = textwrap.dedent(
    """
    import json, sys, time
    for line in sys.stdin:
        req = json.loads(line)
        name = bytes.fromhex(req.get("object_name", "")).decode("utf-8", "surrogatepass")
        if "crash" in name:
            sys.exit(3)
        if "stall" in name:
            time.sleep(60)
        reply = {"id": req["id"], "ok": False, "error": "MalformedObjectKeyStringError"}
        print(json.dumps(reply), flush=True)
    """
)


def test_detects_disagreement_crash_and_hang(tmp_path: Path) -> None:
    """A testee that rejects everything disagrees on valid names; one that dies or stalls
    on an input is charged with exactly that input, and the rest of the batch still runs."""
    script = tmp_path / "fake_testee.py"
    script.write_text(FAKE_TESTEE)
    diff = Differential(
        load_package("lmckv.reference_impl", name="reference"),
        [sys.executable, str(script)],
        batch=8,
        timeout=2,
    )
    names = [
        b"m@00000001@0@00",
        b"crash@00000001@0@00",
        b"x@zz",
        b"stall@00000001@0@00",
        b"bad",
        b"n@00000002@1@ff",
    ]
    failures = []
    for name in names:
        failures += diff.add(name, "key.s3.read", {"object_name": name.decode()})
    failures += diff.flush()
    diff.close()
    by_input = {data: kind for kind, _, data in failures}
    assert by_input == {
        b"m@00000001@0@00": "disagree",
        b"crash@00000001@0@00": "c-crash",
        b"stall@00000001@0@00": "c-hang",
        b"n@00000002@1@ff": "disagree",
    }
    assert diff.compared == len(names)


def test_cli_prints_one_line_per_target(tmp_path: Path) -> None:
    """Both engines (atheris and mutation) run through the command line; the output has the
    agreed line per target and summary.json records inputs per second."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "lmckv.conformance.fuzz",
            "--seconds",
            "20",
            "--runs",
            "600",
            "--target",
            "proto.server",
            "--out",
            str(tmp_path),
            "--jobs",
            "2",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert re.fullmatch(r"proto\.server: 600 inputs, 0 failures\n", out.stdout), out.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    entry = summary["targets"]["proto.server"]
    assert set(entry["engines"]) == {"atheris", "mutate"}
    assert entry["inputs_per_second"] > 0


def test_native_libfuzzer_campaign(tmp_path: Path) -> None:
    """Where clang is installed, the C decoders also run under libFuzzer (ASan+UBSan, the
    arena's cap and the writers' self-checks): a short campaign finds nothing."""
    from lmckv.conformance.fuzz import native

    reason = native.available()
    if reason is not None:
        pytest.skip(f"no libFuzzer build here: {reason}")
    (tmp_path / "logs").mkdir()
    stats = native.run(5, 200_000, tmp_path)
    assert stats["inputs"] > 1000
    assert stats["failures"] == 0, stats["findings"]


def test_the_store_reply_targets_hold_fsck_to_its_errors() -> None:
    """The RESP and S3 targets drive fsck's sources over what a server sends: a listing
    whose Size is no number (botocore raises ValueError) and replies cut short are the
    store's error, never another exception."""
    from lmckv.conformance.fuzz import store_replies
    from lmckv.conformance.store.sources import StoreUnreachable

    size_text = (
        b"<ListBucketResult><Contents><Key>a</Key><Size>zz</Size></Contents></ListBucketResult>"
    )
    for run, data in (
        (store_replies.run_s3, size_text),
        (store_replies.run_s3, b"<ListBucketResult><Contents>"),
        (store_replies.run_resp, b"*2\r\n$1\r\nx\r\n*0\r\n"),  # a cursor that is no number
        (store_replies.run_resp, b""),  # the server closed at once
    ):
        with pytest.raises(StoreUnreachable):
            run(data)
    assert [e.size for e in store_replies.run_resp(store_replies.RESP_SEEDS[0])] == [16]
