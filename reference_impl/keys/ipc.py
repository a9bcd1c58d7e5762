"""IPC key fan-out into ObjectKeys (SPEC "IPC fan-out", rules KEY-IPC-FANOUT,
KEY-IPC-WORKER)."""

from __future__ import annotations

from typing import Protocol

from .errors import DescriptorError
from .kv_rank import KV_RANK_FIELD_MAX, compute_kv_rank
from .object_key import ObjectKey


class IPCCacheServerKeyLike(Protocol):
    """The fields of upstream's ``IPCCacheServerKey`` that the fan-out reads."""

    @property
    def model_name(self) -> str: ...

    @property
    def world_size(self) -> int: ...

    @property
    def worker_id(self) -> int | None: ...

    @property
    def cache_salt(self) -> str: ...


def _kv_ranks(ipc_key: IPCCacheServerKeyLike) -> list[int]:
    """KEY-IPC-WORKER: world_size in 1..255; worker_id None or in 0..world_size-1."""
    world_size, worker_id = ipc_key.world_size, ipc_key.worker_id
    if isinstance(world_size, bool) or not isinstance(world_size, int):
        raise DescriptorError(
            f"IPC key world_size must be an int, got {world_size!r}", rule="KEY-IPC-WORKER"
        )
    if not 1 <= world_size <= KV_RANK_FIELD_MAX:
        # Checked before the fan-out list is built: its size must never come from the key.
        raise DescriptorError(
            f"IPC key world_size {world_size} is outside 1..{KV_RANK_FIELD_MAX}",
            rule="KEY-IPC-WORKER",
        )
    if worker_id is None:
        workers = list(range(world_size))
    elif isinstance(worker_id, bool) or not isinstance(worker_id, int):
        raise DescriptorError(
            f"IPC key worker_id must be an int or None, got {worker_id!r}", rule="KEY-IPC-WORKER"
        )
    elif not 0 <= worker_id < world_size:
        raise DescriptorError(
            f"IPC key worker_id {worker_id} is outside 0..{world_size - 1}", rule="KEY-IPC-WORKER"
        )
    else:
        workers = [worker_id]
    return [compute_kv_rank(world_size, w, world_size, w) for w in workers]


def ipc_key_to_object_keys(
    ipc_key: IPCCacheServerKeyLike,
    chunk_hashes: list[bytes],
    object_group_ids: list[int],
) -> list[list[ObjectKey]]:
    """KEY-IPC-FANOUT: element ``i`` lists the ObjectKeys of ``object_group_ids[i]``, chunk
    major and rank minor. A key without ``worker_id`` (a lookup) fans out to every worker
    ``w`` of its world size, kv_rank ``ComputeKVRank(ws, w, ws, w)``; a worker key yields
    that worker's kv_rank only. model_name and cache_salt come from ``ipc_key``."""
    kv_ranks = _kv_ranks(ipc_key)
    return [
        [
            ObjectKey(
                chunk_hash=chunk_hash,
                model_name=ipc_key.model_name,
                kv_rank=kv_rank,
                object_group_id=object_group_id,
                cache_salt=ipc_key.cache_salt,
            )
            for chunk_hash in chunk_hashes
            for kv_rank in kv_ranks
        ]
        for object_group_id in object_group_ids
    ]
