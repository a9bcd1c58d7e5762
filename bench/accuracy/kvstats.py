"""The statistics of V that decide how far the scale scopes differ, for one layer.

Measured on the real model's cache and on the synthetic family matched to it
(``bench.accuracy.data``), and shown side by side in the report, so that a reader can see which
synthetic family resembles a real cache and which is a stress test. V is token-major and
paged, [pages, page_size, heads, d]; a group's amax is max |V| over the group.

- ``v_amax``: amax of the layer (what one static scale has to cover).
- ``head_spread``: largest over smallest per-head amax (what PER_LAYER_HEAD gains over
  PER_TENSOR).
- ``page_spread``: largest over smallest per-page amax within a head, median over heads
  (what PER_PAGE_HEAD gains over PER_LAYER_HEAD).
- ``channel_spread``: largest over median per-channel amax within a head, median over heads
  (outlier channels, which no scope here isolates).
"""

from __future__ import annotations

import torch

STATS = ("v_amax", "head_spread", "page_spread", "channel_spread")
_TINY = 1e-30


def _ratio(top: torch.Tensor, bottom: torch.Tensor) -> torch.Tensor:
    return top / bottom.clamp(min=_TINY)


def v_stats(v: torch.Tensor) -> dict[str, float]:
    """The ``STATS`` of one layer's paged V."""
    a = v.to(torch.float32).abs()
    heads = a.amax(dim=(0, 1, 3))
    pages = a.amax(dim=(1, 3))  # [pages, heads]
    channels = a.amax(dim=(0, 1))  # [heads, d]
    return {
        "v_amax": float(a.max()),
        "head_spread": float(_ratio(heads.max(), heads.min())),
        "page_spread": float(_ratio(pages.amax(0), pages.amin(0)).median()),
        "channel_spread": float(_ratio(channels.amax(1), channels.median(dim=1).values).median()),
    }
