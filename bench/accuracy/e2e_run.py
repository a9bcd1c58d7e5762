"""``lmckv bench e2e --model PATH``: the end-to-end measurement on an operator's model.

Loads the model (``bench.accuracy.models``: a Hugging Face folder or a GGUF file, offline), runs
``bench.accuracy.e2e.evaluate`` at ``--context`` tokens (``--full``: also the longer contexts of
``bench.accuracy.e2e.SWEEP`` up to the model's maximum) over the committed corpus or ``--text
FILE``,
and writes a results file (``bench-*.jsonl``, mode quick or full) whose header carries the
model's identity (``model``) and whose e2e rows are those of ``lmckv bench run``'s e2e phase.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from ..common.env import collect_env
from ..common.impls import load_impls
from ..common.machine import machine_record
from ..common.rows import ResultsWriter
from . import e2e, models


def _max_positions(model: Any) -> int | None:
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    value = getattr(text, "max_position_embeddings", None)
    return int(value) if value else None


def plan_for(model: Any, context: int, full: bool) -> e2e.Plan:
    """The plan: every variant at ``context``; with ``full`` the serde variants also at each
    longer context of ``e2e.SWEEP`` the model's positions allow. Raises ``ValueError`` when
    ``context`` itself exceeds them."""
    limit = _max_positions(model)
    if limit is not None and context + e2e.CONTINUATION + 1 > limit:
        raise ValueError(
            f"context {context} + {e2e.CONTINUATION + 1} scored tokens exceed the model's "
            f"{limit} positions"
        )
    sweep: tuple[int, ...] = ()
    if full:
        sweep = tuple(
            c
            for c in (e2e.CONTEXT, *e2e.SWEEP)
            if c != context and (limit is None or c + e2e.CONTINUATION + 1 <= limit)
        )
    return e2e.Plan(context=context, sweep=sweep)


def run_model(
    path: Path,
    out_dir: Path,
    *,
    context: int = e2e.CONTEXT,
    full: bool = False,
    text: Path | None = None,
    memory_limit: int | None = None,
    progress: bool = True,
) -> tuple[Path, dict[str, int], float]:
    """Measure ``path`` and write one results file: (path, record counts, wall seconds).
    Raises ``models.ModelUnusable`` or ``ValueError`` (one line) for what cannot run."""
    t0 = time.monotonic()
    texts = None
    if text is not None:
        texts = (text.read_text(encoding="utf-8"),)
    impls, missing = load_impls(("reference",))
    if "reference" not in impls:
        raise models.ModelUnusable(f"the reference codec is not importable: {missing}")
    loaded = models.load(path, memory_limit=memory_limit)
    plan = plan_for(loaded.model, context, full)
    name = str(loaded.identity["name"])
    rows = list(
        e2e.evaluate(
            impls["reference"],
            loaded.tokenizer,
            loaded.model,
            name,
            plan=plan,
            texts=texts,
            progress=progress,
        )
    )
    config = {
        "e2e": {
            **e2e.describe(plan, name),
            "text": str(text) if text is not None else "bench.accuracy.corpus",
            "device": loaded.device,
        },
        "impls": {"reference": impls["reference"].version},
    }
    machine = machine_record()
    with ResultsWriter(
        out_dir,
        mode="full" if full else "quick",
        env=collect_env(machine["gpu"]),
        machine=machine,
        extra_header={"config": config, "model": loaded.identity},
    ) as out:
        if progress:
            print(f"writing {out.path}", file=sys.stderr)
        out.write_all(rows)
        return out.path, dict(out.counts), time.monotonic() - t0
