"""End-to-end accuracy: what a quantized V cache does to the real model's predictions.

The metric KIVI (Liu et al. 2024) and KVQuant (Hooper et al. 2024) report: the model reads its
own cache after it went through the codec, and we measure how its next-token predictions
move. Method (teacher forcing over a quantized prefix):

1. Text: ``WINDOWS`` windows of ``CONTEXT + CONTINUATION + 1`` tokens (``windows``): cut
   from each committed passage of ``bench.accuracy.corpus`` in turn (two per passage at 256 tokens);
   when the passages are shorter than a window, from their concatenation, spread evenly so
   that contexts may overlap but scored continuations never do. ``--text FILE`` replaces
   the corpus with the operator's text.
2. Prefill: SmolLM2-135M-Instruct (float32, ``bench.accuracy.realkv.load_model``), or the operator's
   model (``bench.accuracy.models``), runs over the ``CONTEXT`` tokens and keeps its KV cache.
3. Quantize: the cache is cast to the cache dtype (float16 or bfloat16; K stays there) and V
   goes through a format and scope: e4m3 through the reference codec (``encode`` ->
   ``to_bytes`` -> ``from_bytes`` -> ``decode(out_v_dtype=<cache dtype>)``,
   ``bench.accuracy.reconstruction.codec_e4m3``), e5m2 and int8 as what-ifs
   (``bench.accuracy.reconstruction.whatif``).
   Scopes PER_TENSOR (one scale per layer blob), PER_LAYER_HEAD, PER_PAGE_HEAD (16-token
   pages) and EXTERNAL_CALIBRATED (a static per-layer scale: amax of the *other* windows'
   V at that layer over the format's max, leave-one-out). The e4m3 codec rows are the
   storage-only K16/V8 serde (``asym_k16_v8``) and, with the same V, the V-only one
   (``asym_k16_v8_v_only``: K is not stored, so only its bytes differ); the plain ``fp8``
   serde casts K *and* V to e4m3fn with no scale (scope ``NO_SCALE``, ``bench.accuracy.l2_serdes``).
4. Score: the ``CONTINUATION`` tokens run with that cache (teacher forcing: the true tokens
   are fed, the continuation's own K/V are computed in float32 and not quantized), and each
   position's next-token distribution is compared with the one from the same cache cast to
   the cache dtype but not quantized (the reference of that dtype).

Per token: KL(p_ref || p_quant) in nats, top-1 agreement (same argmax), and the negative
log-likelihood of the true next token. Reported per (scope, format, cache dtype): mean KL,
top-1 agreement, perplexity change exp(mean NLL_quant - mean NLL_ref) - 1, each with a 95%
block-bootstrap interval over blocks of 16 tokens (``bench.accuracy.bootstrap``); the reference
perplexities of each dtype; the mean KL when only one layer is quantized, for the best and
the worst e4m3 scope in float16 (which layers the damage comes from); and the V statistics
of each layer (``bench.accuracy.kvstats``) on the prefilled cache and on the synthetic family
matched
to it. Per serde, scope and cache dtype: the bytes it stores in L2 per token
(``l2_bytes_per_token``, ``bench.accuracy.l2_serdes``). Every other serde the installed LMCache
registers (``aesgcm``, ``turboquant``, a plugin's with ``--serde-plugin``, ...): each window's
objects through its own factory's processor; bit-exact, its rows are those of the unchanged
cache with ``exact``; lossy, the caches it gives back are scored as the variants are (kl, top-1,
perplexity change with intervals, and its bytes); a serde that fails is a skip row with what it
did (``_registered_rows``). ``--full`` adds the serde variants at longer
contexts (``SWEEP``); every row carries its ``context`` and ``serde``.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from ...conformance.store import catalogue
from ...conformance.store.lmcache_serde_calls import SerdeFailed
from ...reference_impl.kv_codec.header_fields import ScaleScope
from ..common.impls import CodecImpl
from ..common.progress import bar
from ..common.scopes import CALIBRATED_EXTERNAL, SCOPE_NAMES
from . import bootstrap, data, kvstats, l2_serdes, lmcache_serdes, models, realkv
from .corpus import LONG_PASSAGES, PASSAGES
from .data import KVSample
from .formats import E4M3, FORMATS
from .reconstruction import codec_e4m3, whatif

E2E_SCOPES = (*SCOPE_NAMES[: ScaleScope.EXTERNAL], CALIBRATED_EXTERNAL)
CACHE_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
CONTEXT, CONTINUATION, WINDOWS, BLOCK, PAGE_SIZE = 256, 64, 4, 16, 16
#: Sequences per batched forward pass (each with its own cache).
BATCH = 14
#: Windows the one-layer-at-a-time attribution runs on (30 forward passes per scope each).
LAYER_WINDOWS = 1
NONE = "NONE"
#: The longer contexts ``--full`` adds (serde variants only), and their windows.
SWEEP, SWEEP_WINDOWS = (1024, 2048), 2


@dataclass(frozen=True)
class Plan:
    """What one e2e measurement runs: every variant at ``context`` (with the per-layer
    attribution), the serde variants only at each of ``sweep``."""

    context: int = CONTEXT
    windows: int = WINDOWS
    sweep: tuple[int, ...] = ()
    sweep_windows: int = SWEEP_WINDOWS

    def __post_init__(self) -> None:
        for context in (self.context, *self.sweep):
            if context < PAGE_SIZE or context % PAGE_SIZE:
                raise ValueError(f"context {context}: a positive multiple of {PAGE_SIZE} tokens")
        if self.windows < 2 or self.sweep_windows < 2:
            raise ValueError("at least 2 windows (the calibrated scope leaves one out)")


QUICK, FULL = Plan(), Plan(sweep=SWEEP)


@dataclass(frozen=True)
class Variant:
    """A cache: V in ``fmt`` with ``scope`` (``NONE``/"none": only cast), in ``dtype``;
    ``layer`` set: only that layer quantized."""

    scope: str
    fmt: str
    dtype: str
    layer: int | None = None
    serde: str | None = None

    @property
    def reference(self) -> Variant:
        """The unquantized cache of this dtype."""
        return Variant(NONE, "none", self.dtype, serde=l2_serdes.NONE)


@dataclass
class _Scores:
    """Per-token KL, agreement and NLL of one variant, over all windows in order."""

    kl: list[float]
    top1: list[float]
    nll: list[float]


def windows(
    tokenizer: Any, plan_context: int, count: int, texts: tuple[str, ...] | None = None
) -> list[torch.Tensor]:
    """``count`` token windows [1, context + CONTINUATION + 1] (module docstring, step 1)."""
    length = plan_context + CONTINUATION + 1
    texts = texts or PASSAGES + LONG_PASSAGES
    streams = [tokenizer(text, return_tensors="pt")["input_ids"] for text in texts]
    out = [
        ids[:, s : s + length]
        for ids in streams
        for s in range(0, ids.shape[1] - length + 1, length)
    ]
    if len(out) >= count:
        return out[:count]
    joined = torch.cat(streams, dim=1)
    spare = joined.shape[1] - length
    stride = spare // (count - 1) if spare >= 0 else -1
    if stride < CONTINUATION + 1:
        raise ValueError(
            f"the text gives {joined.shape[1]} tokens: {count} windows of {plan_context} "
            f"context + {CONTINUATION + 1} need at least "
            f"{length + (count - 1) * (CONTINUATION + 1)} (give more with --text FILE)"
        )
    return [joined[:, w * stride : w * stride + length] for w in range(count)]


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
    if variant.serde == l2_serdes.FP8:
        k_hat, v_hat, _ = l2_serdes.Fp8Serde().roundtrip(kp, vp)
        return _unpaged(k_hat), _unpaged(v_hat)
    sample = KVSample(torch.empty(0), kp, vp, calib_amax)
    if variant.fmt == E4M3.name:
        v_hat = codec_e4m3(impl, sample, variant.scope)[2]
    else:
        v_hat = whatif(sample, variant.scope, FORMATS[variant.fmt])[2]
    return _unpaged(kp), _unpaged(v_hat)


class _Window:
    """One window: its prefilled cache (float32 K/V per layer on the CPU), kept for every
    variant."""

    def __init__(self, model: Any, ids: torch.Tensor, context: int) -> None:
        device = next(model.parameters()).device
        ids = ids.to(device)
        with torch.inference_mode():
            out = model(ids[:, :context], use_cache=True)
        self.cache = out.past_key_values
        layers = getattr(self.cache, "layers", None)
        if not layers or not all(
            isinstance(getattr(layer, "keys", None), torch.Tensor) for layer in layers
        ):
            raise models.ModelUnusable(
                f"no KV cache this measurement can reach: the model returned "
                f"{type(self.cache).__name__}, not a cache of per-layer key/value tensors"
            )
        self.kv = [(layer.keys.cpu().clone(), layer.values.cpu().clone()) for layer in layers]
        self.inputs = ids[:, context : context + CONTINUATION]
        self.targets = ids[0, context + 1 : context + CONTINUATION + 1]

    def log_probs(
        self, model: Any, caches: list[list[tuple[torch.Tensor, torch.Tensor]]]
    ) -> torch.Tensor:
        """Next-token log-probabilities [len(caches), CONTINUATION, vocab] over each cache."""
        device = self.inputs.device
        for index, layer in enumerate(self.cache.layers):
            layer.keys = torch.cat([c[index][0] for c in caches]).to(device)
            layer.values = torch.cat([c[index][1] for c in caches]).to(device)
        with torch.inference_mode():
            logits = model(
                self.inputs.expand(len(caches), -1), past_key_values=self.cache, use_cache=True
            ).logits
        return torch.log_softmax(logits.to(torch.float32), dim=-1).cpu()


def _score(ref: torch.Tensor, quant: torch.Tensor, targets: torch.Tensor) -> _Scores:
    kl = (ref.exp() * (ref - quant)).sum(-1)
    top1 = (ref.argmax(-1) == quant.argmax(-1)).to(torch.float32)
    nll = -quant.gather(-1, targets.cpu().view(-1, 1)).squeeze(-1)
    return _Scores(kl.tolist(), top1.tolist(), nll.tolist())


def _blocks(values: list[float]) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64)
    return t.view(-1, BLOCK).mean(dim=1).tolist()


class _Run:
    """Model, windows and calibration; scores variants window by window in batches."""

    def __init__(self, impl: CodecImpl, model: Any, ids: list[torch.Tensor], context: int) -> None:
        self.impl, self.model, self.context = impl, model, context
        self.windows = [_Window(model, w, context) for w in ids]
        #: Variants whose caches were made elsewhere (a registered serde's round trips), one
        #: per window.
        self.fixed: dict[Variant, list[list[tuple[torch.Tensor, torch.Tensor]]]] = {}
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
        if variant in self.fixed:
            return self.fixed[variant][w]
        window = self.windows[w]
        out = []
        for layer, (k, v) in enumerate(window.kv):
            quantized = variant.layer is None or variant.layer == layer
            chosen = variant if quantized else variant.reference
            out.append(quantize_layer(self.impl, k, v, chosen, self.calib_amax[w][layer]))
        return out

    def score(
        self, variants: list[Variant], pbar: Any, windows: int | None = None
    ) -> dict[Variant, _Scores]:
        """Scores of each variant against its dtype's unquantized reference, over the first
        ``windows`` windows."""
        scores = {v: _Scores([], [], []) for v in variants}
        refs = {v.reference for v in variants}
        ordered = sorted(refs, key=str) + [v for v in variants if v not in refs]
        for w, window in enumerate(self.windows[: windows or len(self.windows)]):
            logp: dict[Variant, torch.Tensor] = {}
            for start in range(0, len(ordered), BATCH):
                batch = ordered[start : start + BATCH]
                out = window.log_probs(self.model, [self._cache(w, v) for v in batch])
                logp.update(zip(batch, out, strict=True))
                pbar.update(len(batch))
            for variant in variants:
                ref = logp[variant.reference]
                got = _score(ref, logp[variant], window.targets)
                scores[variant].kl += got.kl
                scores[variant].top1 += got.top1
                scores[variant].nll += got.nll
        return scores


def _row(
    model: str,
    context: int,
    variant: Variant,
    metric: str,
    blocks: list[float],
    transform: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]] | None = None,
) -> dict[str, Any]:
    value, low, high = bootstrap.interval(blocks, transform)
    return {
        "kind": "e2e",
        "model": model,
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
        "context": context,
        "serde": variant.serde,
        "blocks": blocks,
    }


def _rows(model: str, context: int, scores: dict[Variant, _Scores]) -> Iterator[dict[str, Any]]:
    """kl, top1, ppl_change per variant (the storage-only K16/V8 ones also as the V-only
    serde: the same V, ``l2_serdes.k16v8_bytes`` checks it); ppl of each reference; layer_kl
    per one-layer variant."""
    for variant, s in scores.items():
        if variant.scope == NONE:
            yield _row(model, context, variant, "ppl", _blocks(s.nll), np.exp)
        elif variant.layer is not None:
            yield _row(model, context, variant, "layer_kl", _blocks(s.kl))
        else:
            ref = scores[variant.reference]
            delta = [q - r for q, r in zip(s.nll, ref.nll, strict=True)]
            same = [variant]
            if variant.serde == l2_serdes.K16V8:
                same.append(replace(variant, serde=l2_serdes.K16V8_V_ONLY))
            for v in same:
                yield _row(model, context, v, "kl", _blocks(s.kl))
                yield _row(model, context, v, "top1", _blocks(s.top1))
                yield _row(model, context, v, "ppl_change", _blocks(delta), np.expm1)


def _bytes_rows(
    impl: CodecImpl, model: str, context: int, window: _Window, variants: list[Variant]
) -> Iterator[dict[str, Any]]:
    """``l2_bytes_per_token`` of each serde variant, from the serialized bytes of one
    window's cache (one object per layer) over its context tokens."""
    fp8 = l2_serdes.Fp8Serde()
    for variant in variants:
        dtype = CACHE_DTYPES[variant.dtype]
        totals = dict.fromkeys((variant.serde,), 0)
        if variant.serde == l2_serdes.K16V8:
            totals[l2_serdes.K16V8_V_ONLY] = 0
        for k, v in window.kv:
            kp, vp = _paged(k, dtype), _paged(v, dtype)
            if variant.serde == l2_serdes.NONE:
                totals[l2_serdes.NONE] += (kp.numel() + vp.numel()) * dtype.itemsize
            elif variant.serde == l2_serdes.FP8:
                totals[l2_serdes.FP8] += fp8.roundtrip(kp, vp)[2]
            else:
                sample = KVSample(torch.empty(0), kp, vp, float(vp.abs().max()))
                full, part = l2_serdes.k16v8_bytes(impl, sample, variant.scope)
                totals[l2_serdes.K16V8] += full
                totals[l2_serdes.K16V8_V_ONLY] += part
        for serde, total in totals.items():
            yield {
                "kind": "e2e",
                "model": model,
                "scope": variant.scope,
                "fmt": variant.fmt,
                "cache_dtype": variant.dtype,
                "layer": None,
                "metric": "l2_bytes_per_token",
                "value": total / context,
                "ci_low": None,
                "ci_high": None,
                "tokens": context,
                "windows": 1,
                "context": context,
                "serde": serde,
            }


def _exact_row(
    model: str, context: int, dtype: str, serde: str, metric: str, value: float, windows: int
) -> dict[str, Any]:
    """A lossless serde's metric: its value for an unchanged cache, checked bit-exact."""
    return {
        "kind": "e2e",
        "model": model,
        "scope": NONE,
        "fmt": "none",
        "cache_dtype": dtype,
        "layer": None,
        "metric": metric,
        "value": value,
        "ci_low": None if metric == "l2_bytes_per_token" else value,
        "ci_high": None if metric == "l2_bytes_per_token" else value,
        "tokens": context if metric == "l2_bytes_per_token" else windows * CONTINUATION,
        "windows": 1 if metric == "l2_bytes_per_token" else windows,
        "context": context,
        "serde": serde,
        "exact": True,
    }


#: Scores variants whose caches are fixed (``_Run.fixed``) against their references.
Scorer = Callable[[list[Variant]], dict[Variant, _Scores]]


def _registered_rows(
    model: str, context: int, run: _Run, score: Scorer | None = None
) -> Iterator[dict[str, Any]]:
    """Every serde the installed LMCache registers (a plugin's too), but ``fp8`` (scored
    through the model apart): each window's LMCache objects (``lmcache_serdes.object_chunks``)
    through the processor its factory builds, in each cache dtype, one window at a time (a
    window's objects are the whole cache once more). Bit-exact in every window and dtype: kl
    0, top-1 1, perplexity change 0 with ``exact`` (checked, not estimated) and the bytes it
    wrote for the first window per token. Lossy: the caches it gave back are scored through
    the model (``score``) as any variant is, kl, top-1 and perplexity change with their
    intervals, and its bytes; a skip row where no model runs (``score`` None). A serde that
    fails: one skip row saying what it did. A serde of lmckv's catalogue that LMCache builds
    by name, which the release does not register and this measurement does not score itself,
    is a skip row saying where it comes from."""
    names, _ = lmcache_serdes.registered()
    for serde in catalogue.lmcache_extra_serdes(names, l2_serdes.SERDES):
        row = catalogue.serde(serde)
        origin = f": {row.origin}" if row.origin else ""
        reason = f"{lmcache_serdes.installed_release()} does not register it{origin}"
        yield {"kind": "skip", "what": f"e2e serde {serde}", "reason": reason, "serde": serde}
    head_dim = int(run.windows[0].kv[0][0].shape[-1])
    windows = len(run.windows)
    for serde in (n for n in names if n != l2_serdes.FP8):
        config = l2_serdes.l2_config(serde, head_dim=head_dim) or {"type": serde}
        rows: list[dict[str, Any]] = []
        try:
            for name, dtype in CACHE_DTYPES.items():
                written, caches, exact = _roundtrip_caches(config, run, name, dtype)
                if not exact:
                    rows += _lossy_rows(model, context, run, score, serde, name, caches)
                    rows.append(_bytes_row(model, context, name, serde, written))
                    continue
                rows += [
                    _exact_row(model, context, name, serde, "kl", 0.0, windows),
                    _exact_row(model, context, name, serde, "top1", 1.0, windows),
                    _exact_row(model, context, name, serde, "ppl_change", 0.0, windows),
                    _exact_row(
                        model, context, name, serde, "l2_bytes_per_token", written / context, 1
                    ),
                ]
        except SerdeFailed as exc:
            yield {"kind": "skip", "what": f"e2e serde {serde}", "reason": str(exc), "serde": serde}
            continue
        yield from rows


Cache = list[tuple[torch.Tensor, torch.Tensor]]


def _roundtrip_caches(
    config: dict[str, Any], run: _Run, name: str, dtype: torch.dtype
) -> tuple[int, list[Cache], bool]:
    """(the bytes the serde wrote for the first window's objects in ``dtype``, each window's
    cache as it gives it back, whether every bit came back); ``SerdeFailed`` (its message
    names the dtype) when it fails."""
    written, caches, exact = 0, [], True
    for index, window in enumerate(run.windows):
        objects = lmcache_serdes.object_chunks(window.kv, dtype)
        try:
            trips = lmcache_serdes.roundtrip(config, objects)
        except SerdeFailed as exc:
            raise SerdeFailed(f"{name} cache: {exc}") from exc
        exact = exact and all(_same_bits(o, t.back) for o, t in zip(objects, trips, strict=True))
        heads, head_dim = window.kv[0][0].shape[1], window.kv[0][0].shape[3]
        caches.append(lmcache_serdes.layer_caches([t.back for t in trips], heads, head_dim))
        if index == 0:
            written = sum(t.written for t in trips)
    return written, caches, exact


def _lossy_rows(
    model: str, context: int, run: _Run, score: Scorer | None, serde: str, name: str,
    caches: list[Cache],
) -> list[dict[str, Any]]:  # fmt: skip
    """kl, top-1 and perplexity change of a lossy serde's caches in cache dtype ``name``;
    ``SerdeFailed`` where no model runs to score them."""
    if score is None:
        raise SerdeFailed(f"{name} cache: lossy; its caches are scored where a model runs")
    # No format of lmckv's: the serde's own (fmt "none", scope NO_SCALE, its name as serde).
    variant = Variant(l2_serdes.NO_SCALE, "none", name, serde=serde)
    run.fixed[variant] = caches
    scores = score([variant.reference, variant])
    return [r for r in _rows(model, context, scores) if r["serde"] == serde]


def _bytes_row(model: str, context: int, name: str, serde: str, written: int) -> dict[str, Any]:
    """A lossy serde's bytes in L2 per token (measured, as the exact rows')."""
    row = _exact_row(model, context, name, serde, "l2_bytes_per_token", written / context, 1)
    row.update(scope=l2_serdes.NO_SCALE, exact=False)
    return row


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(
        a.reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)
    )


def _stats_rows(source: str, layers: list[torch.Tensor]) -> Iterator[dict[str, Any]]:
    """``bench.accuracy.kvstats`` of each layer's paged V, as e2e rows without interval."""
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


def serde_variants(dtype: str) -> list[Variant]:
    """The serde variants of one cache dtype: ``fp8`` and storage-only K16/V8 per scope
    (the V-only serde's figures are the storage-only ones, its bytes measured apart)."""
    return [Variant(l2_serdes.NO_SCALE, E4M3.name, dtype, serde=l2_serdes.FP8)] + [
        Variant(scope, E4M3.name, dtype, serde=l2_serdes.K16V8) for scope in E2E_SCOPES
    ]


def _main_variants() -> list[Variant]:
    """Every format and scope in both cache dtypes, and the fp8 serde."""
    out = []
    for dtype in CACHE_DTYPES:
        out += serde_variants(dtype)
        out += [
            Variant(scope, fmt, dtype)
            for fmt in FORMATS
            if fmt != E4M3.name
            for scope in E2E_SCOPES
        ]
    return out


def evaluate(
    impl: CodecImpl,
    tokenizer: Any,
    model: Any,
    name: str,
    *,
    plan: Plan = QUICK,
    texts: tuple[str, ...] | None = None,
    synthetic_stats: bool = False,
    progress: bool = True,
) -> Iterator[dict[str, Any]]:
    """The e2e rows of ``model`` (this module's docstring); raises ``ValueError`` when the
    text is too short and ``models.ModelUnusable`` when the model's cache is out of reach."""
    previous = torch.get_num_threads()
    torch.set_num_threads(max(previous, _threads()))
    try:
        run = _Run(impl, model, windows(tokenizer, plan.context, plan.windows, texts), plan.context)
        main = _main_variants()
        references = [Variant(NONE, "none", dtype, serde=l2_serdes.NONE) for dtype in CACHE_DTYPES]
        layers = len(run.windows[0].kv)
        sweep_variants = [v for d in CACHE_DTYPES for v in serde_variants(d)]
        total = (
            plan.windows * (len(main) + len(references))
            + LAYER_WINDOWS * (2 * layers + 1)
            + plan.sweep_windows * len(plan.sweep) * (len(sweep_variants) + len(references))
        )
        pbar = bar(total, f"e2e {name}", enabled=progress, unit="seq")
        scores = run.score(references + main, pbar)
        yield from _rows(name, plan.context, scores)
        yield from _bytes_rows(
            impl,
            name,
            plan.context,
            run.windows[0],
            references + [v for v in main if v.serde is not None],
        )
        yield from _registered_rows(
            name, plan.context, run, lambda variants: run.score(variants, pbar)
        )
        e4m3 = sorted(
            (v for v in main if v.serde == l2_serdes.K16V8 and v.dtype == "float16"),
            key=lambda v: statistics.fmean(scores[v].kl),
        )
        per_layer = [
            replace(v, layer=layer) for v in (e4m3[0], e4m3[-1]) for layer in range(layers)
        ]
        yield from _rows(name, plan.context, run.score(per_layer, pbar, LAYER_WINDOWS))
        first = run.windows[0].kv
        for context in plan.sweep:
            ids = windows(tokenizer, context, plan.sweep_windows, texts)
            longer = _Run(impl, model, ids, context)
            yield from _rows(name, context, longer.score(references + sweep_variants, pbar))
        pbar.close()
        yield from _stats_rows(f"real:{name}", [_paged(v, torch.float16) for _, v in first])
        if synthetic_stats:
            matched = data.synthetic("matched")
            yield from _stats_rows("synthetic:matched", [s.v for s in matched.samples])
    finally:
        torch.set_num_threads(previous)


def describe(plan: Plan = QUICK, model: str = realkv.MODEL_NAME) -> dict[str, Any]:
    """This phase's configuration, for the results header."""
    return {
        "model": model,
        "windows": plan.windows,
        "context": plan.context,
        "continuation": CONTINUATION,
        "sweep": list(plan.sweep),
        "sweep_windows": plan.sweep_windows if plan.sweep else None,
        "block": BLOCK,
        "scopes": list(E2E_SCOPES),
        "formats": list(FORMATS),
        "serdes": list(l2_serdes.SERDES),
        "registered_serdes": lmcache_serdes.registered()[0],
        "cache_dtypes": list(CACHE_DTYPES),
        "layer_windows": LAYER_WINDOWS,
        "bootstrap": {"replicates": bootstrap.REPLICATES, "level": bootstrap.LEVEL},
    }


def phase(
    impl: CodecImpl | None,
    *,
    skip: str | None = None,
    progress: bool = True,
    plan: Plan = QUICK,
) -> Iterator[dict[str, Any]]:
    """The run's e2e rows on the bundled model, or one skip row saying why there are none
    (``skip``: the option that turned the phase off)."""
    what = f"e2e real:{realkv.MODEL_NAME}"
    if skip is not None:
        yield {"kind": "skip", "what": what, "reason": skip}
        return
    if impl is None:
        yield {"kind": "skip", "what": what, "reason": "reference implementation not loaded"}
        return
    try:
        tokenizer, model = realkv.load_model(realkv.model_file())
        rows = list(
            evaluate(
                impl,
                tokenizer,
                model,
                realkv.MODEL_NAME,
                plan=plan,
                synthetic_stats=True,
                progress=progress,
            )
        )
    except realkv.RealKVUnavailable as exc:
        yield {"kind": "skip", "what": what, "reason": str(exc)}
        return
    yield from rows
