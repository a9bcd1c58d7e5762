"""The C testee (conformance/testees/c): strict build, the stdio protocol, answers equal to
the reference's, and a sanitizer build that survives mutated inputs."""

from __future__ import annotations

import multiprocessing
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lmckv.conformance.core import wire
from lmckv.conformance.core.error_names import CODEC_ERRORS, FAMILIES
from lmckv.conformance.core.golden_vectors import golden_file, vectors
from lmckv.conformance.core.operations import CAPABILITIES
from lmckv.conformance.core.testee_process import TesteeProcess
from lmckv.conformance.drivers.python_driver import PythonDriver, load_package
from lmckv.conformance.fuzz.decoders import TARGETS
from lmckv.conformance.fuzz.differential import answer_all, as_sent, compare
from lmckv.conformance.fuzz.mutate import Plan, expand
from lmckv.conformance.testees.c.build import (
    STRICT_FLAGS,
    BuildError,
    build_testee,
    compiler,
    flags,
    sanitizer_env,
    sanitizers_available,
)

#: Every canonical error name of TESTEE.md: the codec's three and both families' members.
ERROR_NAMES = set(CODEC_ERRORS).union(*FAMILIES.values())


def _need_cc() -> None:
    if shutil.which(compiler()) is None:
        pytest.skip(f"no C compiler {compiler()!r} on PATH: the C testee cannot be built")


@pytest.fixture(scope="module")
def binary() -> Path:
    _need_cc()
    return build_testee()


@pytest.fixture(scope="module")
def reference() -> PythonDriver:
    return load_package("lmckv.reference_impl", name="reference")


@pytest.fixture
def testee(binary: Path) -> Iterator[TesteeProcess]:
    with TesteeProcess([str(binary)], timeout=20) as proc:
        yield proc


def ask(testee: TesteeProcess, *requests: dict[str, Any]) -> list[Any]:
    """One answer per request: the reply, or the TesteeFailure of a request it failed."""
    return answer_all(testee, list(requests))


def test_build_is_strict_and_cached(binary: Path) -> None:
    """The testee compiles under -std=c99 -pedantic -Wall -Wextra -Werror, once per source
    hash."""
    assert {"-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror"} <= set(flags(False))
    assert binary.is_file() and binary.parent.parent.name == "build"
    mtime = binary.stat().st_mtime_ns
    assert build_testee() == binary
    assert binary.stat().st_mtime_ns == mtime


def _build_in(build_dir: str) -> int:
    """In a spawned process: build into ``build_dir``; the binary's mtime."""
    from lmckv.conformance.testees.c import build

    build.BUILD_DIR = Path(build_dir)
    return build.build_testee().stat().st_mtime_ns


def test_workers_that_all_find_the_binary_missing_build_it_once(tmp_path: Path) -> None:
    """pytest-xdist workers share the build folder: three processes asking for a build at
    the same moment must compile once (a second compile would replace the binary)."""
    _need_cc()
    # spawned: a fork of this (threaded) test process can wait forever on a lock one of its
    # threads held at the fork
    context = multiprocessing.get_context("spawn")
    with context.Pool(3) as pool:
        mtimes = pool.map(_build_in, [str(tmp_path / "build")] * 3)
    assert len(set(mtimes)) == 1


def test_strict_flags_turn_a_warning_into_an_error(tmp_path: Path) -> None:
    """-Werror is in effect: a source with an unused variable does not compile."""
    _need_cc()
    src = tmp_path / "warn.c"
    src.write_text("int main(void) { int unused; return 0; }\n")
    out = subprocess.run(
        [compiler(), *STRICT_FLAGS, "-c", str(src), "-o", str(tmp_path / "warn.o")],
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0 and "unused" in out.stderr


def test_build_error_names_the_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(BuildError, match="nonexistent"):
        build_testee()


def test_hello_declares_capabilities(testee: TesteeProcess) -> None:
    (hello,) = ask(testee, {"op": "hello", "protocol": 1})
    assert hello["ok"] and hello["name"] == "c" and hello["protocol"] == 1
    caps = set(hello["capabilities"])
    assert caps <= set(CAPABILITIES)
    assert {
        "codec.parse",
        "codec.hash_gate",
        "codec.decode",
        "proto.remote.read",
        "key.cache.read",
        "key.ipc",
    } <= caps
    assert {"codec.encode", "codec.dequant", "codec.encode_scales"} <= caps  # FP8 too


def _encode_request(scope: int, layout: str, **extra: Any) -> dict[str, Any]:
    """codec.encode of a [2, 2, 4, 8] float16 V (pages, heads, tokens, dim) whose values
    cover normals, subnormals and both signs."""
    v = ((np.arange(128, dtype=np.int64) * 1229) % 0xF800).astype("<u2").tobytes()
    fields: dict[str, Any] = {
        "k": v,
        "v": v,
        "dtype": "float16",
        "shape": [2, 2, 4, 8],
        "scale_scope": scope,
        "head_axis": 1,
        "page_axis": 0,
        "kv_head_count": 2,
        "head_dim": 8,
        "page_size": 4,
        "kv_layout": layout,
    }
    if "v_scales" in extra:
        extra["v_scales"] = np.array(extra["v_scales"], dtype="<f4").tobytes()
    return {**fields, **extra}


def _requests() -> list[tuple[str, dict[str, Any]]]:
    """A few requests of every family, valid and invalid, from the golden vectors."""
    codec = [v for v in vectors("codec") if "blob" in v]
    valid_blob = golden_file(next(v for v in codec if "header" in v["expected"])["blob"])
    bad_blob = golden_file(next(v for v in codec if "error" in v["expected"])["blob"])
    msg = golden_file(
        next(v for v in vectors("protocol") if v["op"] == "proto.client.read")["request"][
            "msg_file"
        ]
    )
    return [
        ("codec.parse", {"blob": valid_blob}),
        ("codec.parse", {"blob": valid_blob, "expect_model_id": "another-model"}),
        ("codec.parse", {"blob": bad_blob}),
        ("codec.parse", {"blob": valid_blob + b"\0", "allow_trailing": True}),
        ("codec.decode", {"blob": valid_blob, "out_v_dtype": None}),
        ("codec.decode", {"blob": valid_blob, "out_v_dtype": "bfloat16"}),
        ("codec.decode", {"blob": valid_blob, "out_v_dtype": "float32"}),
        ("codec.decode", {"blob": valid_blob, "out_v_dtype": "int8"}),
        ("codec.encode", _encode_request(1, "HND")),
        ("codec.encode", _encode_request(3, "NHD", v_scales=[0.5, 2.0], scales_shape=[2, 1, 1])),
        ("codec.encode", _encode_request(2, "NHD", head_axis=-1)),
        ("proto.client.read", {"msg": msg}),
        ("proto.client.read", {"msg": msg[:-1]}),
        (
            "proto.server.write",
            {
                "code": 200,
                "length": 9,
                "fmt": 4,
                "dtype": "float16",
                "location": "LocalDiskBackend",
                "shape": [9],
            },
        ),
        ("proto.remote.read", {"num_groups": 2, "msg": bytes(48) + b"payload"}),
        ("key.cache.read", {"key": "org/m@4@1@00abc@half@7@tag%v%w"}),
        (
            "key.cache.write",
            {
                "model_name": "a@b",
                "world_size": 1,
                "worker_id": 0,
                "chunk_hash_int": "5",
                "dtype": "float16",
                "layer_id": None,
                "tag_names": [],
                "tag_values": [],
            },
        ),
        (
            "key.kv_rank",
            {"world_size": 8, "global_rank": 256, "local_world_size": 4, "local_rank": 1},
        ),
        ("key.s3.read", {"object_name": "m/x@08050401@1f@00ff@salt"}),
        ("key.fs.read", {"filename": "m-SEP-x@0x08050401@1f@00ff@salt.data"}),
        ("key.fs.read", {"filename": "m@0X08050401@1f@00ff.data"}),
        (
            "key.encoded.read",
            {
                "json_text": '{"chunk_hash_hex": "00ff", "model_name": "m", '
                '"kv_rank": 5, "kv_rank": 6}'
            },
        ),
        (
            "key.ipc",
            {
                "model_name": "m",
                "world_size": 3,
                "worker_id": None,
                "cache_salt": "s",
                "chunk_hashes": [b"\1", b"\2"],
                "object_group_ids": [0, 4],
            },
        ),
    ]


def test_answers_match_the_reference(testee: TesteeProcess, reference: PythonDriver) -> None:
    requests = _requests()
    answers = ask(testee, *({"op": op, **fields} for op, fields in requests))
    for (op, fields), got in zip(requests, answers, strict=True):
        assert isinstance(got, dict), f"{op}: testee failed: {got}"
        expected = as_sent(reference.call(op, **fields))
        assert got["ok"] == expected["ok"], f"{op} {fields}: {got} vs {expected}"
        assert compare(op, expected, got) is None, f"{op} {fields}: {got} vs {expected}"


def test_protocol_errors(testee: TesteeProcess) -> None:
    unknown, missing, no_dtype = ask(
        testee,
        {"op": "key.window", "windows": [1], "object_group_id": 0},
        {"op": "key.s3.read"},
        {"op": "codec.encode", "k": b"", "v": b""},
    )
    assert unknown["error"] == "UnsupportedOperation"
    assert missing["ok"] is False and missing["error"] == "BadRequest"
    assert no_dtype["ok"] is False and no_dtype["error"] == "BadRequest"


def test_unreadable_line_is_a_bad_request(binary: Path) -> None:
    """A line that is not JSON is answered BadRequest with a null id (the client never
    sends one, so this speaks to the testee directly)."""
    out = subprocess.run(
        [str(binary)], input=b"this is not json\n", capture_output=True, timeout=20, check=True
    )
    garbage = wire.loads_line(out.stdout.decode("utf-8"))
    assert garbage["ok"] is False and garbage["error"] == "BadRequest" and garbage["id"] is None


def test_large_request_line(testee: TesteeProcess, reference: PythonDriver) -> None:
    """A 1 MiB blob (2 MiB of hex on one line) is read and answered like any other."""
    blob = bytes(range(256)) * 4096
    (got,) = ask(testee, {"op": "codec.parse", "blob": blob})
    assert got["error"] == "CorruptEncodedKVError"


def _mutants(count: int) -> list[tuple[str, dict[str, Any]]]:
    out = []
    names = sorted(TARGETS)
    r = random.Random(20240611)
    for i in range(count):
        target = TARGETS[names[i % len(names)]]
        corpus = target.seeds()
        ops = tuple(
            r.choice(
                [
                    "flip",
                    "byte",
                    "insert",
                    "delete",
                    "truncate",
                    "field",
                    "token",
                    "splice",
                    "duplicate",
                ]
            )
            for _ in range(r.randint(1, 4))
        )
        plan = Plan(
            r.randrange(len(corpus)),
            r.randrange(len(corpus)),
            ops,
            r.random() < 0.5,
            r.randrange(2**32),
        )
        (data,) = expand(plan, corpus, target, 1)
        request = target.request(data)
        if request is not None:
            out.append(request)
    return out


def test_sanitized_build_survives_mutated_inputs() -> None:
    """Under AddressSanitizer and UndefinedBehaviorSanitizer (any report aborts), a few
    hundred mutated golden inputs of every decoder get a typed answer each."""
    _need_cc()
    reason = sanitizers_available()
    if reason is not None:
        pytest.skip(f"no sanitizer build here: {reason}")
    requests = _mutants(400)
    argv = [str(build_testee(sanitize=True))]
    with TesteeProcess(argv, env=sanitizer_env(), timeout=30) as proc:
        answers = ask(proc, *({"op": op, **fields} for op, fields in requests))
    for (op, _), got in zip(requests, answers, strict=True):
        assert isinstance(got, dict), f"{op}: {got.kind.value}: {got}\n{got.stderr}"
        assert got["ok"] or got["error"] in ERROR_NAMES, f"{op}: {got}"
