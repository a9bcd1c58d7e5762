"""Checking a store on disk (SPEC.md "A store on disk", rules STORE-*): the directory an FS
L2 adapter writes, one blob file per ObjectKey.

Every entry of the directory gets one verdict: a blob file (its name reads back to an
ObjectKey that writes the same name, STORE-NAME; its content is one valid blob, checked in
bounded memory by :func:`~lmckv.reference_impl.kv_codec.blob_file.verify_blob_file`,
STORE-BLOB-EMPTY, STORE-BLOB-TRUNCATED, STORE-BLOB-VALID; the model its header records is
the one its name says, STORE-NAME-BLOB), one of the adapter's own files, or a foreign file
(STORE-FOREIGN). The files are checked in a bounded pool of threads (file reads and the
CRC release the GIL); a problem is a :class:`Problem` with its rule id, and the valid
blobs add up into :class:`Total` rows per model and kv_rank.

Which blobs are valid is the reference reader's decision, made in one place
(``parse_header_fields``): nothing here knows blob layouts, so a blob kind the reader
accepts (K-less "V-only" blobs, ``k_payload_len = 0``) is counted as soon as it does.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmckv.base.schemas import validate

from ...reference_impl.keys import (
    KeyFormatError,
    ObjectKey,
    object_key_to_filename,
    parse_object_key_filename,
)
from ...reference_impl.keys.fs_form import FILE_EXT
from ...reference_impl.keys.kv_rank import split_kv_rank
from ...reference_impl.kv_codec import CodecError
from ...reference_impl.kv_codec.blob_file import TruncatedBlobError, verify_blob_file

SCHEMA = "fsck"
KIND = "lmckv-fsck"
#: Files the FS adapters keep beside the blobs (newer upstream's disk identity and its
#: lock): neither blobs nor foreign.
ADAPTER_FILES = frozenset({".lmcache_disk_uuid", ".lmcache_disk_uuid.lock"})
#: The suffix the FS adapter writes a blob under before renaming it (an unfinished write).
TEMP_SUFFIX = ".tmp"
#: Threads checking files at once (each holds at most one header and one CRC piece).
DEFAULT_JOBS = min(4, os.cpu_count() or 1)


@dataclass(frozen=True)
class Problem:
    """One entry of the store that breaks a STORE-* rule."""

    file: str
    rule: str
    message: str
    size: int | None = None


@dataclass(frozen=True)
class Verdict:
    """What one entry of the directory is: a valid blob (``key`` and ``blob`` set), an
    adapter file, a subdirectory (not entered), or a problem."""

    name: str
    size: int | None = None
    key: ObjectKey | None = None
    k_less: bool = False
    problem: Problem | None = None
    kind: str = "blob"


@dataclass
class Total:
    """The valid blobs of one model and kv_rank."""

    model_name: str
    kv_rank: int
    blobs: int = 0
    k_less: int = 0
    bytes: int = 0


@dataclass
class StoreReport:
    """Everything ``lmckv fsck`` says about one directory."""

    directory: Path
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def problems(self) -> list[Problem]:
        return [v.problem for v in self.verdicts if v.problem is not None]

    def totals(self) -> list[Total]:
        rows: dict[tuple[str, int], Total] = {}
        for v in self.verdicts:
            if v.key is None or v.problem is not None:
                continue
            row = rows.setdefault(
                (v.key.model_name, v.key.kv_rank), Total(v.key.model_name, v.key.kv_rank)
            )
            row.blobs += 1
            row.k_less += v.k_less
            row.bytes += v.size or 0
        return [rows[k] for k in sorted(rows)]

    def document(self) -> dict[str, Any]:
        """The ``--json`` document (schema ``fsck``), validated."""
        blobs = [v for v in self.verdicts if v.kind == "blob"]
        doc = {
            "kind": KIND,
            "schema_version": 1,
            "directory": str(self.directory),
            "entries": len(self.verdicts),
            "blob_files": len(blobs),
            "valid_blobs": sum(1 for v in blobs if v.problem is None),
            "bytes": sum(v.size or 0 for v in self.verdicts if v.kind != "directory"),
            "adapter_files": sorted(v.name for v in self.verdicts if v.kind == "adapter"),
            "directories": sorted(v.name for v in self.verdicts if v.kind == "directory"),
            "totals": [_total_record(t) for t in self.totals()],
            "problems": [
                {"file": p.file, "rule": p.rule, "message": p.message, "size": p.size}
                for p in sorted(self.problems, key=lambda p: p.file)
            ],
        }
        validate(doc, SCHEMA)
        return doc


def _total_record(total: Total) -> dict[str, Any]:
    world, rank, local_world, local_rank = split_kv_rank(total.kv_rank)
    return {
        "model_name": total.model_name,
        "kv_rank": total.kv_rank,
        "world_size": world,
        "global_rank": rank,
        "local_world_size": local_world,
        "local_rank": local_rank,
        "blobs": total.blobs,
        "k_less": total.k_less,
        "bytes": total.bytes,
    }


def _key_of(name: str) -> tuple[ObjectKey | None, str]:
    """STORE-NAME: the key ``name`` reads back to and writes back as ``name``, else
    (None, why)."""
    try:
        key = parse_object_key_filename(name)
    except KeyFormatError as exc:
        return None, f"not the filename of an ObjectKey: {exc}"
    try:
        again = object_key_to_filename(key)
    except KeyFormatError as exc:
        return None, f"reads back to a key that has no filename: {exc}"
    if again != name:
        return None, f"reads back to a key whose filename is {again!r}"
    return key, ""


def judge_blob_file(path: Path, name: str, size: int) -> Verdict:
    """The verdict on the blob file ``path`` (named ``name``, ``size`` bytes)."""
    key, why = _key_of(name)
    if key is None:
        return Verdict(name, size, problem=Problem(name, "STORE-NAME", why, size))
    if size == 0:
        return Verdict(name, size, key, problem=Problem(name, "STORE-BLOB-EMPTY", "empty", 0))
    try:
        with path.open("rb") as f:
            enc = verify_blob_file(f, size)
    except TruncatedBlobError as exc:
        message = f"{exc.rule}: {exc}"
        return Verdict(
            name, size, key, problem=Problem(name, "STORE-BLOB-TRUNCATED", message, size)
        )
    except CodecError as exc:
        message = f"{exc.rule or type(exc).__name__}: {exc}"
        return Verdict(name, size, key, problem=Problem(name, "STORE-BLOB-VALID", message, size))
    recorded = enc.hashes.model_id
    if recorded and recorded != key.model_name:
        message = f"the blob records model_id {recorded!r}, the name says {key.model_name!r}"
        return Verdict(name, size, key, problem=Problem(name, "STORE-NAME-BLOB", message, size))
    return Verdict(name, size, key, k_less=enc.k_payload_len == 0 and enc.v_payload_len > 0)


def check_entry(directory: Path, name: str) -> Verdict:
    """The verdict on one entry of the store directory (never raises for its content;
    OSError when it cannot be read)."""
    path = directory / name
    info = path.lstat()
    if stat.S_ISDIR(info.st_mode):
        return Verdict(name, kind="directory")
    if name in ADAPTER_FILES:
        return Verdict(name, info.st_size, kind="adapter")
    if not stat.S_ISREG(info.st_mode):
        why = "not a regular file (a link, socket or device)"
        return Verdict(name, problem=Problem(name, "STORE-FOREIGN", why), kind="foreign")
    if not name.endswith(FILE_EXT):
        why = (
            "left by an unfinished write of the FS adapter"
            if name.endswith(TEMP_SUFFIX)
            else f"no {FILE_EXT} suffix: not a blob file of the FS adapter"
        )
        return Verdict(
            name, info.st_size, problem=Problem(name, "STORE-FOREIGN", why, info.st_size),
            kind="foreign",
        )  # fmt: skip
    return judge_blob_file(path, name, info.st_size)


def check_store(
    directory: Path,
    *,
    jobs: int = DEFAULT_JOBS,
    progress: Callable[[Iterable[Verdict], int], Iterable[Verdict]] | None = None,
) -> StoreReport:
    """Check every entry of ``directory`` with ``jobs`` threads; ``progress`` wraps the
    stream of verdicts (given it and the entry count), e.g. in a progress bar. OSError
    when the directory or an entry cannot be read."""
    names = sorted(os.listdir(directory))
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        verdicts: Iterable[Verdict] = pool.map(lambda n: check_entry(directory, n), names)
        if progress is not None:
            verdicts = progress(verdicts, len(names))
        return StoreReport(directory, list(verdicts))
