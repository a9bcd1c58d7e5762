"""V reconstruction error per scale scope, and the attention error it causes.

For every dataset (``bench.accuracy.data`` synthetic families, ``bench.accuracy.realkv`` real KV),
scale scope
and format:

- e4m3 goes through the reference codec end to end: ``encode`` -> ``to_bytes`` ->
  ``from_bytes`` (on a bytearray) -> ``decode`` twice (FP8 kept, for the stored values and
  scales; and ``out_v_dtype`` = V's dtype, for the reconstruction), so the numbers are the
  codec's own; ``bytes_per_token`` is the blobs' total size over the tokens of the data.
- e5m2 and int8 are what-ifs computed here (``bench.accuracy.formats``) with the same scope groups:
  scale = amax(group) / max of the format, then round with saturation.

Scopes: PER_TENSOR, PER_LAYER_HEAD, PER_PAGE_HEAD; EXTERNAL with the static scale 1.0
(vLLM's uncalibrated default); and EXTERNAL_CALIBRATED, a static per-layer scale taken from
other data (amax of another draw / the other text at the same layer, over the format's max),
as a calibrated deployment would use. Per-sample metrics (``bench.accuracy.metrics``) are aggregated
over a dataset's samples: mean of rel_fro, sqnr_db, cosine and attn_rel_err, max of
max_err_over_bound, sum of the counts.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ...reference_impl.kv_codec.header_fields import ScaleScope
from ..common.impls import CodecImpl
from ..common.progress import bar
from ..common.rows import METRICS
from ..common.scopes import CALIBRATED_EXTERNAL, SCOPE_NAMES, header_scope
from .data import Dataset, KVSample
from .formats import E4M3, FORMATS, Format
from .metrics import attention_probs, attn_rel_err, v_error

ACCURACY_SCOPES = (*SCOPE_NAMES, CALIBRATED_EXTERNAL)
#: The dimensions of V [pages, page_size, heads, dim] one scale spans, per computed scope.
_GROUP_DIMS = {
    ScaleScope.PER_TENSOR.name: (0, 1, 2, 3),
    ScaleScope.PER_LAYER_HEAD.name: (0, 1, 3),
    ScaleScope.PER_PAGE_HEAD.name: (1, 3),
}
_MEAN = ("rel_fro", "sqnr_db", "cosine", "attn_rel_err")
_MAX = ("max_err_over_bound",)
_SUM = ("saturated", "subnormal", "zeroed", "nan")


def _static_scale(sample: KVSample, scope: str, fmt: Format) -> float | None:
    if scope == ScaleScope.EXTERNAL.name:
        return 1.0
    if scope == CALIBRATED_EXTERNAL:
        return sample.calib_amax / fmt.max if sample.calib_amax > 0 else 1.0
    return None


def group_scale(sample: KVSample, scope: str, fmt: Format) -> torch.Tensor:
    """float32 scales broadcastable against V [pages, page_size, heads, dim] for a scope:
    amax(|V| over the scope's group) / fmt.max, 1.0 for an all-zero group; static scopes
    give their fixed scale."""
    static = _static_scale(sample, scope, fmt)
    if static is not None:
        return torch.tensor(static, dtype=torch.float32).reshape(1, 1, 1, 1)
    v_abs = sample.v.to(torch.float32).abs()
    amax = v_abs.amax(dim=_GROUP_DIMS[scope], keepdim=True)
    return torch.where(amax > 0, amax / fmt.max, torch.ones_like(amax))


def whatif(
    sample: KVSample, scope: str, fmt: Format
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(stored values, scales, reconstructed V in V's dtype) for a what-if format."""
    scale = group_scale(sample, scope, fmt)
    stored = fmt.round(sample.v.to(torch.float32) / scale)
    return stored, scale, (stored * scale).to(sample.v.dtype)


def _broadcast(scales: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Decoded scales () / (heads,) / (pages, heads) as [pages|1, 1, heads|1, 1]."""
    s = scales.to(torch.float32)
    if s.numel() == 1:
        return s.reshape(1, 1, 1, 1)
    if s.dim() == 1:
        return s.view(1, 1, shape[2], 1)
    return s.view(shape[0], 1, shape[2], 1)


def codec_for(impl: CodecImpl, sample: KVSample, scope: str) -> tuple[Any, dict[str, Any]]:
    """The codec of ``scope`` and the ``encode`` keywords that describe ``sample``'s paged
    V (geometry, and the static scale of a calibrated scope)."""
    codec_scope = header_scope(scope).name
    pages, page_size, heads, dim = sample.v.shape
    kwargs: dict[str, Any] = {
        "page_size": page_size,
        "kv_head_count": heads,
        "head_dim": dim,
        "chunk_size": pages * page_size,
        "head_axis": -2,
        "page_axis": 0,
    }
    static = _static_scale(sample, scope, E4M3)
    if static is not None:
        kwargs["precomputed_v_scales"] = torch.tensor(static, dtype=torch.float32)
    return impl.codec(codec_scope), kwargs


def codec_e4m3(
    impl: CodecImpl, sample: KVSample, scope: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """(stored e4m3 values, scales, reconstructed V, blob bytes) through the codec."""
    codec, kwargs = codec_for(impl, sample, scope)
    v, k = sample.v, sample.k
    blob = bytearray(codec.to_bytes(codec.encode(k, v, **kwargs)))
    parsed = codec.from_bytes(blob)
    _, v_q, scales = codec.decode(parsed)
    _, v_hat, _ = codec.decode(parsed, out_v_dtype=v.dtype)
    stored = v_q.reshape(v.shape).to(torch.float32)
    return stored, _broadcast(scales, v.shape), v_hat.reshape(v.shape), len(blob)


@dataclass
class _Tally:
    """Per-sample metric values of one (scope, format)."""

    values: dict[str, list[Any]]
    blob_bytes: int = 0

    def add(self, metrics: dict[str, Any]) -> None:
        for name, value in metrics.items():
            self.values.setdefault(name, []).append(value)

    def aggregate(self) -> dict[str, float | int | None]:
        out: dict[str, float | int | None] = {}
        for name, vals in self.values.items():
            known = [x for x in vals if x is not None]
            if not known:
                out[name] = None
            elif name in _MEAN:
                out[name] = statistics.fmean(known)
            elif name in _MAX:
                out[name] = max(known)
            elif name in _SUM:
                out[name] = sum(known)
        return out


def evaluate(
    dataset: Dataset,
    impl: CodecImpl,
    *,
    scopes: tuple[str, ...] = ACCURACY_SCOPES,
    formats: tuple[str, ...] = tuple(FORMATS),
    progress: bool = True,
) -> Iterator[dict[str, Any]]:
    """Accuracy records of ``dataset`` for every scope and format."""
    tallies = {(s, f): _Tally({}) for s in scopes for f in formats}
    pbar = bar(len(dataset.samples), f"accuracy {dataset.data}", enabled=progress, unit="layer")
    for sample in dataset.samples:
        v_hats: list[torch.Tensor] = []
        for scope in scopes:
            for fmt_name in formats:
                fmt = FORMATS[fmt_name]
                tally = tallies[(scope, fmt_name)]
                if fmt is E4M3:
                    stored, scale, v_hat, n_bytes = codec_e4m3(impl, sample, scope)
                    tally.blob_bytes += n_bytes
                else:
                    stored, scale, v_hat = whatif(sample, scope, fmt)
                tally.add(v_error(sample.v, v_hat, stored, scale, fmt))
                v_hats.append(v_hat.reshape(-1, *v_hat.shape[2:]))
        probs = attention_probs(sample.q, sample.k.reshape(-1, *sample.k.shape[2:]))
        errors = attn_rel_err(probs, sample.v.reshape(-1, *sample.v.shape[2:]), v_hats)
        for tally, error in zip(tallies.values(), errors, strict=True):
            tally.add({"attn_rel_err": error})
        pbar.update()
    pbar.close()
    for (scope, fmt_name), tally in tallies.items():
        values = tally.aggregate()
        if fmt_name == E4M3.name:
            values["bytes_per_token"] = tally.blob_bytes / dataset.tokens
        for metric in METRICS:
            if metric in values:
                yield {
                    "kind": "accuracy",
                    "scope": scope,
                    "data": dataset.data,
                    "fmt": fmt_name,
                    "metric": metric,
                    "value": values[metric],
                }
