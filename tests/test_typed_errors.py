"""Typed means typed: a raw error is never the format's error family, for any implementation.

No verdict accepts ``raw:...`` as a typed error (conformance/core/error_names.py, matches),
and no driver maps a builtin exception to a family by its type: upstream's ValueErrors are
``raw:builtins.ValueError`` like anyone's, and there is no switch to say otherwise.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from upstream_required import upstream_missing

from lmckv.conformance.core.error_names import CODEC_ERRORS, FAMILIES, RAW_PREFIX, is_raw, matches
from lmckv.conformance.drivers.in_process import load_in_process
from lmckv.conformance.drivers.python_driver import PythonDriver

RAW = [
    "raw:builtins.ValueError",
    "raw:builtins.KeyError",
    "raw:struct.error",
    "raw:builtins.AssertionError",
    "raw:builtins.UnicodeDecodeError",
    "raw:testee-crash",
]


def _unicode_error() -> UnicodeDecodeError:
    return UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")


REPO = Path(__file__).resolve().parents[1]
BUILTIN_ERRORS: list[BaseException] = [
    ValueError("bad"),
    KeyError("bad"),
    struct.error("bad"),
    AssertionError("bad"),
    _unicode_error(),
]


@pytest.mark.parametrize("raw", RAW)
@pytest.mark.parametrize("expected", [*FAMILIES, *CODEC_ERRORS])
def test_a_raw_error_matches_no_typed_error(raw: str, expected: str) -> None:
    assert is_raw(raw)
    assert not matches(raw, expected)


@pytest.mark.parametrize("raw", RAW)
def test_a_raw_error_does_not_even_match_itself(raw: str) -> None:
    assert not matches(raw, raw)


def test_listing_a_raw_value_error_as_typed_is_impossible() -> None:
    assert matches("MalformedMessageError", "ProtocolError")
    assert not matches("raw:builtins.ValueError", "ProtocolError")
    assert not matches("raw:builtins.ValueError", "KeyFormatError")


def test_no_driver_can_be_configured_to_type_value_errors() -> None:
    params = inspect.signature(PythonDriver.__init__).parameters
    assert not [p for p in params if "typed" in p or "value_error" in p]
    with pytest.raises(TypeError):
        PythonDriver("x", None, None, None, value_error_is_typed=True)  # type: ignore[call-arg]


@pytest.mark.parametrize("op", ["proto.client.read", "key.cache.read", "key.fs.read"])
@pytest.mark.parametrize("exc", BUILTIN_ERRORS, ids=lambda e: type(e).__name__)
def test_the_reference_driver_reports_builtin_errors_as_raw(op: str, exc: BaseException) -> None:
    driver = load_in_process("reference")
    assert driver is not None
    got = driver.classify(exc, op)
    assert got == f"{RAW_PREFIX}{type(exc).__module__}.{type(exc).__qualname__}"
    assert not matches(got, "ProtocolError") and not matches(got, "KeyFormatError")


UPSTREAM_CLASSIFY = """
import struct, sys
from lmckv.conformance.drivers.in_process import load_in_process
driver = load_in_process("upstream")
errors = [ValueError("x"), KeyError("x"), struct.error("x"), AssertionError("x"),
          UnicodeDecodeError("utf-8", b"\\xff", 0, 1, "x")]
for op in ("proto.client.read", "proto.server.read", "key.cache.read", "key.s3.read"):
    for exc in errors:
        print(driver.classify(exc, op))
"""


def test_the_upstream_driver_reports_value_errors_as_raw() -> None:
    """In a subprocess: loading upstream stubs awscrt, which hypothesis's module scan trips on."""
    if importlib.util.find_spec("lmcache") is None:
        upstream_missing("lmcache is not installed")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "-c", UPSTREAM_CLASSIFY], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = out.stdout.split()
    assert len(got) == 20
    assert "raw:builtins.ValueError" in got
    assert all(is_raw(g) for g in got), got
