"""Error metrics of reconstructed V and of the attention output computed with it.

Definitions (``v`` original, ``v_hat`` reconstructed, ``x = v / scale`` the scaled value the
format stores; differences in float32, sums in float64):

- ``rel_fro`` = ||v_hat - v||_F / ||v||_F; ``sqnr_db`` = 10 log10(sum v^2 / sum (v_hat - v)^2);
  ``cosine`` = <v, v_hat> / (||v|| ||v_hat||). Undefined values (zero signal or, for
  sqnr_db, zero error) are None.
- ``max_err_over_bound``: max over elements that neither saturate nor are NaN of
  |v_hat - v| / (scale * half_ulp_fmt(|x|) + half_ulp_out(|v_hat|)): 1.0 or less means every
  element is within half a step of the format's grid plus the output dtype's own rounding.
- ``saturated``: |x| beyond max + half ulp (the clamp changed the value, not rounding);
  ``subnormal`` (float formats): stored value non-zero and below the smallest normal;
  ``zeroed``: stored value zero where v is not; ``nan``: NaN in v_hat.
- ``attn_rel_err``: with P = softmax(Q K^T / sqrt(d)) (causal, grouped-query), the mean over
  query heads and query tokens of ||P (v_hat - v)|| / ||P v|| per output row: the relative
  error each query's attention output suffers, so a query that reads only quiet values
  counts as much as one that reads loud ones.
"""

from __future__ import annotations

import math

import torch

from .formats import OUTPUT_FORMATS, Format


def _f64_sum(t: torch.Tensor) -> float:
    return float(t.sum(dtype=torch.float64))


def v_error(
    v: torch.Tensor,
    v_hat: torch.Tensor,
    stored: torch.Tensor,
    scale: torch.Tensor,
    fmt: Format,
) -> dict[str, float | int | None]:
    """The V metrics above for one tensor.

    ``stored`` is the format's value before scaling back (float32, same shape as ``v``);
    ``scale`` broadcasts against ``v``. Counts are ints; ``subnormal`` is only reported for
    float formats.
    """
    v32 = v.to(torch.float32)
    vh32 = v_hat.to(torch.float32)
    diff = vh32 - v32
    signal = _f64_sum(v32 * v32)
    noise = _f64_sum(diff * diff)
    norm_v, norm_vh = math.sqrt(signal), math.sqrt(_f64_sum(vh32 * vh32))
    x_abs = (v32 / scale.to(torch.float32)).abs()
    saturated = x_abs > fmt.saturation_edge
    is_nan = torch.isnan(vh32)
    within = ~(saturated | is_nan | torch.isnan(v32))
    bound = scale * fmt.half_ulp(x_abs) + OUTPUT_FORMATS[v_hat.dtype].half_ulp(vh32.abs())
    ratio = diff.abs() / bound
    stored_abs = stored.abs()
    result: dict[str, float | int | None] = {
        "rel_fro": math.sqrt(noise) / norm_v if norm_v > 0 else None,
        "sqnr_db": 10.0 * math.log10(signal / noise) if signal > 0 and noise > 0 else None,
        "cosine": _f64_sum(v32 * vh32) / (norm_v * norm_vh) if norm_v * norm_vh > 0 else None,
        "max_err_over_bound": float(ratio[within].max()) if bool(within.any()) else None,
        "saturated": int(saturated.sum()),
        "zeroed": int(((stored == 0) & (v32 != 0)).sum()),
        "nan": int(is_nan.sum()),
    }
    if fmt.is_float:
        result["subnormal"] = int(((stored_abs > 0) & (stored_abs < fmt.min_normal)).sum())
    return result


def attention_probs(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Causal softmax(Q K^T / sqrt(d)) in float32, [q_heads, T, T].

    Token-major inputs: ``q`` [T, q_heads, d], ``k`` [T, kv_heads, d] with q_heads a multiple
    of kv_heads (grouped-query attention: query head h reads KV head h // group).
    """
    tokens, qh, dim = q.shape
    kvh = k.shape[1]
    if qh % kvh:
        raise ValueError(f"{qh} query heads do not group onto {kvh} KV heads")
    q32 = q.to(torch.float32).transpose(0, 1)
    k32 = k.to(torch.float32).transpose(0, 1).repeat_interleave(qh // kvh, dim=0)
    scores = q32 @ k32.transpose(1, 2) / math.sqrt(dim)
    causal = torch.ones(tokens, tokens, dtype=torch.bool).triu_(1)
    return torch.softmax(scores.masked_fill_(causal, float("-inf")), dim=-1)


def attn_rel_err(probs: torch.Tensor, v: torch.Tensor, v_hats: list[torch.Tensor]) -> list[float]:
    """``attn_rel_err`` (above) of each reconstruction in ``v_hats``, one matmul for all.

    ``probs`` from ``attention_probs``; ``v`` and each ``v_hat`` token-major [T, kv_heads, d].
    Rows whose reference output is zero are left out of the mean.
    """
    qh = probs.shape[0]
    tokens, kvh, dim = v.shape
    group = qh // kvh
    v32 = v.to(torch.float32)
    diffs = [vh.to(torch.float32) - v32 for vh in v_hats]
    # [T, kvh, d * (1 + n)] -> [kvh, T, d * (1 + n)] -> one column block per KV head group
    stacked = torch.cat([v32, *diffs], dim=-1).transpose(0, 1)
    out = probs @ stacked.repeat_interleave(group, dim=0)
    out = out.view(qh, tokens, 1 + len(diffs), dim)
    norms = torch.linalg.vector_norm(out, dim=-1)
    ref_norm = norms[..., 0]
    keep = ref_norm > 0
    rel = norms[..., 1:][keep] / ref_norm[keep].unsqueeze(-1)
    return [float(x) for x in rel.to(torch.float64).mean(dim=0)]
