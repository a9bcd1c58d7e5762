"""EncodedObjectKey: the JSON-safe form of an ObjectKey (SPEC "EncodedObjectKey",
rules KEY-ENCODED-FIELDS, KEY-HEX-CANONICAL)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from lmckv.reference_impl.keys.errors import MalformedObjectKeyStringError
from lmckv.reference_impl.keys.hex_fields import read_chunk_hash
from lmckv.reference_impl.keys.object_key import ObjectKey

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
