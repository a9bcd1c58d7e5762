"""LMCache's serde calls, made as its releases make them (``lmcache.v1.distributed.serde``): the
processor its factory builds from a ``"serde"`` object (``create_serde_processor`` of a
``SerdeConfig``), driven as the L2 wrapper drives it (``submit_serialize(srcs, dsts, keys)``
then ``submit_deserialize``, each polled until done), and the stand-ins of what a serde uses of
LMCache's ``MemoryObj`` and ``ObjectKey``. The end-to-end table (bench/accuracy), the store-path
benchmark and the serde contract (:mod:`.serde_contract`) all call serdes through this module.
A failed build or task raises :class:`SerdeFailed` with the exception the processor logged.
"""

from __future__ import annotations

import importlib
import logging
import time
from dataclasses import dataclass
from typing import Any

import torch

from .lmcache_close import close_bounded

SERDE_PACKAGE = "lmcache.v1.distributed.serde"
#: Seconds one serialize or deserialize task may take before ``SerdeFailed``.
TASK_TIMEOUT_S = 120.0


class SerdeFailed(RuntimeError):
    """The installed LMCache could not build or run a serde; the message says why."""


@dataclass
class LMCacheObj:
    """What a serde uses of upstream's ``MemoryObj``: its tensor, its bytes, and the size a
    serializer reports it wrote (``set_used_size``)."""

    tensor: torch.Tensor
    used: int | None = None

    @property
    def byte_array(self) -> memoryview:
        """The tensor's bytes, writable in place."""
        array: Any = self.tensor.view(torch.uint8).reshape(-1).numpy()
        return memoryview(array)

    def set_used_size(self, n: int) -> None:
        self.used = n


@dataclass(frozen=True)
class ObjectKeyFields:
    """What a serde reads of upstream's ``ObjectKey``: the chunk hash (a checksum frame's
    fingerprint) and the salt that selects an aesgcm key."""

    chunk_hash: bytes = bytes(range(32))
    model_name: str = "org/model"
    kv_rank: int = 0
    object_group_id: int = 0
    cache_salt: str = ""


def serde_config(serde: dict[str, Any]) -> Any:
    base = importlib.import_module(f"{SERDE_PACKAGE}.base")
    kwargs = {k: v for k, v in serde.items() if k != "type"}
    return base.SerdeConfig(type=str(serde.get("type")), kwargs=kwargs)


def build_processor(serde: dict[str, Any]) -> Any:
    """The processor the installed factory builds from ``serde``; ``SerdeFailed`` says why it
    cannot be built."""
    try:
        serdes = importlib.import_module(SERDE_PACKAGE)
    except Exception as exc:
        raise SerdeFailed(f"lmcache not importable here ({type(exc).__name__}: {exc})") from exc
    try:
        return serdes.create_serde_processor(serde_config(serde))
    except Exception as exc:
        raise SerdeFailed(f"its serde factory refuses it: {first_line(exc)}") from exc


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


class _Captured(logging.Handler):
    """The exceptions a processor's module logs while a task runs."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.seen.append(first_line(record.exc_info[1]))


def _wait(processor: Any, query: str, task: int, what: str, captured: _Captured) -> None:
    """Poll ``processor.<query>(task)`` until it answers, at most ``TASK_TIMEOUT_S``."""
    deadline = time.monotonic() + TASK_TIMEOUT_S
    while time.monotonic() < deadline:
        done = getattr(processor, query)(task)
        if done is True:
            return
        if done is False:
            why = captured.seen[-1] if captured.seen else "no exception was logged"
            raise SerdeFailed(f"its {what} task failed: {why}")
        time.sleep(0.001)
    raise SerdeFailed(f"its {what} task did not finish in {TASK_TIMEOUT_S:.0f} s")


@dataclass(frozen=True)
class RoundTrip:
    """What one object became: the bytes the serde wrote and the object read back."""

    written: int
    back: torch.Tensor


def roundtrip(serde: dict[str, Any], objects: list[torch.Tensor]) -> list[RoundTrip]:
    """Each of ``objects`` through the processor the installed factory builds from ``serde``
    (a concrete spec: its key file exists), as the L2 wrapper calls it; ``SerdeFailed`` when
    it cannot be built or a task fails."""
    processor = build_processor(serde)
    logger = logging.getLogger(type(processor).__module__)
    captured = _Captured()
    logger.addHandler(captured)
    try:
        return [_one(processor, obj, captured) for obj in objects]
    finally:
        logger.removeHandler(captured)
        close_bounded(processor)


def _one(processor: Any, obj: torch.Tensor, captured: _Captured) -> RoundTrip:
    src = LMCacheObj(obj.contiguous())
    # An upper bound the serdes here stay under (aesgcm adds 29 bytes; casts shrink).
    dst = LMCacheObj(torch.zeros(obj.numel() * obj.element_size() + 4096, dtype=torch.uint8))
    key = ObjectKeyFields()
    task = processor.submit_serialize([src], [dst], [key])
    _wait(processor, "query_serialize_result", task, "serialize", captured)
    written = dst.used if dst.used is not None else dst.tensor.numel()
    back = LMCacheObj(torch.zeros_like(obj))
    task = processor.submit_deserialize([LMCacheObj(dst.tensor[:written])], [back], [key])
    _wait(processor, "query_deserialize_result", task, "deserialize", captured)
    return RoundTrip(written, back.tensor)
