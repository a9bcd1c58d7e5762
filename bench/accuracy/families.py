"""What each synthetic accuracy family stands for (``bench.accuracy.data`` generates them).

*Realistic* families resemble a real cache: ``matched`` is fitted to the V statistics of
SmolLM2-135M-Instruct's cache (``bench.accuracy.kvstats``; the report shows both side by side), and
``gaussian`` is the unstructured control. *Stress* families are adversarial by construction,
each provoking one failure; they show where a scope breaks, not what a model will see, so
the scope recommendation is decided on the real model's end-to-end figures, with these
beside it.
"""

from __future__ import annotations

REALISTIC = "realistic"
STRESS = "stress"

#: family -> (role, what it provokes or resembles)
FAMILY_ROLE: dict[str, tuple[str, str]] = {
    "matched": (REALISTIC, "fitted to SmolLM2-135M's V: head, page and channel spread"),
    "gaussian": (REALISTIC, "control: unstructured N(0, 1), every scope should tie"),
    "page_scale": (
        STRESS,
        "pages 10^6 apart, each query reads its own page: one scale zeroes quiet pages",
    ),
    "head_scale": (STRESS, "heads 10^6 apart: one scale per tensor zeroes quiet heads"),
    "heavy_tail": (STRESS, "Student-t outliers set the amax: everything else loses precision"),
    "sink_tokens": (STRESS, "4 loud attention-sink tokens in page 0 set its scale"),
    "tiny": (STRESS, "float16 subnormals: a static scale of 1.0 zeroes them"),
    "large": (STRESS, "x1000: a static scale of 1.0 saturates e4m3"),
}


def family_role(data: str) -> tuple[str, str]:
    """(role, note) of a ``data`` name: ``real:*`` is the real model, ``synthetic:<family>``
    its family's role (stress when unknown)."""
    if data.startswith("real:"):
        return "real", "captured from the real model"
    family = data.removeprefix("synthetic:")
    return FAMILY_ROLE.get(family, (STRESS, "unclassified synthetic family"))
