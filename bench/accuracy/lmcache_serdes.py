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
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ...conformance.store import catalogue, lmcache_serde_calls, serde_plugins
from ...conformance.store.lmcache_close import close_bounded
from ...conformance.store.lmcache_serde_calls import (
    SERDE_PACKAGE,
    RoundTrip,
    SerdeFailed,
    first_line,
)
from ...conformance.store.sizes import DEFAULT_CHUNK_TOKENS as CHUNK_TOKENS
from .l2_serdes import KEY_PLACEHOLDER

ADAPTER_CONFIG = "lmcache.v1.distributed.l2_adapters.config"
ADAPTERS = "lmcache.v1.distributed.l2_adapters"
#: The adapter the page's JSON names, and its placeholders (replaced before a build).
ADAPTER_TYPE = catalogue.FS.name
BASE_PLACEHOLDER = "/path/to/cache"


def registered() -> tuple[list[str], str]:
    """(the serde names the installed LMCache registers, the serde plugins of the run
    included, where they came from); an empty list and the reason where ``lmcache`` does not
    import. A plugin that cannot be loaded raises ``PluginError``."""
    serde_plugins.load_all([])
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
            raise SerdeFailed(
                f"its adapter parser or factory refuses it: {first_line(exc)}"
            ) from exc
        close_bounded(adapter)
        serde_config = getattr(adapter_config, "serde_config", None)
        if serde_config is None:
            return f"builds a {type(adapter).__name__} without a serde"
        try:
            processor = serdes.create_serde_processor(serde_config)
        except Exception as exc:
            raise SerdeFailed(f"its serde factory refuses it: {first_line(exc)}") from exc
        close_bounded(processor)
        return f"builds a {type(adapter).__name__} with a {type(processor).__name__}"


def roundtrip(serde: dict[str, Any], objects: list[torch.Tensor]) -> list[RoundTrip]:
    """Each of ``objects`` through the processor the installed factory builds from ``serde``
    (its key file placeholder replaced: ``concrete_spec``); ``SerdeFailed`` when it cannot be
    built or a task fails."""
    with concrete_spec({"serde": serde}) as concrete:
        return lmcache_serde_calls.roundtrip(concrete["serde"], objects)


def layer_caches(
    chunks: list[torch.Tensor], heads: int, head_dim: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The per-layer K and V (``[1, heads, T, d]`` float32) of a cache's objects read back:
    the inverse of ``object_chunks``."""
    whole = torch.cat(chunks, dim=2).to(torch.float32)

    def unrows(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(t.shape[0], heads, head_dim).transpose(0, 1).unsqueeze(0).contiguous()

    return [(unrows(whole[0, layer]), unrows(whole[1, layer])) for layer in range(whole.shape[1])]


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
