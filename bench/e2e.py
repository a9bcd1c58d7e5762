"""End-to-end accuracy: what a quantized V cache does to the real model's predictions.

The metric KIVI (Liu et al. 2024) and KVQuant (Hooper et al. 2024) report: the model reads its
own cache after it went through the codec, and we measure how its next-token predictions
move. Method (teacher forcing over a quantized prefix):

1. Text: ``WINDOWS`` non-overlapping windows of ``CONTEXT + CONTINUATION + 1`` tokens from
   the committed passages of ``bench.corpus`` (two per passage).
2. Prefill: SmolLM2-135M-Instruct (float32, ``bench.realkv.load_model``) runs over the
   ``CONTEXT`` tokens and keeps its KV cache.
3. Quantize: the cache is cast to the cache dtype (float16 or bfloat16; K stays there) and V
   goes through a format and scope: e4m3 through the reference codec (``encode`` ->
   ``to_bytes`` -> ``from_bytes`` -> ``decode(out_v_dtype=<cache dtype>)``,
   ``bench.accuracy.codec_e4m3``), e5m2 and int8 as what-ifs (``bench.accuracy.whatif``).
   Scopes PER_TENSOR (one scale per layer blob), PER_LAYER_HEAD, PER_PAGE_HEAD (16-token
   pages) and EXTERNAL_CALIBRATED (a static per-layer scale: amax of the *other* windows'
   V at that layer over the format's max, leave-one-out).
4. Score: the ``CONTINUATION`` tokens run with that cache (teacher forcing: the true tokens
   are fed, the continuation's own K/V are computed in float32 and not quantized), and each
   position's next-token distribution is compared with the one from the same cache cast to
   the cache dtype but not quantized (the reference of that dtype).

Per token: KL(p_ref || p_quant) in nats, top-1 agreement (same argmax), and the negative
log-likelihood of the true next token. Reported per (scope, format, cache dtype): mean KL,
top-1 agreement, perplexity change exp(mean NLL_quant - mean NLL_ref) - 1, each with a 95%
block-bootstrap interval over blocks of 16 tokens (``bench.bootstrap``); the reference
perplexities of each dtype; the mean KL when only one layer is quantized, for the best and
the worst e4m3 scope in float16 (which layers the damage comes from); and the V statistics
of each layer (``bench.kvstats``) on the prefilled cache and on the synthetic family matched
to it.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from lmckv.bench import bootstrap, data, kvstats, realkv
from lmckv.bench.accuracy import codec_e4m3, whatif
from lmckv.bench.corpus import PASSAGES
from lmckv.bench.data import KVSample
from lmckv.bench.formats import E4M3, FORMATS
from lmckv.bench.impls import CodecImpl
from lmckv.bench.progress import bar

E2E_SCOPES = ("PER_TENSOR", "PER_LAYER_HEAD", "PER_PAGE_HEAD", "EXTERNAL_CALIBRATED")
CACHE_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
CONTEXT, CONTINUATION, WINDOWS, BLOCK, PAGE_SIZE = 256, 64, 4, 16, 16
#: Sequences per batched forward pass (each with its own cache).
BATCH = 13
#: Windows the one-layer-at-a-time attribution runs on (30 forward passes per scope each).
LAYER_WINDOWS = 1
NONE = "NONE"


@dataclass(frozen=True)
class Variant:
    """A cache: V in ``fmt`` with ``scope`` (``NONE``/"none": only cast), in ``dtype``;
    ``layer`` set: only that layer quantized."""

    scope: str
    fmt: str
    dtype: str
    layer: int | None = None


@dataclass
class _Scores:
    """Per-token KL, agreement and NLL of one variant, over all windows in order."""

    kl: list[float]
    top1: list[float]
    nll: list[float]


def windows(tokenizer: Any) -> list[torch.Tensor]:
    """``WINDOWS`` token windows [1, CONTEXT + CONTINUATION + 1], two per passage."""
    length = CONTEXT + CONTINUATION + 1
    out = []
    for passage in PASSAGES:
        ids = tokenizer(passage, return_tensors="pt")["input_ids"]
        out += [ids[:, s : s + length] for s in range(0, ids.shape[1] - length + 1, length)]
    if len(out) < WINDOWS:
        raise realkv.RealKVUnavailable(f"the corpus gives {len(out)} windows < {WINDOWS}")
    return out[:WINDOWS]


def _paged(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Cache layout [1, heads, T, d] float32 -> token-major paged [T/16, 16, heads, d]."""
    tm = t[0].transpose(0, 1).to(dtype)
    return tm.reshape(tm.shape[0] // PAGE_SIZE, PAGE_SIZE, *tm.shape[1:])


def _unpaged(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1, *t.shape[2:]).transpose(0, 1).unsqueeze(0).to(torch.float32)


def quantize_layer(
    impl: CodecImpl, k: torch.Tensor, v: torch.Tensor, variant: Variant, calib_amax: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """One layer's (K, V) [1, heads, T, d] float32 as the variant's cache would give them."""
    dtype = CACHE_DTYPES[variant.dtype]
    kp, vp = _paged(k, dtype), _paged(v, dtype)
    if variant.fmt == "none":
        return _unpaged(kp), _unpaged(vp)
    sample = KVSample(torch.empty(0), kp, vp, calib_amax)
    if variant.fmt == E4M3.name:
        v_hat = codec_e4m3(impl, sample, variant.scope)[2]
    else:
        v_hat = whatif(sample, variant.scope, FORMATS[variant.fmt])[2]
    return _unpaged(kp), _unpaged(v_hat)


class _Window:
    """One window: its prefilled cache (float32 K/V per layer), kept for every variant."""

    def __init__(self, model: Any, ids: torch.Tensor) -> None:
        with torch.inference_mode():
            out = model(ids[:, :CONTEXT], use_cache=True)
        self.cache = out.past_key_values
        self.kv = [(layer.keys.clone(), layer.values.clone()) for layer in self.cache.layers]
        self.inputs = ids[:, CONTEXT : CONTEXT + CONTINUATION]
        self.targets = ids[0, CONTEXT + 1 : CONTEXT + CONTINUATION + 1]

    def log_probs(
        self, model: Any, caches: list[list[tuple[torch.Tensor, torch.Tensor]]]
    ) -> torch.Tensor:
        """Next-token log-probabilities [len(caches), CONTINUATION, vocab] over each cache."""
        for index, layer in enumerate(self.cache.layers):
            layer.keys = torch.cat([c[index][0] for c in caches])
            layer.values = torch.cat([c[index][1] for c in caches])
        with torch.inference_mode():
            logits = model(
                self.inputs.expand(len(caches), -1), past_key_values=self.cache, use_cache=True
            ).logits
        return torch.log_softmax(logits.to(torch.float32), dim=-1)


def _score(ref: torch.Tensor, quant: torch.Tensor, targets: torch.Tensor) -> _Scores:
    kl = (ref.exp() * (ref - quant)).sum(-1)
    top1 = (ref.argmax(-1) == quant.argmax(-1)).to(torch.float32)
    nll = -quant.gather(-1, targets.view(-1, 1)).squeeze(-1)
    return _Scores(kl.tolist(), top1.tolist(), nll.tolist())


def _blocks(values: list[float]) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64)
    return t.view(-1, BLOCK).mean(dim=1).tolist()


class _Run:
    """Model, windows and calibration; scores variants window by window in batches."""

    def __init__(self, impl: CodecImpl, model: Any, ids: list[torch.Tensor]) -> None:
        self.impl, self.model = impl, model
        self.windows = [_Window(model, w) for w in ids]
        layer_amax = [[float(v.abs().max()) for _, v in w.kv] for w in self.windows]
        # EXTERNAL_CALIBRATED: |V|'s max over the other windows at the same layer
        self.calib_amax = [
            [
                max(layer_amax[o][layer] for o in range(len(ids)) if o != w)
                for layer in range(len(layer_amax[w]))
            ]
            for w in range(len(ids))
        ]

    def _cache(self, w: int, variant: Variant) -> list[tuple[torch.Tensor, torch.Tensor]]:
        window = self.windows[w]
        out = []
        for layer, (k, v) in enumerate(window.kv):
            quantized = variant.layer is None or variant.layer == layer
            chosen = variant if quantized else Variant(NONE, "none", variant.dtype)
            out.append(quantize_layer(self.impl, k, v, chosen, self.calib_amax[w][layer]))
        return out

    def score(
        self, variants: list[Variant], pbar: Any, windows: int = WINDOWS
    ) -> dict[Variant, _Scores]:
        """Scores of each variant against its dtype's unquantized reference, over the first
        ``windows`` windows."""
        scores = {v: _Scores([], [], []) for v in variants}
        refs = {Variant(NONE, "none", v.dtype) for v in variants}
        ordered = sorted(refs, key=str) + [v for v in variants if v not in refs]
        for w, window in enumerate(self.windows[:windows]):
            logp: dict[Variant, torch.Tensor] = {}
            for start in range(0, len(ordered), BATCH):
                batch = ordered[start : start + BATCH]
                out = window.log_probs(self.model, [self._cache(w, v) for v in batch])
                logp.update(zip(batch, out, strict=True))
                pbar.update(len(batch))
            for variant in variants:
                ref = logp[Variant(NONE, "none", variant.dtype)]
                got = _score(ref, logp[variant], window.targets)
                scores[variant].kl += got.kl
                scores[variant].top1 += got.top1
                scores[variant].nll += got.nll
        return scores


def _row(
    variant: Variant,
    metric: str,
    blocks: list[float],
    transform: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]] | None = None,
) -> dict[str, Any]:
    value, low, high = bootstrap.interval(blocks, transform)
    return {
        "kind": "e2e",
        "model": realkv.MODEL_NAME,
        "scope": variant.scope,
        "fmt": variant.fmt,
        "cache_dtype": variant.dtype,
        "layer": variant.layer,
        "metric": metric,
        "value": value,
        "ci_low": low,
        "ci_high": high,
        "tokens": len(blocks) * BLOCK,
        "windows": len(blocks) * BLOCK // CONTINUATION,
        "blocks": blocks,
    }


def _rows(scores: dict[Variant, _Scores]) -> Iterator[dict[str, Any]]:
    """kl, top1, ppl_change per variant; ppl of each reference; layer_kl per one-layer variant."""
    for variant, s in scores.items():
        if variant.scope == NONE:
            yield _row(variant, "ppl", _blocks(s.nll), np.exp)
        elif variant.layer is not None:
            yield _row(variant, "layer_kl", _blocks(s.kl))
        else:
            ref = scores[Variant(NONE, "none", variant.dtype)]
            delta = [q - r for q, r in zip(s.nll, ref.nll, strict=True)]
            yield _row(variant, "kl", _blocks(s.kl))
            yield _row(variant, "top1", _blocks(s.top1))
            yield _row(variant, "ppl_change", _blocks(delta), np.expm1)


def _stats_rows(source: str, layers: list[torch.Tensor]) -> Iterator[dict[str, Any]]:
    """``bench.kvstats`` of each layer's paged V, as e2e rows without interval."""
    for layer, v in enumerate(layers):
        for metric, value in kvstats.v_stats(v).items():
            yield {
                "kind": "e2e",
                "model": source,
                "scope": NONE,
                "fmt": "none",
                "cache_dtype": str(v.dtype).removeprefix("torch."),
                "layer": layer,
                "metric": metric,
                "value": value,
                "ci_low": None,
                "ci_high": None,
                "tokens": v.shape[0] * v.shape[1],
                "windows": 1,
            }


def _threads() -> int:
    """Every core this process may use (the model is not timed; one thread would double
    the wall time)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def evaluate(impl: CodecImpl, *, progress: bool = True) -> Iterator[dict[str, Any]]:
    """The e2e rows (this module's docstring); raises ``RealKVUnavailable`` when the model
    cannot be loaded here."""
    tokenizer, model = realkv.load_model(realkv.model_file())
    previous = torch.get_num_threads()
    torch.set_num_threads(max(previous, _threads()))
    try:
        run = _Run(impl, model, windows(tokenizer))
        main = [
            Variant(scope, fmt, dtype)
            for dtype in CACHE_DTYPES
            for fmt in FORMATS
            for scope in E2E_SCOPES
        ]
        references = [Variant(NONE, "none", dtype) for dtype in CACHE_DTYPES]
        layers = len(run.windows[0].kv)
        total = WINDOWS * (len(main) + len(references)) + LAYER_WINDOWS * (2 * layers + 1)
        pbar = bar(total, f"e2e {realkv.MODEL_NAME}", enabled=progress, unit="seq")
        scores = run.score(references + main, pbar)
        yield from _rows(scores)
        e4m3 = sorted(
            (v for v in main if v.fmt == E4M3.name and v.dtype == "float16"),
            key=lambda v: statistics.fmean(scores[v].kl),
        )
        per_layer = [
            Variant(v.scope, v.fmt, v.dtype, layer)
            for v in (e4m3[0], e4m3[-1])
            for layer in range(layers)
        ]
        yield from _rows(run.score(per_layer, pbar, LAYER_WINDOWS))
        pbar.close()
        first = run.windows[0].kv
        yield from _stats_rows(
            f"real:{realkv.MODEL_NAME}", [_paged(v, torch.float16) for _, v in first]
        )
        matched = data.synthetic("matched")
        yield from _stats_rows("synthetic:matched", [s.v for s in matched.samples])
    finally:
        torch.set_num_threads(previous)


def describe() -> dict[str, Any]:
    """This phase's configuration, for the results header."""
    return {
        "model": realkv.MODEL_NAME,
        "windows": WINDOWS,
        "context": CONTEXT,
        "continuation": CONTINUATION,
        "block": BLOCK,
        "scopes": list(E2E_SCOPES),
        "formats": list(FORMATS),
        "cache_dtypes": list(CACHE_DTYPES),
        "layer_windows": LAYER_WINDOWS,
        "bootstrap": {"replicates": bootstrap.REPLICATES, "level": bootstrap.LEVEL},
    }


def phase(
    impl: CodecImpl | None, *, skip: str | None = None, progress: bool = True
) -> Iterator[dict[str, Any]]:
    """The run's e2e rows, or one skip row saying why there are none (``skip``: the option
    that turned the phase off)."""
    what = f"e2e real:{realkv.MODEL_NAME}"
    if skip is not None:
        yield {"kind": "skip", "what": what, "reason": skip}
        return
    if impl is None:
        yield {"kind": "skip", "what": what, "reason": "reference implementation not loaded"}
        return
    try:
        rows = list(evaluate(impl, progress=progress))
    except realkv.RealKVUnavailable as exc:
        yield {"kind": "skip", "what": what, "reason": str(exc)}
        return
    yield from rows
