"""Assemble every golden file in memory: manifests plus binary vectors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lmckv.base.resources import checkout_root, package_path

from . import codec_blobs, codec_encode, codec_v2, key_vectors, protocol_vectors
from .codec_builder import NOTES as CODEC_NOTES
from .codec_builder import CodecVectors, reference_driver
from .common import FileSet, manifest


def checkout_golden_dir() -> Path | None:
    """golden_blobs/ of the source checkout this code runs from (the ``golden_blobs``
    package, a real folder of the checkout), else None: an installed wheel has no
    checkout, and nothing writes into site-packages."""
    root = checkout_root()
    folder = package_path("lmckv.golden_blobs")
    return folder if root is not None and folder.parent == root else None


#: Where the generator writes by default: the checkout's golden_blobs/ (None when installed).
GOLDEN_DIR = checkout_golden_dir()

CODEC_DESCRIPTION = (
    "Encoded-KV blob v1 (AsymK16V8). Each vector names a blob file; 'expected' holds the "
    "header fields a reader returns or the error class it raises; 'decode' the digests of "
    "the payload sections and of V dequantized to 'out_v_dtype'; 'encode' the inputs whose "
    "re-encoding must give the blob byte for byte. Files are relative to golden_blobs/."
)


PROTOCOL_DESCRIPTION = (
    "ClientMetaMessage, ServerMetaMessage and RemoteMetadata. Each vector is one operation "
    "(TESTEE.md): its request and either the result fields or the error family "
    "('error', with the reference's class in 'error_class'). Message bytes are files "
    "('msg_file'); '-write' and '-read' vectors come in pairs."
)
KEYS_DESCRIPTION = (
    "CacheEngineKey strings, ObjectKey invariants, kv_rank packing, EncodedObjectKey JSON, "
    "FS filenames, S3/native object names and IPC fan-out. Each vector is one operation "
    "(TESTEE.md); 'distinct' vectors write several keys that must not share a name."
)


def build_codec(files: FileSet) -> None:
    cv = CodecVectors(files)
    codec_encode.build(cv)
    codec_blobs.build(cv)
    files.add_json(
        "v1/codec.json", manifest("lmckv-encoded-kv", CODEC_DESCRIPTION, CODEC_NOTES, cv.vectors)
    )


CODEC_V2_DESCRIPTION = (
    "Encoded-KV blob v2, the draft of mcgrof/LMCache at "
    f"{codec_v2.DRAFT_COMMIT[:8]} as SPEC.md's v2 chapter decides it: RAW_UNIT blobs (e4m3 V "
    "codes stored as they were, scope NONE, no scales) whose CRC covers the header too. Built "
    "byte by byte from the byte table, not by the reference. 'versions' lists the header "
    "versions whose readers must give 'expected'; 'v1_reader' is what a v1-only reader must do "
    "instead (refuse, naming that rule). 'decode' as in v1/codec.json. Every v1 vector keeps its "
    "outcome for a v2 reader. Files are relative to golden_blobs/."
)


def build_codec_v2(files: FileSet) -> None:
    vectors = codec_v2.build(files)
    files.add_json(
        "v2/codec.json",
        manifest("lmckv-encoded-kv", CODEC_V2_DESCRIPTION, codec_v2.NOTES, vectors),
    )


def build_all(progress: Callable[[str], None] = lambda _msg: None) -> dict[str, bytes]:
    """Every file under golden_blobs/, by relative path."""
    files = FileSet()
    progress("golden: codec vectors")
    build_codec(files)
    progress("golden: codec v2 vectors")
    build_codec_v2(files)
    driver = reference_driver()
    progress("golden: protocol vectors")
    pv = protocol_vectors.build(files, driver)
    files.add_json(
        "v1/protocol.json",
        manifest("lmckv-protocol", PROTOCOL_DESCRIPTION, protocol_vectors.NOTES, pv.vectors),
    )
    progress("golden: key vectors")
    kv = key_vectors.build(files, driver)
    files.add_json(
        "v1/keys.json", manifest("lmckv-keys", KEYS_DESCRIPTION, key_vectors.NOTES, kv.vectors)
    )
    return dict(sorted(files.files.items()))
