"""Canonical lowercase-hex and field readers shared by the object-key string forms
(rule KEY-HEX-CANONICAL)."""

from __future__ import annotations

import re

from .errors import MalformedObjectKeyStringError

_HASH_HEX = re.compile(r"(?:[0-9a-f]{2})*")
_GROUP_HEX = re.compile(r"0|[1-9a-f][0-9a-f]*")
_KV_RANK_HEX = re.compile(r"[0-9a-f]{8}")


def read_chunk_hash(text: str, where: str) -> bytes:
    """Even-length lowercase hex (``bytes.hex()`` output) -> bytes."""
    if not _HASH_HEX.fullmatch(text):
        raise MalformedObjectKeyStringError(
            f"bad chunk hash {text!r} in {where}", rule="KEY-HEX-CANONICAL"
        )
    return bytes.fromhex(text)


def read_group_id(text: str, where: str) -> int:
    """Lowercase hex without leading zeros (``format(n, "x")`` output) -> int."""
    if not _GROUP_HEX.fullmatch(text):
        raise MalformedObjectKeyStringError(
            f"bad object group id {text!r} in {where}", rule="KEY-HEX-CANONICAL"
        )
    return int(text, 16)


def read_kv_rank(text: str, where: str) -> int:
    """Exactly eight lowercase hex digits (``format(n, "08x")`` output) -> int."""
    if not _KV_RANK_HEX.fullmatch(text):
        raise MalformedObjectKeyStringError(
            f"bad kv_rank {text!r} in {where}", rule="KEY-HEX-CANONICAL"
        )
    return int(text, 16)


def split_fields(text: str, where: str) -> tuple[list[str], str]:
    """Split on ``@`` into the four fixed fields and the salt ("" when absent).

    A fifth field must be non-empty: an empty salt is written by omitting the field.
    """
    parts = text.split("@")
    if len(parts) == 4:
        return parts, ""
    if len(parts) == 5:
        if not parts[4]:
            raise MalformedObjectKeyStringError(
                f"empty cache_salt field in {where}", rule="KEY-SALT-FIELD"
            )
        return parts[:4], parts[4]
    raise MalformedObjectKeyStringError(
        f"{where} has {len(parts)} '@' fields, needs 4 or 5", rule="KEY-STRING-FORM"
    )
