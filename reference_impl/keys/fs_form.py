"""The FS adapter's filename form of an ObjectKey (SPEC "FS filename form", rules
KEY-FS-FORM, KEY-FS-SEP-ALIAS, KEY-FS-NAME-MAX)::

    <model, "/" -> "-SEP-">@0x<kv_rank, 8 hex>@<group hex>@<hash hex>[@<salt>].data
"""

from __future__ import annotations

from .errors import (
    KeyFormatError,
    MalformedObjectKeyStringError,
    UnrepresentableObjectKeyError,
)
from .hex_fields import (
    read_chunk_hash,
    read_group_id,
    read_kv_rank,
    split_fields,
)
from .object_key import ObjectKey

FILE_EXT = ".data"
SLASH_ESCAPE = "-SEP-"
KV_RANK_PREFIX = "0x"
NAME_MAX_BYTES = 255
"""POSIX NAME_MAX: the longest filename, in bytes, most filesystems accept."""


def _escape_model(model_name: str) -> str:
    """KEY-FS-SEP-ALIAS: ``/`` becomes ``-SEP-``; a name that would not read back as
    itself (one containing ``-SEP-``, or ``-SEP/``, ``/SEP-`` ...) is refused."""
    escaped = model_name.replace("/", SLASH_ESCAPE)
    if escaped.replace(SLASH_ESCAPE, "/") != model_name:
        raise UnrepresentableObjectKeyError(
            f"model_name {model_name!r} has no unambiguous FS filename: its '/' -> "
            f"'{SLASH_ESCAPE}' escape would read back as another model",
            rule="KEY-FS-SEP-ALIAS",
        )
    return escaped


def object_key_to_filename(key: ObjectKey) -> str:
    """The filename of ``key`` (KEY-FS-FORM); byte-identical to upstream when it succeeds."""
    base = (
        f"{_escape_model(key.model_name)}@{KV_RANK_PREFIX}{key.kv_rank:08x}"
        f"@{key.object_group_id:x}@{key.chunk_hash.hex()}"
    )
    name = f"{base}@{key.cache_salt}{FILE_EXT}" if key.cache_salt else f"{base}{FILE_EXT}"
    size = len(name.encode("utf-8"))  # model and salt are Unicode text (KEY-TEXT-UNICODE)
    if size > NAME_MAX_BYTES:
        raise UnrepresentableObjectKeyError(
            f"filename is {size} bytes; NAME_MAX is {NAME_MAX_BYTES}", rule="KEY-FS-NAME-MAX"
        )
    return name


def parse_object_key_filename(filename: str) -> ObjectKey:
    """Read a filename written by :func:`object_key_to_filename`; every deviation from the
    canonical form raises a :class:`KeyFormatError` subclass."""
    if not isinstance(filename, str):
        raise MalformedObjectKeyStringError(
            f"filename must be a str, got {filename!r}", rule="KEY-FS-FORM"
        )
    if not filename.endswith(FILE_EXT):
        raise MalformedObjectKeyStringError(
            f"filename {filename!r} lacks {FILE_EXT!r}", rule="KEY-FS-FORM"
        )
    where = f"filename {filename!r}"
    (safe_model, rank_text, group_text, hash_text), salt = split_fields(
        filename[: -len(FILE_EXT)], where
    )
    if "/" in safe_model:
        raise MalformedObjectKeyStringError(
            f"raw '/' in the model field of {where}", rule="KEY-FS-FORM"
        )
    if not rank_text.startswith(KV_RANK_PREFIX):
        raise MalformedObjectKeyStringError(
            f"kv_rank lacks '{KV_RANK_PREFIX}' in {where}", rule="KEY-FS-FORM"
        )
    return ObjectKey(
        chunk_hash=read_chunk_hash(hash_text, where),
        model_name=safe_model.replace(SLASH_ESCAPE, "/"),
        kv_rank=read_kv_rank(rank_text[len(KV_RANK_PREFIX) :], where),
        object_group_id=read_group_id(group_text, where),
        cache_salt=salt,
    )


def filename_to_object_key(filename: str) -> ObjectKey | None:
    """Upstream's contract: the ObjectKey, or None for any filename that is not a
    canonical key filename (temporary and foreign files in the directory)."""
    try:
        return parse_object_key_filename(filename)
    except KeyFormatError:
        return None
