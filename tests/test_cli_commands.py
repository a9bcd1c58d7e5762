"""The ``lmckv`` command itself: version, help, lazy imports, the handed-over subcommands and
the one-line message for a missing extra."""

from __future__ import annotations

import importlib.metadata
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lmckv.cli import COMMANDS, main, version
from lmckv.extras import missing_extra_message

REPO = Path(__file__).resolve().parents[1]
REST_MARKUP = ("``", ":func:", ":mod:", ":class:", "python -m")


def _python(code: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_version(capsys) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"lmckv {version()}\n"
    assert version() == importlib.metadata.version("lmckv")


def test_version_when_not_installed(monkeypatch) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert version() == "unknown"


def test_help_lists_every_subcommand_in_plain_text(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: lmckv ")
    for name in COMMANDS:
        assert f"\n    {name}" in out
    assert not [m for m in REST_MARKUP if m in out]


@pytest.mark.parametrize("command", ["bench", "report", "golden", "fuzz"])
def test_subcommand_help_names_lmckv_in_plain_text(command, capsys) -> None:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: lmckv {command} ")
    assert not [m for m in REST_MARKUP if m in out]


def test_help_loads_no_heavy_module() -> None:
    done = _python(
        "import contextlib, io, sys\n"
        "from lmckv.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['--help'])\n"
        "heavy = ('torch', 'numpy', 'pandas', 'matplotlib', 'pytest', 'reference_impl', 'bench')\n"
        "print(code, [m for m in heavy if m in sys.modules])\n"
    )
    assert done.stdout == "0 []\n", done.stderr


def test_help_is_fast() -> None:
    """Well under a second on a 2-core machine; the bound leaves room for a loaded CI runner."""
    walls = []
    for _ in range(3):
        start = time.perf_counter()
        done = _python("import sys; from lmckv.cli import main; sys.exit(main(['--help']))")
        walls.append(time.perf_counter() - start)
        assert done.returncode == 0, done.stderr
    assert statistics.median(walls) < 2.0, walls


@pytest.mark.parametrize(
    ("argv", "module", "extra"),
    [
        (["report", "results.json", "--out", "out"], "pandas", "bench"),
        (["report", "--help"], "matplotlib", "bench"),
        (["conformance", "-q"], "pytest", "test"),
    ],
)
def test_missing_extra_is_one_line(argv, module, extra, tmp_path) -> None:
    done = _python(
        f"import sys; sys.modules[{module!r}] = None\n"
        f"from lmckv.cli import main; sys.exit(main({argv!r}))\n",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"lmckv {argv[0]}: needs the '{extra}' extra: "
        f"pip install 'lmckv[{extra}]' (missing module {module})\n"
    )
    assert done.stdout == ""


def test_missing_extra_message_names_the_top_level_module() -> None:
    error = ModuleNotFoundError("No module named 'atheris.x'", name="atheris.x")
    assert missing_extra_message("fuzz", error) == (
        "lmckv fuzz: needs the 'fuzz' extra: pip install 'lmckv[fuzz]' (missing module atheris)"
    )


def test_a_missing_required_module_is_not_hidden() -> None:
    assert missing_extra_message("bench", ModuleNotFoundError(name="torch")) is None


@pytest.mark.parametrize(("pytest_code", "code"), [(0, 0), (1, 1), (2, 2), (3, 2), (4, 2), (5, 2)])
def test_conformance_passes_arguments_and_maps_pytest_exit(
    monkeypatch, tmp_path, pytest_code, code
) -> None:
    calls: list[list[str]] = []

    def fake_main(args: list[str], plugins: object = None) -> int:
        calls.append(args)
        return pytest_code

    monkeypatch.setattr(pytest, "main", fake_main)
    monkeypatch.chdir(tmp_path)
    assert main(["conformance", "--impl", "c", "-x", "--out", "o"]) == code
    suite = str(REPO / "conformance")
    out = tmp_path / "o"
    assert calls == [
        [
            suite,
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            "--impl",
            "c",
            "-x",
            f"--junitxml={out / 'junit.xml'}",
            f"--results-json={out / 'results.json'}",
            f"--summary-md={out / 'summary.md'}",
        ]
    ]


def test_conformance_runs_the_suite_and_writes_no_cache(tmp_path) -> None:
    done = _python(
        "import sys; from lmckv.cli import main\n"
        "sys.exit(main(['conformance', '-q', '--impl', 'reference', '-k', 'test_keys']))\n",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert " passed" in done.stdout
    assert list(tmp_path.iterdir()) == [tmp_path / "lmckv-conformance"]  # --out's default
    written = sorted(p.name for p in (tmp_path / "lmckv-conformance").iterdir())
    assert written == ["junit.xml", "results.json", "summary.md"]
    assert not (REPO / "conformance" / ".pytest_cache").exists()


def test_conformance_usage_error_is_2(tmp_path) -> None:
    done = _python(
        "import sys; from lmckv.cli import main\n"
        "sys.exit(main(['conformance', '--no-such-option']))\n",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "unrecognized arguments: --no-such-option" in done.stderr
