"""The one catalogue of adapters and serdes (conformance/store/catalogue.py): nothing else
spells their names, every store kind has one client that fsck and the fault suite share, and a
row added to it reaches fsck, the fault suite's cells and the end-to-end serde table.

The vocabulary scan reads every shipped module's string literals (as tests/test_vocabulary.py
does for the scale scopes): a name is *spelled* where a literal equals it. Docstrings and
sentences that mention a name are text, not a spelling. The short names ``fs``, ``s3``,
``none``, ``lmckv`` and ``unknown`` are ordinary words elsewhere (a boto3 service, a scheme, the
project, an outcome)
and are left out of the scan; their rows are still the only place that defines them.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from test_import_graph import MODULES

from lmckv import cli
from lmckv.base.schemas import schema
from lmckv.bench.accuracy import e2e
from lmckv.bench.accuracy import lmcache_serdes as lm
from lmckv.bench.recommendation.serde_choice import serde_table
from lmckv.conformance.store import catalogue, sources
from lmckv.conformance.store.catalogue import Check, Serde
from lmckv.conformance.store.faults import flipped
from lmckv.conformance.store.spec import from_l2_adapter, open_source
from lmckv.conformance.store.views import open_view
from lmckv.conformance.suite.test_store_load import fault_cells
from lmckv.reference_impl.keys import ObjectKey, object_key_to_filename

HOME = "lmckv.conformance.store.catalogue"
#: The reference implementation's own serde factory (below the catalogue's layer) names the
#: serdes it implements: the one other module that may spell a serde's name.
REFERENCE_SERDES = "lmckv.reference_impl.serde"
#: Ordinary words elsewhere (the module docstring says why they are not scanned).
COMMON_WORDS = {"fs", "s3", "none", "lmckv", "unknown"}


def _spelled_in(name: str) -> list[str]:
    out = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.Constant) and n.value == name for n in ast.walk(tree)):
            out.append(module)
    return sorted(out)


@pytest.mark.parametrize("name", sorted({*catalogue.ADAPTERS, *catalogue.SERDES} - COMMON_WORDS))
def test_a_name_is_spelled_only_by_its_catalogue_row(name: str) -> None:
    """At most two modules outside tests/ quote the name: the catalogue, and for a serde the
    reference's serde factory."""
    modules = _spelled_in(name)
    assert HOME in modules, f"the scan does not see the catalogue's {name!r}"
    allowed = {HOME, REFERENCE_SERDES} if name in catalogue.SERDES else {HOME}
    assert set(modules) <= allowed, f"{name!r} is spelled outside the catalogue: {modules}"
    assert len(modules) <= 2


def test_the_issue_names_are_in_the_scan() -> None:
    for name in ("fs_native", "resp", "valkey", "aesgcm", "fp8", "turboquant"):
        assert name in {*catalogue.ADAPTERS, *catalogue.SERDES} - COMMON_WORDS


def test_one_client_per_store_kind() -> None:
    """Each adapter's row names one client class; adapters of one kind of store share it, and
    nothing else in the store package defines a client (a class with get, put and delete)."""
    clients = {row.client for row in catalogue.ADAPTERS.values()}
    assert clients == {sources.FileSource, sources.RedisSource, sources.S3Source}
    for module, path in MODULES.items():
        if not module.startswith("lmckv.conformance.store.") or module.endswith(".sources"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                methods = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
                if {"get", "put", "delete"} <= methods and module.endswith(".views"):
                    # the test view delegates to the client it holds
                    assert "self.source" in ast.unparse(node)
                else:
                    assert not {"get", "put", "delete"} <= methods, f"{module}.{node.name}"


def test_fsck_and_the_tests_open_a_store_with_the_same_client(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        view = open_view(catalogue.FS.name, tmp_path / "store", stack)
        spec = from_l2_adapter(json.dumps({"type": view.adapter, **view.fields}))
        assert type(view.source) is type(open_source(spec)) is catalogue.FS.client
        view.put("a.tmp", b"xyz")
        assert view.sizes() == {"a.tmp": 3} and view.get("a.tmp") == b"xyz"
        view.delete("a.tmp")
        with pytest.raises(sources.ObjectGone):
            view.get("a.tmp")


#: A serde of no release: frames of ``FAKE`` + payload + 4-byte trailer, content unverified.
FAKE = Serde("fakeserde", head=4, tail=4, magic=b"FAKE", faults=True)


@pytest.fixture
def fake_row(monkeypatch: pytest.MonkeyPatch) -> Serde:
    monkeypatch.setitem(catalogue.SERDES, FAKE.name, FAKE)
    return FAKE


def _fake_store(folder: Path, payloads: list[int]) -> None:
    folder.mkdir()
    for i, size in enumerate(payloads):
        key = ObjectKey(bytes([i]) * 32, "org/model", 0)
        (folder / object_key_to_filename(key)).write_bytes(b"FAKE" + bytes(size) + b"tail")


def test_a_new_serde_row_reaches_fsck(
    fake_row: Serde, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fsck recognises the row's frames from their first bytes (never ``none``) and checks
    each object's payload size net of the frame."""
    _fake_store(tmp_path / "store", [4096, 4096, 4096, 4001])
    assert cli.main(["fsck", str(tmp_path / "store"), "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "serde fakeserde (detected" in out
    assert "STORE-SIZE" in out and "3 size checked" in out
    spec = {"type": "fs", "base_path": str(tmp_path / "store"), "serde": {"type": FAKE.name}}
    assert cli.main(["fsck", "--l2-adapter", json.dumps(spec), "--no-progress"]) == 1
    assert "serde fakeserde\n" in capsys.readouterr().out + "\n"


def test_a_new_serde_row_reaches_the_fault_suite(fake_row: Serde) -> None:
    """The row's cells are in the matrix for every adapter, and a flip lands in its payload,
    not in its frame."""
    ids = [p.id for p in fault_cells()]  # type: ignore[attr-defined]
    for adapter in (a.name for a in catalogue.adapters_here()):
        assert f"{adapter}-fakeserde-truncated-target" in ids
    data = b"FAKE" + bytes(16) + b"tail"
    turned = flipped(data, FAKE.name, "k")
    changed = [i for i, (a, b) in enumerate(zip(data, turned, strict=True)) if a != b]
    assert len(changed) == 1 and 4 <= changed[0] < len(data) - 4


def test_a_new_serde_row_reaches_the_e2e_table(
    fake_row: Serde, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row LMCache builds by name that the installed release does not register is a skip
    row of the e2e phase, which the serde table shows with its reason."""
    monkeypatch.setattr(lm, "registered", lambda: ([], "none registered (test)"))
    window = SimpleNamespace(kv=[(torch.zeros(1, 2, 4, 8), torch.zeros(1, 2, 4, 8))])
    rows = list(e2e._registered_rows("m", 4, SimpleNamespace(windows=[window])))  # type: ignore[arg-type]
    skips = {r["serde"]: r["reason"] for r in rows if r["kind"] == "skip"}
    assert "does not register it" in skips[FAKE.name]
    empty = {"serde": [], "metric": [], "layer": [], "value": [], "scope": []}
    table = serde_table(pd.DataFrame(empty), pd.DataFrame(), skips)
    assert FAKE.name in set(table["serde"])


def test_rows_agree_with_the_frames_they_describe() -> None:
    aesgcm = catalogue.AESGCM
    assert (aesgcm.head, aesgcm.tail, aesgcm.overhead) == (13, 16, 29)  # version + IV, tag
    assert aesgcm.check is Check.TAG and aesgcm.key_file
    chunk = bytes(range(32))
    assert catalogue.detect_serde([(b"\x01" + bytes(31), 100, chunk)]) is aesgcm
    # A checksum frame starts 0x01 too: its fingerprint (the chunk hash's first 8 bytes) tells.
    assert catalogue.detect_serde([(b"\x01" + chunk[:8] + bytes(23), 100, chunk)]).name == (
        "checksum"
    )
    assert catalogue.detect_serde([(b"LMCKV\x00\x01\x00", 100, chunk)]).check is Check.BLOB
    assert catalogue.detect_serde([(b"TQ01\x01\x04" + bytes(26), 100, chunk)]).name == "tqai"
    # Nothing recognised: "unknown", never "none" (a raw object looks like any other).
    assert catalogue.detect_serde([(b"\x00" * 32, 100, chunk)]) is catalogue.UNKNOWN
    # Most of the sample decides: one damaged frame does not, a minority of frames does not.
    frame, junk = (b"\x01" + bytes(31), 100, chunk), (b"\x07" * 32, 100, chunk)
    assert catalogue.detect_serde([frame, frame, junk]) is aesgcm
    assert catalogue.detect_serde([frame, junk, junk]) is catalogue.UNKNOWN
    assert catalogue.FP8.cast == "float8_e4m3fn" and not catalogue.FP8.verifiable
    with pytest.raises(ValueError, match="already"):
        catalogue.register_serde(catalogue.FP8)
    with pytest.raises(catalogue.UnknownName, match="lmckv knows"):
        catalogue.serde("no-such-serde")


def test_the_fsck_schema_names_the_catalogues_adapters() -> None:
    """The fsck report's schema (a contract with older files) lists the adapter rows; a serde
    is any row's name, those registered at run time too."""
    store = schema("fsck")["properties"]["store"]["properties"]
    assert store["adapter"]["enum"] == list(catalogue.ADAPTERS)
    pattern = re.compile(store["serde"]["pattern"])
    assert all(pattern.fullmatch(name) for name in [*catalogue.SERDES, FAKE.name])
