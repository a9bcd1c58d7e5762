"""ObjectKey: the identity of one stored object in the distributed storage manager
(SPEC "ObjectKey", rules KEY-MODEL-CHARS, KEY-SALT-*, KEY-GROUP-RANGE, KEY-KVRANK-WIDTH,
KEY-HASH-BYTES), and EncodedObjectKey, its JSON-safe form (SPEC "EncodedObjectKey", rules
KEY-ENCODED-FIELDS, KEY-HEX-CANONICAL). Each converts to the other, as upstream's do, so the
two live in one module (no import circle)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .errors import MalformedObjectKeyStringError, ObjectKeyInvariantError
from .hex_fields import read_chunk_hash
from .kv_rank import KV_RANK_MAX, compute_kv_rank

MODEL_FORBIDDEN_CHARS = frozenset("@\x00")
"""``@`` separates serialized fields; NUL ends C strings in the native connector."""

SALT_FORBIDDEN_CHARS = frozenset("@/\\\x00")
"""``@`` separates fields; ``/`` and ``\\`` separate paths; NUL ends C strings."""

SALT_MAX_LEN = 128
"""Longest cache_salt, in characters."""

GROUP_ID_MAX = 2**63 - 1
"""KEY-GROUP-RANGE: object_group_id fits a signed 64-bit integer in every implementation."""


def _require_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ObjectKeyInvariantError(f"{name} must be an int, got {value!r}", rule="KEY-CACHE-INT")
    return value


@dataclass(frozen=True)
class ObjectKey:
    """Identity of one object: chunk hash, model, kv_rank, object group, cache salt."""

    chunk_hash: bytes
    model_name: str
    kv_rank: int
    object_group_id: int = 0
    cache_salt: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.chunk_hash, bytes):
            raise ObjectKeyInvariantError(
                f"chunk_hash must be bytes, got {type(self.chunk_hash).__name__}",
                rule="KEY-HASH-BYTES",
            )
        if not isinstance(self.model_name, str):
            raise ObjectKeyInvariantError(
                f"model_name must be a str, got {self.model_name!r}", rule="KEY-CACHE-MODEL"
            )
        bad_model = MODEL_FORBIDDEN_CHARS & set(self.model_name)
        if bad_model:
            raise ObjectKeyInvariantError(
                f"model_name must not contain {sorted(bad_model)!r} (got {self.model_name!r})",
                rule="KEY-MODEL-CHARS",
            )
        kv_rank = _require_int("kv_rank", self.kv_rank)
        if not 0 <= kv_rank <= KV_RANK_MAX:
            raise ObjectKeyInvariantError(
                f"kv_rank must be in 0..2**32-1 (got {kv_rank})", rule="KEY-KVRANK-WIDTH"
            )
        if not 0 <= _require_int("object_group_id", self.object_group_id) <= GROUP_ID_MAX:
            raise ObjectKeyInvariantError(
                f"object_group_id must be in 0..2**63-1 (got {self.object_group_id})",
                rule="KEY-GROUP-RANGE",
            )
        if not isinstance(self.cache_salt, str):
            raise ObjectKeyInvariantError(
                f"cache_salt must be a str, got {self.cache_salt!r}", rule="KEY-SALT-CHARS"
            )
        bad_salt = SALT_FORBIDDEN_CHARS & set(self.cache_salt)
        if bad_salt:
            raise ObjectKeyInvariantError(
                f"cache_salt must not contain {sorted(bad_salt)!r} (got {self.cache_salt!r})",
                rule="KEY-SALT-CHARS",
            )
        for name in ("model_name", "cache_salt"):
            try:
                getattr(self, name).encode("utf-8")
            except UnicodeEncodeError:
                # KEY-TEXT-UNICODE: e.g. a lone surrogate from os.listdir's surrogateescape.
                raise ObjectKeyInvariantError(
                    f"{name} is not Unicode text (lone surrogate): {getattr(self, name)!r}",
                    rule="KEY-TEXT-UNICODE",
                ) from None
        if len(self.cache_salt) > SALT_MAX_LEN:
            raise ObjectKeyInvariantError(
                f"cache_salt exceeds max length {SALT_MAX_LEN} (got {len(self.cache_salt)})",
                rule="KEY-SALT-LENGTH",
            )

    def to_encoded_object_key(self) -> EncodedObjectKey:
        """The JSON-safe projection: chunk_hash as lowercase hex, other fields verbatim."""
        return EncodedObjectKey(
            chunk_hash_hex=self.chunk_hash.hex(),
            model_name=self.model_name,
            kv_rank=self.kv_rank,
            object_group_id=self.object_group_id,
            cache_salt=self.cache_salt,
        )

    @staticmethod
    def IntHash2Bytes(chunk_hash: int) -> bytes:
        """A test helper of upstream: the int as 4 big-endian bytes (0 .. 2**32-1)."""
        if isinstance(chunk_hash, bool) or not isinstance(chunk_hash, int):
            raise ObjectKeyInvariantError(
                f"chunk_hash must be an int, got {chunk_hash!r}", rule="KEY-KVRANK-PACK"
            )
        if not 0 <= chunk_hash <= 0xFFFF_FFFF:
            raise ObjectKeyInvariantError(
                f"chunk_hash {chunk_hash} does not fit 4 bytes", rule="KEY-KVRANK-PACK"
            )
        return chunk_hash.to_bytes(4, byteorder="big")

    @staticmethod
    def Bytes2IntHash(chunk_hash: bytes) -> int:
        """A test helper of upstream: big-endian bytes as an int, masked to 64 bits."""
        return int.from_bytes(chunk_hash, byteorder="big") & ((1 << 64) - 1)

    @staticmethod
    def ComputeKVRank(
        world_size: int,
        global_rank: int,
        local_world_size: int,
        local_rank: int,
    ) -> int:
        """Pack four one-byte fields into a kv_rank (KEY-KVRANK-PACK, KEY-KVRANK-RANGE).

        Example: TP=4, PP=2, TP worker 1 on node 1: ``ComputeKVRank(8, 5, 4, 1)`` is
        ``0x08050401``.
        """
        return compute_kv_rank(world_size, global_rank, local_world_size, local_rank)

    @staticmethod
    def WorldSizeFromKVRank(kv_rank: int) -> int:
        """The world_size byte of a packed kv_rank (bits 24..31; KEY-KVRANK-PACK)."""
        if isinstance(kv_rank, bool) or not isinstance(kv_rank, int):
            raise ObjectKeyInvariantError(
                f"kv_rank must be an int, got {kv_rank!r}", rule="KEY-KVRANK-PACK"
            )
        return (kv_rank >> 24) & 0xFF


_REQUIRED_FIELDS = ("chunk_hash_hex", "model_name", "kv_rank")
_OPTIONAL_FIELDS = {"object_group_id": 0, "cache_salt": ""}
_FIELD_TYPES: dict[str, type] = {
    "chunk_hash_hex": str,
    "model_name": str,
    "kv_rank": int,
    "object_group_id": int,
    "cache_salt": str,
}


@dataclass(frozen=True)
class EncodedObjectKey:
    """ObjectKey with ``chunk_hash`` as lowercase hex; other fields verbatim."""

    chunk_hash_hex: str
    model_name: str
    kv_rank: int
    object_group_id: int = 0
    cache_salt: str = ""

    def to_object_key(self) -> ObjectKey:
        """The ObjectKey; bad hex or a broken ObjectKey invariant raises KeyFormatError."""
        if not isinstance(self.chunk_hash_hex, str):
            raise MalformedObjectKeyStringError(
                f"chunk_hash_hex must be a str, got {self.chunk_hash_hex!r}",
                rule="KEY-ENCODED-FIELDS",
            )
        return ObjectKey(
            chunk_hash=read_chunk_hash(self.chunk_hash_hex, "EncodedObjectKey.chunk_hash_hex"),
            model_name=self.model_name,
            kv_rank=self.kv_rank,
            object_group_id=self.object_group_id,
            cache_salt=self.cache_salt,
        )

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON object: the five field names as keys."""
        return asdict(self)

    @staticmethod
    def from_json_dict(obj: Mapping[str, Any]) -> EncodedObjectKey:
        """Read a decoded JSON object: the three required fields, the two optional ones
        (defaults 0 and ""), no other key, and each value of its JSON type."""
        if not isinstance(obj, Mapping):
            raise MalformedObjectKeyStringError(
                f"EncodedObjectKey must be a JSON object, got {type(obj).__name__}",
                rule="KEY-ENCODED-FIELDS",
            )
        unknown = sorted(str(name) for name in obj if name not in _FIELD_TYPES)
        if unknown:
            raise MalformedObjectKeyStringError(
                f"unknown EncodedObjectKey fields {unknown}", rule="KEY-ENCODED-FIELDS"
            )
        missing = [name for name in _REQUIRED_FIELDS if name not in obj]
        if missing:
            raise MalformedObjectKeyStringError(
                f"EncodedObjectKey lacks fields {missing}", rule="KEY-ENCODED-FIELDS"
            )
        values = {**_OPTIONAL_FIELDS, **obj}
        for name, kind in _FIELD_TYPES.items():
            value = values[name]
            if isinstance(value, bool) or not isinstance(value, kind):
                raise MalformedObjectKeyStringError(
                    f"EncodedObjectKey.{name} must be {kind.__name__}, got {value!r}",
                    rule="KEY-ENCODED-FIELDS",
                )
        return EncodedObjectKey(**values)
