"""CacheEngineKey and LayerCacheEngineKey, and their ``@``-separated string form
(SPEC "CacheEngineKey strings", rules KEY-CACHE-*).

Grammar (every field ASCII unless noted; ``@`` separates fields)::

    key       = model "@" int "@" int "@" hash "@" dtype [ "@" layer ] *( "@" tag )
    model     = *( any character except "@" )          ; UTF-8
    int       = "0" / [ "-" ] nonzero *digit           ; signed 64-bit
    hash      = 1*hexlow / "-" nonzerohex *hexlow      ; lowercase hex, any width
    dtype     = one name of CACHE_KEY_DTYPE_NAMES
    layer     = "0" / nonzero *digit                   ; signed 64-bit, >= 0
    tag       = tagname "%" tagvalue                   ; name: no "@" "%"; value: no "@"
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from .errors import CacheKeyError

TAG_PREFIX = "lmcache.tag."
"""Request-config keys starting with this prefix become tags of the key string."""

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

TORCH_DTYPE_TO_STR_DTYPE: dict[torch.dtype, str] = {
    torch.float16: "half",
    torch.bfloat16: "bfloat16",
    torch.float32: "float",
    torch.float64: "double",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.bool: "bool",
}
for _attr, _name in (
    ("float8_e4m3fn", "fp8_e4m3fn"),
    ("float8_e4m3fnuz", "fp8_e4m3fnuz"),
    ("float8_e5m2", "fp8_e5m2"),
    ("float8_e5m2fnuz", "fp8_e5m2fnuz"),
):
    if hasattr(torch, _attr):
        TORCH_DTYPE_TO_STR_DTYPE[getattr(torch, _attr)] = _name

STR_DTYPE_TO_TORCH_DTYPE: dict[str, torch.dtype] = {
    name: dtype for dtype, name in TORCH_DTYPE_TO_STR_DTYPE.items()
}

_DECIMAL = re.compile(r"0|-?[1-9][0-9]*")
_LAYER_ID = re.compile(r"0|[1-9][0-9]*")
_HASH = re.compile(r"[0-9a-f]+|-[1-9a-f][0-9a-f]*")
_INT64_DIGITS = 20


def _int_rule(name: str) -> str:
    """KEY-CACHE-LAYER for the layer field (canonical, non-negative), else KEY-CACHE-INT."""
    return "KEY-CACHE-LAYER" if name.startswith("layer") else "KEY-CACHE-INT"


def _read_decimal(name: str, text: str, pattern: re.Pattern[str], key: str) -> int:
    """KEY-CACHE-INT: canonical ASCII decimal, no sign but '-', no spaces, fits int64."""
    if len(text) > _INT64_DIGITS or not pattern.fullmatch(text):
        raise CacheKeyError(f"bad {name} {text!r} in key string {key!r}", rule=_int_rule(name))
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise CacheKeyError(
            f"{name} {text!r} does not fit int64 in key string {key!r}", rule=_int_rule(name)
        )
    return value


def _write_decimal(name: str, value: object, *, minimum: int = INT64_MIN) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CacheKeyError(f"{name} must be an int, got {value!r}", rule=_int_rule(name))
    if not minimum <= value <= INT64_MAX:
        raise CacheKeyError(
            f"{name}={value} is outside [{minimum}, {INT64_MAX}]", rule=_int_rule(name)
        )
    return str(value)


def _render_tags(tags: tuple[tuple[str, object], ...] | None) -> str:
    """KEY-CACHE-TAG: tag names carry neither ``@`` nor ``%``; values no ``@``."""
    if not tags:
        return ""
    rendered = []
    for name, value in tags:
        text = f"{value}"
        if "@" in name or "%" in name:
            raise CacheKeyError(
                f"tag name {name!r} must not contain '@' or '%'", rule="KEY-CACHE-TAG"
            )
        if "@" in text:
            raise CacheKeyError(
                f"tag value {text!r} of tag {name!r} must not contain '@'", rule="KEY-CACHE-TAG"
            )
        rendered.append(f"{name}%{text}")
    return "@" + "@".join(rendered)


def _read_tags(fields: list[str], key: str) -> dict[str, object] | None:
    """Tags become request configs ``lmcache.tag.<name> -> <value>`` (values are str)."""
    if not fields:
        return None
    configs: dict[str, object] = {}
    for text in fields:
        name, sep, value = text.partition("%")
        if not sep:
            raise CacheKeyError(
                f"tag {text!r} has no '%' in key string {key!r}", rule="KEY-CACHE-TAG"
            )
        full = TAG_PREFIX + name
        if full in configs:
            raise CacheKeyError(
                f"duplicate tag {name!r} in key string {key!r}", rule="KEY-CACHE-TAG"
            )
        configs[full] = value
    return configs


@dataclass(slots=True)
class CacheEngineKey:
    """The key of one chunk of KV cache, written as
    ``model@world_size@worker_id@hexhash@dtype[@tag%value...]``."""

    model_name: str
    world_size: int
    worker_id: int
    chunk_hash: int | bytes
    dtype: torch.dtype
    request_configs: dict[str, Any] | None = field(default_factory=dict)
    tags: tuple[tuple[str, Any], ...] | None = field(init=False, default=None)
    _dtype_str: str = field(init=False, default="")

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, torch.dtype) or self.dtype not in TORCH_DTYPE_TO_STR_DTYPE:
            raise CacheKeyError(
                f"Unsupported dtype in CacheEngineKey: {self.dtype}", rule="KEY-CACHE-DTYPE"
            )
        self._dtype_str = TORCH_DTYPE_TO_STR_DTYPE[self.dtype]
        tag_list = [
            (name[len(TAG_PREFIX) :], value)
            for name, value in (self.request_configs or {}).items()
            if isinstance(name, str) and name.startswith(TAG_PREFIX)
        ]
        self.tags = tuple(tag_list) if tag_list else None

    def __hash__(self) -> int:
        return hash(
            (
                self.model_name,
                self.world_size,
                self.worker_id,
                self.chunk_hash,
                self._dtype_str,
                self.tags,
            )
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CacheEngineKey) or type(self) is not type(other):
            return False
        return (
            self.model_name == other.model_name
            and self.world_size == other.world_size
            and self.worker_id == other.worker_id
            and self.chunk_hash == other.chunk_hash
            and self.dtype == other.dtype
            and self.tags == other.tags
        )

    @property
    def chunk_hash_hex(self) -> str:
        """``chunk_hash`` in lowercase hex: ``bytes.hex()`` or ``format(int, "x")``."""
        if isinstance(self.chunk_hash, bytes):
            return self.chunk_hash.hex()
        if isinstance(self.chunk_hash, bool) or not isinstance(self.chunk_hash, int):
            raise CacheKeyError(
                f"chunk_hash must be int or bytes, got {self.chunk_hash!r}", rule="KEY-CACHE-HASH"
            )
        return f"{self.chunk_hash:x}"

    def _prefix(self) -> str:
        """The five fixed fields (KEY-CACHE-FORM); KEY-CACHE-MODEL forbids '@' in the model."""
        if not isinstance(self.model_name, str) or "@" in self.model_name:
            raise CacheKeyError(
                f"model_name must be a str without '@', got {self.model_name!r}",
                rule="KEY-CACHE-MODEL",
            )
        if self.chunk_hash_hex in ("", "-"):
            raise CacheKeyError("chunk_hash must not be empty", rule="KEY-CACHE-HASH")
        return (
            f"{self.model_name}@{_write_decimal('world_size', self.world_size)}"
            f"@{_write_decimal('worker_id', self.worker_id)}"
            f"@{self.chunk_hash_hex}@{self._dtype_str}"
        )

    def to_string(self) -> str:
        """The key string (KEY-CACHE-FORM); byte-identical to upstream for valid keys."""
        return self._prefix() + _render_tags(self.tags)

    @staticmethod
    def from_string(s: str) -> CacheEngineKey:
        """Parse the 5-field form plus tags; a layer id in field 6 is refused here."""
        return CacheEngineKey(**_parse_fields(s, with_layer=False))

    def split_layers(self, num_layers: int) -> list[LayerCacheEngineKey]:
        """One LayerCacheEngineKey per layer ``0 .. num_layers - 1``."""
        return [self._layer_key(layer_id) for layer_id in range(num_layers)]

    def get_first_layer(self) -> LayerCacheEngineKey:
        """The LayerCacheEngineKey of layer 0."""
        return self._layer_key(0)

    def _layer_key(self, layer_id: int) -> LayerCacheEngineKey:
        return LayerCacheEngineKey(
            model_name=self.model_name,
            world_size=self.world_size,
            worker_id=self.worker_id,
            chunk_hash=self.chunk_hash,
            dtype=self.dtype,
            request_configs=self.request_configs,
            layer_id=layer_id,
        )

    def with_new_worker_id(self, new_worker_id: int) -> CacheEngineKey:
        """A CacheEngineKey with another worker id (a layer key loses its layer, as upstream)."""
        return CacheEngineKey(
            self.model_name,
            world_size=self.world_size,
            worker_id=new_worker_id,
            chunk_hash=self.chunk_hash,
            dtype=self.dtype,
            request_configs=self.request_configs,
        )

    def to_dict(self) -> dict[str, Any]:
        """The msgpack-friendly dict upstream uses; request configs become ``"k%v"`` strings."""
        msg: dict[str, Any] = {
            "__type__": "CacheEngineKey",
            "model_name": self.model_name,
            "world_size": self.world_size,
            "worker_id": self.worker_id,
            "chunk_hash": self.chunk_hash,
            "dtype": self._dtype_str,
        }
        if self.request_configs:
            msg["request_configs"] = [f"{k}%{v}" for k, v in self.request_configs.items()]
        return msg

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> CacheEngineKey:
        """Inverse of :meth:`to_dict`; every field is type-checked (CacheKeyError)."""
        if not isinstance(d, Mapping):
            raise CacheKeyError(
                f"key dict must be a mapping, got {type(d).__name__}", rule="KEY-CACHE-FORM"
            )
        try:
            model_name, world_size = d["model_name"], d["world_size"]
            worker_id, chunk_hash, dtype_name = d["worker_id"], d["chunk_hash"], d["dtype"]
        except KeyError as missing:
            raise CacheKeyError(f"key dict lacks field {missing}", rule="KEY-CACHE-FORM") from None
        if not isinstance(model_name, str):
            raise CacheKeyError(
                f"model_name must be a str, got {model_name!r}", rule="KEY-CACHE-MODEL"
            )
        _write_decimal("world_size", world_size)
        _write_decimal("worker_id", worker_id)
        if isinstance(chunk_hash, bool) or not isinstance(chunk_hash, int | bytes):
            raise CacheKeyError(
                f"chunk_hash must be int or bytes, got {chunk_hash!r}", rule="KEY-CACHE-HASH"
            )
        if not isinstance(dtype_name, str) or dtype_name not in STR_DTYPE_TO_TORCH_DTYPE:
            raise CacheKeyError(f"unknown dtype name {dtype_name!r}", rule="KEY-CACHE-DTYPE")
        configs: dict[str, Any] | None = None
        entries = d.get("request_configs")
        if entries:
            if not isinstance(entries, list):
                raise CacheKeyError(
                    "request_configs must be a list of 'k%v' strings", rule="KEY-CACHE-TAG"
                )
            configs = {}
            for entry in entries:
                if not isinstance(entry, str) or "%" not in entry:
                    raise CacheKeyError(
                        f"bad request_configs entry {entry!r}", rule="KEY-CACHE-TAG"
                    )
                name, _, value = entry.partition("%")
                configs[name] = value
        return CacheEngineKey(
            model_name=model_name,
            world_size=world_size,
            worker_id=worker_id,
            chunk_hash=chunk_hash,
            dtype=STR_DTYPE_TO_TORCH_DTYPE[dtype_name],
            request_configs=configs,
        )


@dataclass(slots=True)
class LayerCacheEngineKey(CacheEngineKey):
    """A CacheEngineKey for one layer: ``model@ws@worker@hash@dtype@layer_id[@tag%value...]``."""

    layer_id: int = 0

    def __hash__(self) -> int:
        return hash(
            (
                self.model_name,
                self.world_size,
                self.worker_id,
                self.chunk_hash,
                self._dtype_str,
                self.tags,
                self.layer_id,
            )
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LayerCacheEngineKey):
            return False
        return CacheEngineKey.__eq__(self, other) and self.layer_id == other.layer_id

    def to_string(self) -> str:
        """KEY-CACHE-LAYER: the layer id is the sixth field, a non-negative decimal."""
        layer = _write_decimal("layer_id", self.layer_id, minimum=0)
        return f"{self._prefix()}@{layer}{_render_tags(self.tags)}"

    @staticmethod
    def from_string(s: str) -> LayerCacheEngineKey:
        """Parse the 6-field layer form plus tags."""
        fields = _parse_fields(s, with_layer=True)
        return LayerCacheEngineKey(**fields)


def _parse_fields(key: str, *, with_layer: bool) -> dict[str, Any]:
    """Constructor arguments from a key string, by the module grammar (KEY-CACHE-*)."""
    if not isinstance(key, str):
        raise CacheKeyError(
            f"key string must be a str, got {type(key).__name__}", rule="KEY-CACHE-FORM"
        )
    parts = key.split("@")
    fixed = 6 if with_layer else 5
    if len(parts) < fixed:
        raise CacheKeyError(
            f"key string {key!r} has {len(parts)} fields, needs {fixed}", rule="KEY-CACHE-FORM"
        )
    if not _HASH.fullmatch(parts[3]):
        raise CacheKeyError(
            f"bad chunk hash {parts[3]!r} in key string {key!r}", rule="KEY-CACHE-HASH"
        )
    dtype = STR_DTYPE_TO_TORCH_DTYPE.get(parts[4])
    if dtype is None:
        raise CacheKeyError(
            f"unknown dtype name {parts[4]!r} in key string {key!r}", rule="KEY-CACHE-DTYPE"
        )
    fields: dict[str, Any] = {
        "model_name": parts[0],
        "world_size": _read_decimal("world_size", parts[1], _DECIMAL, key),
        "worker_id": _read_decimal("worker_id", parts[2], _DECIMAL, key),
        "chunk_hash": int(parts[3], 16),
        "dtype": dtype,
        "request_configs": _read_tags(parts[fixed:], key),
    }
    if with_layer:
        fields["layer_id"] = _read_decimal("layer_id", parts[5], _LAYER_ID, key)
    return fields


def parse_cache_key(key_str: str) -> CacheEngineKey | LayerCacheEngineKey:
    """Parse a key string into a CacheEngineKey or a LayerCacheEngineKey (KEY-CACHE-LAYER).

    The sixth field is a layer id when it holds no ``%``; it must then be ASCII digits.
    No whitespace is stripped: the caller removes transport padding (PROTO-KEY-FIELD).
    """
    if not isinstance(key_str, str):
        raise CacheKeyError(
            f"key string must be a str, got {type(key_str).__name__}", rule="KEY-CACHE-FORM"
        )
    parts = key_str.split("@")
    if len(parts) >= 6 and "%" not in parts[5]:
        return LayerCacheEngineKey.from_string(key_str)
    return CacheEngineKey.from_string(key_str)
