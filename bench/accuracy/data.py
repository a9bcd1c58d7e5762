"""Accuracy data: the container types, and synthetic families chosen to separate the scopes.

A ``Dataset`` is a list of ``KVSample`` (one layer of one sequence, which the codec encodes
as one blob) with the queries used to measure the attention error. Tensors are float16 and
token-major: ``q`` [T, q_heads, d], ``k``/``v`` [n_pages, page_size, kv_heads, d].
``calib_amax`` per sample is |V|'s maximum on *other* data of the same layer (another draw
of the family, or the other text for real KV): the input to calibrated static scales.

Synthetic families (seeded; 2 layers of 16 pages x 16 tokens, 4 KV heads, 8 query heads,
head_dim 64). Queries and keys are N(0, 1) plus a direction shared by the tokens of a page,
so that each query attends mostly within its own page, like a local head: a query whose
page is quiet reads quiet values, and errors there show up in its output.

Roles (``bench.accuracy.families``): ``matched`` and ``gaussian`` are realistic, the rest stress
tests.

- ``matched``: fitted to SmolLM2-135M-Instruct's V cache (``bench.accuracy.kvstats`` on the real
  capture: per-layer amax 3-14, largest/smallest head amax 1.2-1.9, page-to-page 1.3-2.2,
  outlier channels ~2x the median channel): N(0, 1) x 0.8 with heads 10**(+-0.07), pages
  10**U(-0.07, 0.07) and 4 of 64 channels x1.8; queries attend broadly (locality 3, not 12),
  as most real heads do.
- ``gaussian``: V ~ N(0, 1); every scope should do alike.
- ``page_scale``: page p of V scaled by 10**u_p, u spread over [-4, 2]: one scale for the
  tensor pushes the quiet pages into e4m3 subnormals and zero; per-page scales do not.
- ``head_scale``: head h scaled by 10**(-4, -2, 0, 2): per-head scales fix what per-tensor
  scales lose.
- ``heavy_tail``: Student-t (2 degrees of freedom): rare large values set the amax.
- ``sink_tokens``: the first 4 tokens have 100x larger V and keys aligned with every query
  (attention sinks), so the attention output leans on them.
- ``tiny``: V ~ N(0, 1) x 1e-5 (float16 subnormals): fine with amax scales, zeroed by a
  static scale of 1.0.
- ``large``: V ~ N(0, 1) x 1000: saturates e4m3 with a static scale of 1.0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

PAGES, PAGE_SIZE, KV_HEADS, Q_HEADS, HEAD_DIM, LAYERS = 16, 16, 4, 8, 64, 2
#: Norm of the shared page direction: same-page logits gain LOCALITY**2 / sqrt(HEAD_DIM) = 18,
#: so a query reads its own page (weight ~1 - 1e-6) and almost nothing of louder pages.
LOCALITY = 12.0


@dataclass
class KVSample:
    """One layer of one sequence: the unit the codec encodes as one blob."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    calib_amax: float

    @property
    def tokens(self) -> int:
        """Tokens in the sample."""
        return self.k.shape[0] * self.k.shape[1]


@dataclass
class Dataset:
    """Samples of one data source; ``data`` is the results' ``data`` field."""

    data: str
    samples: list[KVSample]
    sequences: int

    @property
    def tokens(self) -> int:
        """Tokens over all sequences (each sequence counted once, not once per layer)."""
        return sum(s.tokens for s in self.samples) * self.sequences // max(len(self.samples), 1)


def _shape() -> tuple[int, int, int, int]:
    return (PAGES, PAGE_SIZE, KV_HEADS, HEAD_DIM)


def _v_gaussian(gen: torch.Generator) -> torch.Tensor:
    return torch.randn(_shape(), generator=gen)


def _v_matched(gen: torch.Generator) -> torch.Tensor:
    heads = 10.0 ** torch.linspace(-0.07, 0.07, KV_HEADS)[torch.randperm(KV_HEADS, generator=gen)]
    pages = 10.0 ** (torch.rand(PAGES, generator=gen) * 0.14 - 0.07)
    channels = torch.ones(HEAD_DIM)
    channels[torch.randperm(HEAD_DIM, generator=gen)[:4]] = 1.8
    scale = 0.8 * heads.view(1, 1, KV_HEADS, 1) * pages.view(PAGES, 1, 1, 1) * channels
    return torch.randn(_shape(), generator=gen) * scale


def _v_page_scale(gen: torch.Generator) -> torch.Tensor:
    exps = torch.linspace(-4.0, 2.0, PAGES)[torch.randperm(PAGES, generator=gen)]
    return torch.randn(_shape(), generator=gen) * (10.0**exps).view(PAGES, 1, 1, 1)


def _v_head_scale(gen: torch.Generator) -> torch.Tensor:
    exps = torch.tensor([-4.0, -2.0, 0.0, 2.0])
    return torch.randn(_shape(), generator=gen) * (10.0**exps).view(1, 1, KV_HEADS, 1)


def _v_heavy_tail(gen: torch.Generator) -> torch.Tensor:
    normal = torch.randn(_shape(), generator=gen)
    chi2 = torch.randn((*_shape(), 2), generator=gen).pow(2).sum(-1)
    return normal / torch.sqrt(chi2 / 2.0)


def _v_sink_tokens(gen: torch.Generator) -> torch.Tensor:
    v = torch.randn(_shape(), generator=gen)
    v[0, :4] *= 100.0
    return v


def _v_tiny(gen: torch.Generator) -> torch.Tensor:
    return torch.randn(_shape(), generator=gen) * 1e-5


def _v_large(gen: torch.Generator) -> torch.Tensor:
    return torch.randn(_shape(), generator=gen) * 1000.0


FAMILIES: dict[str, Callable[[torch.Generator], torch.Tensor]] = {
    "matched": _v_matched,
    "gaussian": _v_gaussian,
    "page_scale": _v_page_scale,
    "head_scale": _v_head_scale,
    "heavy_tail": _v_heavy_tail,
    "sink_tokens": _v_sink_tokens,
    "tiny": _v_tiny,
    "large": _v_large,
}


def _queries_keys(family: str, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Random queries and keys sharing a per-page direction, so each query attends mostly
    within its own page (a local head); sink keys also align with every query."""
    tokens = PAGES * PAGE_SIZE
    q = torch.randn((tokens, Q_HEADS, HEAD_DIM), generator=gen)
    k = torch.randn(_shape(), generator=gen)
    page_dirs = torch.randn((PAGES, HEAD_DIM), generator=gen)
    page_dirs *= LOCALITY / page_dirs.norm(dim=-1, keepdim=True)
    k += page_dirs.view(PAGES, 1, 1, HEAD_DIM)
    q += page_dirs.repeat_interleave(PAGE_SIZE, dim=0).view(tokens, 1, HEAD_DIM)
    if family == "matched":  # broad attention: the shared direction only a quarter as long
        k -= 0.75 * page_dirs.view(PAGES, 1, 1, HEAD_DIM)
        q -= 0.75 * page_dirs.repeat_interleave(PAGE_SIZE, dim=0).view(tokens, 1, HEAD_DIM)
    if family == "sink_tokens":
        direction = torch.randn(HEAD_DIM, generator=gen)
        direction /= direction.norm()
        q += 2.0 * direction
        k[0, :4] += 8.0 * direction
    return q, k


def synthetic(family: str, seed: int = 0) -> Dataset:
    """The ``family`` dataset: LAYERS samples of one sequence, float16."""
    make_v = FAMILIES[family]
    gen = torch.Generator().manual_seed(seed)
    calib = torch.Generator().manual_seed(seed + 1_000_003)
    samples = []
    for _ in range(LAYERS):
        v = make_v(gen).to(torch.float16)
        q, k = _queries_keys(family, gen)
        calib_amax = float(make_v(calib).to(torch.float16).abs().max())
        samples.append(KVSample(q.to(torch.float16), k.to(torch.float16), v, calib_amax))
    return Dataset(f"synthetic:{family}", samples, sequences=1)
