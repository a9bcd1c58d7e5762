"""The S3 and native-connector object-name form of an ObjectKey (SPEC "S3/native form",
rule KEY-STRING-FORM)::

    <model>@<kv_rank, 8 hex>@<group hex>@<hash hex>[@<salt>]
"""

from __future__ import annotations

from .errors import MalformedObjectKeyStringError
from .hex_fields import (
    read_chunk_hash,
    read_group_id,
    read_kv_rank,
    split_fields,
)
from .object_key import ObjectKey


def object_key_to_string(key: ObjectKey) -> str:
    """The object name of ``key``; byte-identical to upstream's S3 and native adapters."""
    base = f"{key.model_name}@{key.kv_rank:08x}@{key.object_group_id:x}@{key.chunk_hash.hex()}"
    return f"{base}@{key.cache_salt}" if key.cache_salt else base


def string_to_object_key(name: str) -> ObjectKey:
    """Read an object name; every deviation from the canonical form raises a
    :class:`KeyFormatError` subclass (upstream raises ValueError, accepting e.g. ``0X``,
    ``+``, ``_`` and whitespace in the hex fields)."""
    if not isinstance(name, str):
        raise MalformedObjectKeyStringError(
            f"object name must be a str, got {name!r}", rule="KEY-STRING-FORM"
        )
    where = f"object name {name!r}"
    (model_name, rank_text, group_text, hash_text), salt = split_fields(name, where)
    return ObjectKey(
        chunk_hash=read_chunk_hash(hash_text, where),
        model_name=model_name,
        kv_rank=read_kv_rank(rank_text, where),
        object_group_id=read_group_id(group_text, where),
        cache_salt=salt,
    )
