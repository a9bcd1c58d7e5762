"""Drivers that survive releases: what a release lacks is an undeclared capability with its
reason (a skip), never a setup error, an import crash or an INTERNALERROR; a version
without a list of its own names the list it uses.

The suite runs here start pytest in a child process whose first lines simulate the release
(a removed helper, a missing module, a tagless version string) before the plugin loads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from upstream_required import upstream_missing

from lmckv.conformance.runner.known_failures import load, upstream_list_path, upstream_versions

#: Seconds one child suite run may take (a narrowed selection: a few seconds normally).
RUN_TIMEOUT = 240


def _lmcache() -> None:
    try:
        import lmcache.v1.distributed.l2_adapters.fs_l2_adapter  # noqa: F401
    except ImportError as exc:
        upstream_missing(f"lmcache is not installed: {exc}")


def _run_suite(prelude: str, args: list[str], tmp_path: Path) -> tuple[int, str, dict]:
    """pytest on the suite in a child process that runs ``prelude`` first; (exit status,
    output, results document)."""
    results = tmp_path / "results.json"
    argv = ["--pyargs", "lmckv.conformance", "-p", "no:cacheprovider", "-p", "no:xdist"]
    argv += ["-q", "-rs", f"--results-json={results}", *args]
    code = textwrap.dedent(prelude) + f"\nimport sys, pytest\nsys.exit(pytest.main({argv!r}))\n"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        cwd=tmp_path,
    )
    document = json.loads(results.read_text()) if results.is_file() else {}
    return done.returncode, done.stdout + done.stderr, document


# -- a private helper that moved ---------------------------------------------------------

REMOVE_FS_HELPERS = """
import lmckv.conformance.drivers.upstream_driver as ud
ud._stub_awscrt()
import lmcache.v1.distributed.l2_adapters.fs_l2_adapter as fs
del fs._object_key_to_filename, fs._filename_to_object_key
"""


def test_a_removed_fs_helper_is_an_undeclared_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    _lmcache()
    from lmckv.conformance.drivers import upstream_driver

    upstream_driver._stub_awscrt()
    import lmcache.v1.distributed.l2_adapters.fs_l2_adapter as fs

    monkeypatch.delattr(fs, "_object_key_to_filename")
    monkeypatch.delattr(fs, "_filename_to_object_key")
    driver = upstream_driver.load_upstream()
    assert "key.fs.write" not in driver.info.capabilities
    assert "key.fs.read" not in driver.info.capabilities
    assert "key.s3.write" in driver.info.capabilities  # the other forms are still there
    assert driver.unsupported_reason("key.fs.write").endswith(
        f"lmcache {driver.info.version} has no object_key_to_filename"
    )


def test_the_public_key_codec_is_preferred(monkeypatch: pytest.MonkeyPatch) -> None:
    """A release with ``fs_key_codec`` (newer upstream) is driven through it, not through
    the adapter's private helper."""
    _lmcache()
    from lmckv.conformance.drivers import upstream_driver

    public = types.ModuleType("lmcache.v1.distributed.l2_adapters.fs_key_codec")

    def object_key_to_filename(key: object) -> str:
        return "public"

    def filename_to_object_key(name: str) -> None:
        return None

    vars(public).update(
        object_key_to_filename=object_key_to_filename,
        filename_to_object_key=filename_to_object_key,
    )
    monkeypatch.setitem(sys.modules, public.__name__, public)
    keys = upstream_driver.key_namespace()
    assert keys.object_key_to_filename is object_key_to_filename
    assert keys.filename_to_object_key is filename_to_object_key


def test_a_run_without_the_fs_helper_is_green_and_says_why(tmp_path: Path) -> None:
    _lmcache()
    status, output, document = _run_suite(
        REMOVE_FS_HELPERS, ["--impl", "upstream", "-k", "test_keys and fs-form"], tmp_path
    )
    assert status == 0, output[-3000:]
    tests = [t for t in document["tests"] if t["impl"] == "upstream"]
    assert tests and {t["outcome"] for t in tests} == {"skip"}
    assert all(t["reason"].endswith("has no object_key_to_filename") for t in tests), tests
    assert "INTERNALERROR" not in output


# -- a release without the protocol server and client (0.5.7rc2) ---------------------------

NO_SERVER_NOR_CLIENT = """
import lmckv.conformance.drivers.server_driver as sd
sd.module_absent = lambda module: module.startswith(
    ("lmcache.v1.server", "lmcache.v1.storage_backend.connector.lm_connector"))
"""


def test_a_release_without_server_and_client_skips_their_tests(tmp_path: Path) -> None:
    """What 0.5.7rc2 does (checked against the real release too, see the report): every
    server and client test skips with the reason, and the run exits 0."""
    _lmcache()
    status, output, document = _run_suite(
        NO_SERVER_NOR_CLIENT, ["--impl", "upstream-server", "--impl", "upstream-client"], tmp_path
    )
    assert status == 0, output[-3000:]
    by_impl: dict[str, set[str]] = {}
    for test in document["tests"]:
        by_impl.setdefault(test["impl"], set()).add(test["outcome"])
    assert by_impl == {"upstream-server": {"skip"}, "upstream-client": {"skip"}}
    assert "has no lmcache.v1.server (no lm:// server)" in output
    assert "has no lmcache.v1.storage_backend.connector.lm_connector" in output


def test_module_absent_reads_files_without_importing_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parent package whose ``__init__`` cannot import (0.5.7rc2's connector package
    needs ``aiofile``) does not hide whether the module's file is there."""
    from lmckv.conformance.drivers.server_driver import module_absent

    package = tmp_path / "relpkg" / "connector"
    package.mkdir(parents=True)
    (tmp_path / "relpkg" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("import no_such_dependency_here\n")
    (package / "kept.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not module_absent("relpkg.connector.kept")
    assert not module_absent("relpkg.connector")
    assert module_absent("relpkg.connector.removed")
    assert module_absent("no_such_package_anywhere.x")


# -- which known-failure list --------------------------------------------------------------

TAGLESS = "0.1.dev1+g1234567"
TAGLESS_VERSION = f"""
import importlib.metadata as m
_version = m.version
m.version = lambda name: {TAGLESS!r} if name == "lmcache" else _version(name)
"""


def test_a_tagless_checkout_uses_the_newest_list() -> None:
    newest = list(upstream_versions().values())[-1]
    assert upstream_list_path(TAGLESS) == newest
    chosen = load("upstream", TAGLESS)
    assert chosen.path == newest
    assert chosen.source == (
        f"{newest.name} (newest release; {TAGLESS} is a development version without an "
        "earlier list)"
    )


def test_a_dev_version_after_a_release_uses_the_nearest_earlier_list() -> None:
    lists = upstream_versions()
    first = next(iter(lists))
    after = f"{first.major}.{first.minor}.{first.micro + 1}.dev3+gabcdef0"
    assert upstream_list_path(after) == lists[first]
    assert "nearest earlier release" in load("upstream", after).source


def test_a_given_list_replaces_the_chosen_one(tmp_path: Path) -> None:
    given = tmp_path / "mine.txt"
    given.write_text("test_x.py::test_y[upstream-a] a reason\n")
    chosen = load("upstream", "0.5.6", given)
    assert chosen.path == given
    assert chosen.source == "mine.txt (given with --known-failures)"
    assert chosen.reasons == {"test_x.py::test_y[upstream-a]": "a reason"}


def test_a_tagless_run_names_its_list_in_the_summary_and_results(tmp_path: Path) -> None:
    _lmcache()
    newest = list(upstream_versions().values())[-1].name
    status, output, document = _run_suite(
        TAGLESS_VERSION, ["--impl", "upstream", "-k", "test_codec_read and kv-magic"], tmp_path
    )
    assert status == 0, output[-3000:]
    why = f"newest release; {TAGLESS} is a development version without an earlier list"
    assert f"known failures of upstream: conformance/known_failures/{newest} ({why})" in output
    (upstream,) = [i for i in document["impls"] if i["name"] == "upstream"]
    assert upstream["version"] == TAGLESS
    assert upstream["known_failures"] == f"conformance/known_failures/{newest}"
    assert upstream["known_failures_choice"] == why


def test_known_failures_option_names_the_given_list(tmp_path: Path) -> None:
    _lmcache()
    given = tmp_path / "empty.txt"
    given.write_text("# nothing is known to fail\n")
    status, output, document = _run_suite(
        "",
        ["--impl", "upstream", f"--known-failures={given}", "-k", "test_codec_read and kv-magic"],
        tmp_path,
    )
    assert status == 0, output[-3000:]
    assert f"known failures of upstream: {given} (given with --known-failures)" in output
    (upstream,) = [i for i in document["impls"] if i["name"] == "upstream"]
    assert upstream["known_failures_choice"] == "given with --known-failures"


def test_the_awscrt_stand_in_is_a_module_to_tools_that_walk_sys_modules() -> None:
    """Without awscrt installed, the upstream driver puts a stand-in into sys.modules whose
    public names are empty classes; its dunder names stay missing, so that tools walking
    sys.modules (hypothesis reads every module's ``__file__``) see no class for a path."""
    import sys

    from lmckv.conformance.drivers import upstream_driver

    upstream_driver._stub_awscrt()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        assert path is None or isinstance(path, str), name
