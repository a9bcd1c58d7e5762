"""An operator's own causal LM for the end-to-end measurement (``lmckv bench e2e --model``).

A model is a local Hugging Face folder (``config.json`` and safetensors weights, a
tokenizer) or a GGUF file; it is loaded offline (``HF_HUB_OFFLINE=1``), in float32, on the
GPU when one is present, else on the CPU. Its identity goes into the results header: name,
a revision hash computed from its files (SHA-256 over each file's name and bytes, in name
order), the dtype its weights are stored in, layers, KV heads and head_dim.

What cannot be measured is refused before loading where it can be told from the files, as a
``ModelUnusable`` whose message is one line: a model that is not a causal LM, one whose KV
cache the measurement cannot reach (a cache without per-layer key/value tensors), and one
whose float32 weights do not fit in the memory available (the message says how much it needs
against how much there is). The check counts the weights only: the caches of long contexts
come on top (SmolLM2-135M at 2,048 tokens peaked at 10.7 GB resident, bench/RESULTS.md).

A model runs no code of its own and nothing asks on stdin: ``trust_remote_code=False`` goes
to every ``from_pretrained``, a folder that references or holds Python is refused before
transformers reads it (``bench.accuracy.model_folder``), and stdin reads as empty while the
model loads. The weights are safetensors only, exactly the files whose headers gave the
parameter count: other formats beside them, safetensors transformers would not load, a
config describing another model than the headers do (counted on the meta device before
loading), and a load that left weights missing or unused are refused, so the memory check
is always of what is loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import torch

from .model_folder import (
    GGUF_SIDE_FILES,
    check_folder,
    check_loading,
    refuse_code_references,
    safetensors_params,
    tensor_count,
)
from .model_folder import ModelUnusable as ModelUnusable  # the typed error, re-exported

#: The float32 weights and their working copies: the load holds both for a moment.
LOAD_FACTOR = 2.0
#: Headroom for activations, the caches of every variant and the tokenizer.
OVERHEAD_BYTES = 512 * 2**20
#: No library may offer to run code, nor ask anything, through these.
NO_CODE: dict[str, Any] = {"local_files_only": True, "trust_remote_code": False}


@dataclass(frozen=True)
class LoadedModel:
    """A tokenizer, a float32 causal LM in eval mode on ``device``, and the model's identity
    (the results header's ``model`` object)."""

    tokenizer: Any
    model: Any
    identity: dict[str, Any]
    device: str


def revision_hash(files: list[Path]) -> str:
    """SHA-256 over each file's name and bytes, in name order (the first 16 hex digits)."""
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.name):
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def available_memory() -> int:
    """Bytes of memory available to a new allocation without swapping: psutil's
    ``virtual_memory().available`` (Linux's MemAvailable, the platform's estimate elsewhere)."""
    return int(psutil.virtual_memory().available)


@contextlib.contextmanager
def _no_stdin() -> Iterator[None]:
    """stdin reads as empty meanwhile: a prompt (``input()``) gets EOF, never an answer."""
    saved = sys.stdin
    sys.stdin = io.StringIO("")
    try:
        yield
    finally:
        sys.stdin = saved


def _config_params(config: Any) -> int:
    """Parameters of the model ``config`` describes, counted on the meta device (no memory)."""
    from transformers import AutoModelForCausalLM

    auto: Any = AutoModelForCausalLM  # untyped in transformers
    with torch.device("meta"):
        skeleton = auto.from_config(config, trust_remote_code=False)
    return tensor_count(skeleton)


def _check_memory(params: int, limit: int | None) -> None:
    """Refuse a model whose float32 copy does not fit (``limit``: bytes; None: available)."""
    need = int(params * 4 * LOAD_FACTOR) + OVERHEAD_BYTES
    have = available_memory() if limit is None else limit
    if need > have:
        raise ModelUnusable(
            f"too large for memory: {params:,} parameters need about {need / 2**30:.2f} GiB "
            f"as float32 (weights x{LOAD_FACTOR:g} while loading + "
            f"{OVERHEAD_BYTES // 2**20} MiB), {have / 2**30:.2f} GiB available"
        )


def _hf_folder(folder: Path, limit: int | None) -> tuple[Any, Any, dict[str, Any]]:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if not (folder / "config.json").is_file():
        raise ModelUnusable(f"{folder}: no config.json (a Hugging Face model folder has one)")
    files = check_folder(folder)  # before transformers reads anything of it
    config = AutoConfig.from_pretrained(folder, **NO_CODE)
    if not any(a.endswith("ForCausalLM") for a in (config.architectures or [])):
        raise ModelUnusable(
            f"not a causal LM: {folder.name} declares {config.architectures or 'no architecture'}"
            " (the measurement scores next-token predictions; it needs a *ForCausalLM model)"
        )
    params, stored = safetensors_params(files)
    described = _config_params(config)
    if described != params:
        raise ModelUnusable(
            f"config.json describes a model of {described:,} parameters, its safetensors "
            f"headers {params:,}: the weights are not this model's"
        )
    _check_memory(params, limit)
    tokenizer = AutoTokenizer.from_pretrained(folder, **NO_CODE)
    auto: Any = AutoModelForCausalLM  # (model, loading info) with output_loading_info
    model, info = auto.from_pretrained(
        folder, **NO_CODE, use_safetensors=True, dtype=torch.float32, output_loading_info=True
    )
    check_loading(info, model, params)
    name = str(getattr(config, "_name_or_path", "") or folder.name)
    identity: dict[str, Any] = {"name": Path(name).name or folder.name, "source": "safetensors"}
    identity["revision"] = revision_hash([p for p in folder.iterdir() if p.is_file()])
    identity["dtype"] = stored
    identity["parameters"] = params
    return tokenizer, model, identity


def _gguf_file(path: Path, limit: int | None) -> tuple[Any, Any, dict[str, Any]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        import gguf
    except ImportError as exc:
        raise ModelUnusable(f"reading a GGUF file needs the gguf package ({exc})") from None
    reader = gguf.GGUFReader(str(path))
    params = sum(int(t.n_elements) for t in reader.tensors)
    field = reader.fields.get("general.name")
    name = bytes(field.parts[-1]).decode() if field is not None else path.stem
    kinds = sorted({t.tensor_type.name for t in reader.tensors})
    _check_memory(params, limit)
    # transformers reads the tokenizer's configuration from the file's folder too
    refuse_code_references(path.parent, GGUF_SIDE_FILES)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name, **NO_CODE)
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32, **NO_CODE
    )
    identity: dict[str, Any] = {"name": name, "source": "gguf", "revision": revision_hash([path])}
    identity["dtype"] = "+".join(kinds)
    identity["parameters"] = params
    return tokenizer, model, identity


def load(path: Path, *, memory_limit: int | None = None) -> LoadedModel:
    """The model at ``path`` (a folder or a ``.gguf`` file), offline, float32, eval mode;
    raises ``ModelUnusable`` (one line) for a model this measurement cannot run."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import transformers  # noqa: F401 (the real-kv extra)
    except ImportError as exc:
        raise ModelUnusable(
            f"transformers is not importable ({exc}): pip install 'lmckv[real-kv]'"
        ) from None
    if not path.exists():
        raise ModelUnusable(f"{path}: no such file or folder")
    try:
        with _no_stdin():
            if path.is_dir():
                tokenizer, model, identity = _hf_folder(path, memory_limit)
            elif path.suffix == ".gguf":
                tokenizer, model, identity = _gguf_file(path, memory_limit)
            else:
                raise ModelUnusable(f"{path}: neither a model folder nor a .gguf file")
    except ModelUnusable:
        raise
    except Exception as exc:  # unreadable files, unsupported architecture, bad tokenizer...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ModelUnusable(f"cannot load {path.name}: {type(exc).__name__}: {first}") from None
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = int(text.num_attention_heads)
    identity["layers"] = int(text.num_hidden_layers)
    identity["kv_heads"] = int(getattr(text, "num_key_value_heads", None) or heads)
    identity["head_dim"] = int(getattr(text, "head_dim", None) or int(text.hidden_size) // heads)
    identity["architecture"] = str((config.architectures or [type(model).__name__])[0])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device).eval()
    return LoadedModel(tokenizer, model, identity, device)
