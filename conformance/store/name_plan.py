"""Objects whose keys test an adapter's names (SPEC.md "A store", KEY-FS-FORM and
KEY-STRING-FORM, both directions): model names with ``/``, spaces, ``%``, ``?``, ``#``, ``+``
and letters outside ASCII, a cache_salt, the widest kv_rank and object group, a one-byte
chunk hash. :func:`by_lmcache` are written by LMCache (their names, listed from the store, must
be the reference's); :func:`by_lmckv` are written by lmckv under the reference's names, with
the store's own client, and must be served by LMCache (a raw store: the bytes are the layout's).
"""

from __future__ import annotations

import hashlib

from .lmcache_writer import FULL_CHUNK, PlannedObject

#: (model_name, kv_rank, object_group_id, cache_salt, chunk hash length).
NAME_KEYS = (
    ("org/model-1", 0x01000100, 0, "", 32),
    ("model with spaces", 0, 0, "", 32),
    ("100%/50%2F", 0, 0, "", 32),
    ("what?#frag+plus", 0, 0, "", 32),
    ("modèle/ü", 0, 0, "", 32),
    ("org/widest", 0xFFFF_FFFF, 2**63 - 1, "", 32),
    ("org/salted", 0, 0, "tenant-1", 32),
    ("org/short-hash", 0, 0x1A, "", 1),
)


def _objects(tag: str, first_seed: int) -> list[PlannedObject]:
    out = []
    for i, (model, rank, group, salt, hash_len) in enumerate(NAME_KEYS):
        digest = hashlib.sha256(f"lmckv-names-{tag}-{i}".encode()).digest()[:hash_len]
        out.append(PlannedObject(model, rank, group, digest, salt, FULL_CHUNK, first_seed + i))
    return out


def by_lmcache() -> list[PlannedObject]:
    """The name objects LMCache writes."""
    return _objects("lmcache", 3000)


def by_lmckv() -> list[PlannedObject]:
    """The name objects lmckv writes (other chunk hashes than :func:`by_lmcache`'s)."""
    return _objects("lmckv", 4000)
