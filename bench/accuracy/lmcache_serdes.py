"""The serdes the installed LMCache registers, driven through its own factory and parser.

An operator selects a serde by pasting one ``--l2-adapter`` JSON object whose ``"serde"``
object names a type the release's serde factory registers
(``lmcache.v1.distributed.serde.factory``). This module asks the installed release, never a
list of its own:

- ``registered``: the names the factory registers. Importing the package
  ``lmcache.v1.distributed.serde`` registers every serde module it ships;
  ``get_registered_serde_types`` lists them.
- ``build_adapter``: what a pasted spec builds: LMCache's argument parser
  (``add_l2_adapters_args``, ``parse_args_to_l2_adapters_config``), its adapter factory
  (``create_l2_adapter``) and its serde factory (``create_serde_processor``). The page's
  placeholder paths (``BASE_PLACEHOLDER``, ``KEY_PLACEHOLDER``) become a temporary folder and
  a temporary 32-byte master key.
- ``roundtrip``: one object through the processor the factory builds, called as LMCache's L2
  wrapper calls it (``submit_serialize`` then ``submit_deserialize``, polled): the bytes the
  serde wrote and what it gives back. A failed task raises ``SerdeFailed`` with the
  exception the processor logged.

Objects are LMCache's: one chunk of ``CHUNK_TOKENS`` tokens of every layer, laid out
``[2, layers, tokens, heads x head_dim]`` (``object_chunks``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...conformance.store import catalogue
from ...conformance.store.sizes import DEFAULT_CHUNK_TOKENS as CHUNK_TOKENS
from .l2_serdes import KEY_PLACEHOLDER, LMCacheObj

SERDE_PACKAGE = "lmcache.v1.distributed.serde"
ADAPTER_CONFIG = "lmcache.v1.distributed.l2_adapters.config"
ADAPTERS = "lmcache.v1.distributed.l2_adapters"
#: The adapter the page's JSON names, and its placeholders (replaced before a build).
ADAPTER_TYPE = catalogue.FS.name
BASE_PLACEHOLDER = "/path/to/cache"
#: Seconds one serialize or deserialize task may take before ``SerdeFailed``.
TASK_TIMEOUT_S = 120.0


class SerdeFailed(RuntimeError):
    """The installed LMCache could not build or run a serde; the message says why."""


@dataclass(frozen=True)
class _Key:
    """What a serde reads of upstream's ``ObjectKey``: the salt that selects its key."""

    cache_salt: str = ""


def registered() -> tuple[list[str], str]:
    """(the serde names the installed LMCache registers, where they came from); an empty
    list and the reason where ``lmcache`` does not import."""
    try:
        package = importlib.import_module(SERDE_PACKAGE)
        names = sorted(str(n) for n in package.get_registered_serde_types())
    except Exception as exc:  # lmcache absent, or not importable here
        return [], f"lmcache not importable here ({type(exc).__name__}: {exc})"
    return names, f"{SERDE_PACKAGE}.get_registered_serde_types()"


def installed_release() -> str:
    """``lmcache X.Y.Z`` as installed, or ``no lmcache`` where its metadata is absent."""
    try:
        return f"lmcache {importlib.metadata.version('lmcache')}"
    except importlib.metadata.PackageNotFoundError:
        return "no lmcache"


def adapter_spec(serde: dict[str, Any] | None) -> dict[str, Any]:
    """The ``--l2-adapter`` object an operator pastes: an ``fs`` adapter and ``serde``."""
    spec: dict[str, Any] = {"type": ADAPTER_TYPE, "base_path": BASE_PLACEHOLDER}
    if serde is not None:
        spec["serde"] = serde
    return spec


@contextlib.contextmanager
def concrete_spec(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``spec`` with its placeholders replaced by a temporary folder and key file."""
    with tempfile.TemporaryDirectory(prefix="lmckv-serde-") as tmp:
        out = dict(spec)
        if out.get("base_path") == BASE_PLACEHOLDER:
            out["base_path"] = str(Path(tmp) / "cache")
        serde = dict(out.get("serde") or {})
        if serde.get("master_key_path") == KEY_PLACEHOLDER:
            key = Path(tmp) / "master.key"
            key.write_bytes(os.urandom(32))
            serde["master_key_path"] = str(key)
        if serde:
            out["serde"] = serde
        yield out


def _serde_config(serde: dict[str, Any]) -> Any:
    base = importlib.import_module(f"{SERDE_PACKAGE}.base")
    kwargs = {k: v for k, v in serde.items() if k != "type"}
    return base.SerdeConfig(type=str(serde.get("type")), kwargs=kwargs)


def build_adapter(spec: dict[str, Any]) -> str:
    """Build ``spec`` (a pasted ``--l2-adapter`` object) with the installed LMCache's parser
    and factories, close what was built, and say what was built; ``SerdeFailed`` says why
    it could not be."""
    try:
        config = importlib.import_module(ADAPTER_CONFIG)
        adapters = importlib.import_module(ADAPTERS)
        serdes = importlib.import_module(SERDE_PACKAGE)
    except Exception as exc:
        raise SerdeFailed(f"lmcache not importable here ({type(exc).__name__}: {exc})") from exc
    with concrete_spec(spec) as concrete:
        parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
        config.add_l2_adapters_args(parser)
        try:
            parsed = parser.parse_args(["--l2-adapter", json.dumps(concrete)])
            adapter_config = config.parse_args_to_l2_adapters_config(parsed).adapters[0]
            adapter = adapters.create_l2_adapter(adapter_config)
        except Exception as exc:
            raise SerdeFailed(f"its adapter parser or factory refuses it: {_first(exc)}") from exc
        with contextlib.suppress(Exception):  # closing is best effort
            adapter.close()
        serde_config = getattr(adapter_config, "serde_config", None)
        if serde_config is None:
            return f"builds a {type(adapter).__name__} without a serde"
        try:
            processor = serdes.create_serde_processor(serde_config)
        except Exception as exc:
            raise SerdeFailed(f"its serde factory refuses it: {_first(exc)}") from exc
        with contextlib.suppress(Exception):
            processor.close()
        return f"builds a {type(adapter).__name__} with a {type(processor).__name__}"


def _first(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


class _Captured(logging.Handler):
    """The exceptions a processor's module logs while a task runs."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.seen.append(_first(record.exc_info[1]))


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
    (this module's docstring); ``SerdeFailed`` when it cannot be built or a task fails."""
    try:
        serdes = importlib.import_module(SERDE_PACKAGE)
    except Exception as exc:
        raise SerdeFailed(f"lmcache not importable here ({type(exc).__name__}: {exc})") from exc
    with concrete_spec({"serde": serde}) as concrete:
        try:
            processor = serdes.create_serde_processor(_serde_config(concrete["serde"]))
        except Exception as exc:
            raise SerdeFailed(f"its serde factory refuses it: {_first(exc)}") from exc
        logger = logging.getLogger(type(processor).__module__)
        captured = _Captured()
        logger.addHandler(captured)
        try:
            return [_one(processor, obj, captured) for obj in objects]
        finally:
            logger.removeHandler(captured)
            with contextlib.suppress(Exception):
                processor.close()


def _one(processor: Any, obj: torch.Tensor, captured: _Captured) -> RoundTrip:
    src = LMCacheObj(obj.contiguous())
    # An upper bound the serdes here stay under (aesgcm adds 29 bytes; casts shrink).
    dst = LMCacheObj(torch.zeros(obj.numel() * obj.element_size() + 4096, dtype=torch.uint8))
    key = _Key()
    task = processor.submit_serialize([src], [dst], [key])
    _wait(processor, "query_serialize_result", task, "serialize", captured)
    written = dst.used if dst.used is not None else dst.tensor.numel()
    back = LMCacheObj(torch.zeros_like(obj))
    task = processor.submit_deserialize([LMCacheObj(dst.tensor[:written])], [back], [key])
    _wait(processor, "query_deserialize_result", task, "deserialize", captured)
    return RoundTrip(written, back.tensor)


def object_chunks(
    kv: list[tuple[torch.Tensor, torch.Tensor]], dtype: torch.dtype
) -> list[torch.Tensor]:
    """LMCache's objects of one prefilled cache (per layer K and V, ``[1, heads, T, d]``):
    ``[2, layers, tokens, heads x head_dim]`` in ``dtype``, one per ``CHUNK_TOKENS`` tokens."""

    def rows(t: torch.Tensor) -> torch.Tensor:
        return t[0].transpose(0, 1).reshape(t.shape[2], -1).to(dtype)

    whole = torch.stack(
        [torch.stack([rows(k) for k, _ in kv]), torch.stack([rows(v) for _, v in kv])]
    )
    return [c.contiguous() for c in torch.split(whole, CHUNK_TOKENS, dim=2)]
