"""No two keys share a name (SPEC.md "ObjectKey", KEY-FS-SEP-ALIAS and KEY-STRING-FORM): an
adapter that maps two distinct ObjectKeys to one object name serves one key's bytes under the
other (measured through LMCache's fs and fs_native adapters: SPEC.md differences item 20).

A search over the keys most likely to collide, one field varied at a time from a base key:
model names of one to three pieces of ``a``, ``/``, ``-SEP-``, ``-SEP``, ``SEP-`` and a space
(the FS escape turns ``/`` into ``-SEP-``), kv_ranks at and past 32 bits and below 0, object
groups past 64 bits, cache_salts, chunk hashes of other lengths. Every key the implementation
accepts is named; two distinct accepted keys with one name fail the test, naming both (the
first collision in the search's fixed order, so that the observation is stable).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ..core import observations
from ..drivers.base import Driver
from .verdicts import require

PIECES = ("a", "/", "-SEP-", "-SEP", "SEP-", " ")
BASE: dict[str, Any] = {
    "chunk_hash": bytes.fromhex("0a0b"), "model_name": "m", "kv_rank": 0,
    "object_group_id": 0, "cache_salt": "",
}  # fmt: skip
VARIED: dict[str, tuple[Any, ...]] = {
    "kv_rank": (1, 0xFFFF_FFFF, 2**32, 2**32 + 1, 2**36, -1),
    "object_group_id": (1, 2**63 - 1, 2**64, 2**64 + 1),
    "cache_salt": ("s", "0", "00000000", "m"),
    "chunk_hash": (b"", b"\x0a", bytes.fromhex("000a0b"), bytes.fromhex("0a0b00")),
}
FORMS = (
    pytest.param("key.fs.write", "filename", marks=pytest.mark.rule("KEY-FS-SEP-ALIAS"), id="fs"),
    pytest.param(
        "key.s3.write", "object_name", marks=pytest.mark.rule("KEY-STRING-FORM"), id="string"
    ),
)


def candidate_keys() -> list[dict[str, Any]]:
    """The search's keys, in a fixed order: the base key with its model, then each other
    field, varied."""
    models = ["".join(p) for n in (1, 2, 3) for p in itertools.product(PIECES, repeat=n)]
    keys = [{**BASE, "model_name": m} for m in dict.fromkeys(models)]
    for field, values in VARIED.items():
        keys += [{**BASE, field: v} for v in values]
    return keys


def _shown(key: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={v.hex() if isinstance(v, bytes) else repr(v)}"
        for k, v in key.items()
        if v != BASE[k] or k == "model_name"
    )


@pytest.mark.parametrize(("op", "field"), FORMS)
def test_distinct_keys_have_distinct_names(impl: Driver, op: str, field: str) -> None:
    """Every two distinct keys the implementation names get two names."""
    require(impl, op)
    named: dict[str, dict[str, Any]] = {}
    for key in candidate_keys():
        res = impl.call(op, **key)
        if not res["ok"]:
            continue  # a key the implementation refuses has no name to share
        name = str(res[field])
        other = named.setdefault(name, key)
        if other is not key:
            observations.record("collision", f"{_shown(other)} / {_shown(key)}")
            pytest.fail(
                f"{op}: two keys, one name {name!r}: {_shown(other)} and {_shown(key)}", False
            )
