"""kv_rank bit packing (SPEC "kv_rank", rules KEY-KVRANK-PACK, KEY-KVRANK-RANGE)."""

from __future__ import annotations

from .errors import KVRankFieldError

KV_RANK_FIELD_MAX = 0xFF
"""Each of the four packed fields is one byte."""

KV_RANK_MAX = 0xFFFF_FFFF
"""A kv_rank is an unsigned 32-bit value."""


def _field(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise KVRankFieldError(f"{name} must be an int, got {value!r}", rule="KEY-CACHE-INT")
    if not 0 <= value <= KV_RANK_FIELD_MAX:
        raise KVRankFieldError(
            f"{name}={value} is outside 0..255 (one byte of kv_rank)", rule="KEY-KVRANK-RANGE"
        )
    return value


def compute_kv_rank(
    world_size: int, global_rank: int, local_world_size: int, local_rank: int
) -> int:
    """``world_size << 24 | global_rank << 16 | local_world_size << 8 | local_rank``.

    KEY-KVRANK-RANGE: each input must be in 0..255; upstream packs without a check, so
    ``world_size=256`` would spill into bit 32 and ``global_rank=256`` into world_size.
    """
    return (
        _field("world_size", world_size) << 24
        | _field("global_rank", global_rank) << 16
        | _field("local_world_size", local_world_size) << 8
        | _field("local_rank", local_rank)
    )


def split_kv_rank(kv_rank: int) -> tuple[int, int, int, int]:
    """The four fields KEY-KVRANK-PACK packs into ``kv_rank``: (world_size, global_rank,
    local_world_size, local_rank)."""
    return (
        kv_rank >> 24 & KV_RANK_FIELD_MAX,
        kv_rank >> 16 & KV_RANK_FIELD_MAX,
        kv_rank >> 8 & KV_RANK_FIELD_MAX,
        kv_rank & KV_RANK_FIELD_MAX,
    )
