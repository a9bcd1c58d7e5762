"""The installed tool, away from the checkout: build the wheel, install it into a fresh venv
(no system site-packages) and use it from an empty folder, as another project's CI would.

Set ``LMCKV_WHEEL`` to the path of a wheel already built (``nox -s dist`` builds one) to skip
the build, and ``LMCKV_PREINSTALLED_SITE`` to a site-packages folder that already holds torch
and the test extra's packages (``nox -s dist`` passes the shared environment of
``nox -s machine_deps``): the venv then sees it through a ``.pth`` file instead of copying
torch in again, and pip resolves the wheel's dependencies against it. Marked ``slow`` (about
two minutes on 2 cores); CI runs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TORCH_PIN = "torch==2.13.0"

#: The ten-line testee of README.md ("Implementers"): declares no operation, so every
#: test skips naming the capability, and the run is clean.
TESTEE = textwrap.dedent(
    """\
    #!/usr/bin/env python3
    import json, sys

    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "hello":
            reply = {"ok": True, "name": "tiny", "version": "0.0.1", "protocol": 1,
                     "capabilities": []}
        else:
            reply = {"ok": False, "error": "UnsupportedOperation"}
        print(json.dumps({"id": req["id"], **reply}), flush=True)
    """
)


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    """Run, fail with the output on a non-zero exit, return the output."""
    out = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    text = out.stdout + out.stderr
    assert out.returncode == 0, f"{' '.join(argv)} exited {out.returncode}:\n{text[-4000:]}"
    return text


@pytest.fixture(scope="module")
def clean_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """This environment without anything that points into the checkout or this venv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory, clean_env: dict[str, str]) -> Path:
    given = os.environ.get("LMCKV_WHEEL")
    if given:
        return Path(given).resolve()
    pytest.importorskip("build", reason="python -m build is needed (the 'dist' extra)")
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--wheel", "-o", str(out), str(REPO)], REPO, clean_env)
    (built,) = out.glob("lmckv-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path, clean_env: dict[str, str]) -> Path:
    """A fresh venv holding torch and the wheel with its [test] extra; its bin folder."""
    root = tmp_path_factory.mktemp("venv") / "v"
    _run([sys.executable, "-m", "venv", str(root)], root.parent, clean_env)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-q"]
    preinstalled = os.environ.get("LMCKV_PREINSTALLED_SITE")
    if preinstalled:
        (site,) = (root / "lib").glob("python3*/site-packages")
        (site / "lmckv-preinstalled.pth").write_text(f"{Path(preinstalled).resolve()}\n")
    else:
        _run([*pip, TORCH_PIN], root.parent, clean_env)
    _run([*pip, f"{wheel}[test]"], root.parent, clean_env)
    return root / "bin"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty folder outside any checkout (pytest's tmp_path is under /tmp)."""
    assert not (tmp_path / "pyproject.toml").exists()
    return tmp_path


def test_the_wheel_installs_one_top_level_name(wheel: Path) -> None:
    """Installed code lives under ``lmckv`` only: the wheel's top_level.txt names it alone
    and every file it installs (RECORD) is under ``lmckv/`` or its dist-info folder, so no
    ``conformance``, ``bench`` or ``reports`` package can shadow a user's own."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert archive.read(top_level).decode().split() == ["lmckv"]
        (record,) = [n for n in names if n.endswith(".dist-info/RECORD")]
        recorded = [line.split(",")[0] for line in archive.read(record).decode().splitlines()]
    roots = {path.split("/")[0] for path in recorded}
    assert roots == {"lmckv", top_level.split("/")[0]}, roots
    assert "lmckv/conformance/suite/test_codec_read.py" in recorded
    assert "lmckv/golden_blobs/v1/codec.json" in recorded


def test_the_venv_sees_only_the_wheel(venv: Path, workdir: Path, clean_env: dict[str, str]) -> None:
    probe = (
        "import lmckv.conformance as c, importlib.resources as r;"
        "print(c.__file__);"
        "print(sorted(p.name for p in r.files('lmckv.golden_blobs').joinpath('v1').iterdir()"
        " if p.name.endswith('.json')))"
    )
    text = _run([str(venv / "python"), "-c", probe], workdir, clean_env)
    assert "site-packages" in text and str(REPO) not in text
    assert "['codec.json', 'keys.json', 'protocol.json']" in text


@pytest.mark.parametrize(
    "name", ["conformance", "bench", "reports", "reference_impl", "golden_blobs"]
)
def test_no_generic_top_level_name(
    venv: Path, workdir: Path, clean_env: dict[str, str], name: str
) -> None:
    """``import bench`` (and the other folder names) fails where only the wheel is installed."""
    out = subprocess.run(
        [str(venv / "python"), "-c", f"import {name}"],
        cwd=workdir, env=clean_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0 and "ModuleNotFoundError" in out.stderr, out.stderr


def test_lmckv_conformance_reference(venv: Path, workdir: Path, clean_env: dict[str, str]) -> None:
    """``lmckv conformance --impl reference`` passes and writes its results where asked."""
    help_text = _run([str(venv / "lmckv"), "conformance", "--help"], workdir, clean_env)
    if "--out" in help_text:
        outputs = ["--out", "out"]
        expected = ["out"]
    else:  # the command passes pytest's own options through
        outputs = ["--results-json", "results.json", "--junitxml", "junit.xml"]
        expected = ["results.json", "junit.xml"]
    _run(
        [str(venv / "lmckv"), "conformance", "--impl", "reference", "-n", "2", *outputs],
        workdir,
        clean_env,
    )
    for name in expected:
        assert (workdir / name).exists(), f"{name} not written in {sorted(os.listdir(workdir))}"
    if "--out" in help_text:
        written = {p.suffix for p in (workdir / "out").rglob("*")}
        assert {".json", ".xml"} <= written, written


def test_pytest_pyargs(venv: Path, workdir: Path, clean_env: dict[str, str]) -> None:
    """``pytest --pyargs lmckv.conformance``: the pytest11 entry point supplies --impl (the
    codec-read tests: the whole suite from the wheel is ``test_lmckv_conformance_reference``)."""
    text = _run(
        [str(venv / "python"), "-m", "pytest", "--pyargs", "lmckv.conformance",
         "--impl", "reference", "-q", "-p", "no:cacheprovider", "-k", "test_codec_read"],
        workdir,
        clean_env,
    )  # fmt: skip
    assert " passed" in text and "failed" not in text, text[-2000:]


def test_golden_check_and_c_testee(venv: Path, workdir: Path, clean_env: dict[str, str]) -> None:
    """The packaged golden vectors match the generator; the C testee builds into the user
    cache, not into site-packages."""
    python = str(venv / "python")
    _run([python, "-m", "lmckv.conformance.golden", "--check"], workdir, clean_env)
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler: the C testee build is not checked")
    binary = Path(_run([python, "-m", "lmckv.conformance.testees.c"], workdir, clean_env).strip())
    assert binary.is_relative_to(clean_env["XDG_CACHE_HOME"]), binary
    site = next((venv.parent / "lib").glob("python3*/site-packages"))
    assert not (site / "lmckv" / "conformance" / "testees" / "c" / "build").exists()


def test_exec_testee_in_the_callers_folder(
    venv: Path, workdir: Path, clean_env: dict[str, str]
) -> None:
    """``--impl exec:./t.py`` runs a testee found relative to the caller's folder."""
    script = workdir / "t.py"
    script.write_text(TESTEE, encoding="utf-8")
    script.chmod(0o755)
    argv = [str(venv / "lmckv"), "conformance", "--impl", "exec:./t.py"]
    out = subprocess.run(
        [*argv, "-q"], cwd=workdir, env=clean_env, capture_output=True, text=True, timeout=300
    )
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-4000:]
    assert "skipped" in text
