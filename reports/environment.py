"""The run environment section: the machines and software each results file was measured on."""

from __future__ import annotations

import platform
from datetime import UTC, datetime
from typing import Any

import matplotlib
import pandas as pd

from reports.html import Section, collapsible, note, table
from reports.load import BenchRun, ReportInputs
from reports.output import Output


def _gpu_text(gpu: Any) -> str:
    if not isinstance(gpu, dict):
        return "none (NVML reported no GPU)"
    memory = gpu.get("memory_total_bytes")
    memory_text = f"{memory / 2**30:.1f} GiB" if isinstance(memory, int | float) else "?"
    return (
        f"{gpu.get('name', '?')}, driver {gpu.get('driver', '?')}, {memory_text}, "
        f"SM {gpu.get('sm_clock_mhz', '?')} MHz, memory {gpu.get('mem_clock_mhz', '?')} MHz"
    )


def bench_environment(run: BenchRun, role: str) -> dict[str, str]:
    """The header of one bench file as label -> text (SCHEMAS: header ``env``)."""
    env = run.header["env"]
    return {
        "role": role,
        "file": run.path.name,
        "run id": str(run.header["run_id"]),
        "machine": run.machine,
        "mode": str(run.header["mode"]),
        "started (UTC)": str(run.header["started_utc"]),
        "CPU": f"{env.get('cpu_model', '?')} ({env.get('cpu_count', '?')} logical CPUs)",
        "GPU (NVML)": _gpu_text(env.get("gpu")),
        "python": str(env.get("python", "?")),
        "torch": str(env.get("torch", "?")),
        "lmcache (upstream)": str(env.get("lmcache") or "not installed"),
        "platform": str(env.get("platform", "?")),
        "commit": str(env.get("git_commit") or "unknown"),
    }


def environment_section(inputs: ReportInputs, out: Output, generated: datetime) -> Section:
    """One column per bench run, one table for conformance runs, and the builder's own versions."""
    runs = [bench_environment(run, "current") for run in inputs.bench]
    if inputs.baseline is not None:
        runs.append(bench_environment(inputs.baseline, "baseline"))
    conformance = [
        {
            "file": run.path.name,
            "started (UTC)": str(run.meta.get("started_utc", "?")),
            "wall time (s)": run.meta.get("wall_s"),
            "commit": str(run.meta.get("git_commit") or "unknown"),
            "implementations": "; ".join(
                f"{i['name']} {'' if pd.isna(i['version']) else i['version']} "
                f"({i['kind']}: {', '.join(i['capabilities'])})"
                for i in run.tables["impls"].to_dict("records")
            ),
        }
        for run in inputs.conformance
    ]
    builder = {
        "generated (UTC)": generated.astimezone(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "pandas": pd.__version__,
        "matplotlib": matplotlib.__version__,
    }
    out.json(
        {"bench": runs, "conformance": conformance, "report_builder": builder},
        "environment.json",
    )
    body = []
    if runs:
        frame = pd.DataFrame(runs).T
        frame.columns = [f"run {i + 1}" for i in range(len(runs))]
        frame = frame.reset_index(names="")
        body.append("<h3>Benchmark runs</h3>" + table(frame))
    else:
        body.append(note("no bench results file among the inputs: no benchmark environment"))
    if conformance:
        body.append("<h3>Conformance runs</h3>" + table(pd.DataFrame(conformance)))
    else:
        body.append(note("no conformance results file among the inputs"))
    skips = inputs.bench_table("skip")
    if not skips.empty:
        out.csv(skips, "skips.csv")
        shown = skips.rename(columns={"what": "not measured", "run_id": "run"})
        body.append(
            "<h3>Skipped measurements (skip rows)</h3>"
            + collapsible(table(shown), len(shown), "skips.csv")
        )
    for run in inputs.bench:
        if run.ignored_kinds:
            kinds = ", ".join(f"{k} ({n})" for k, n in sorted(run.ignored_kinds.items()))
            body.append(note(f"{run.path.name}: records of unknown kind ignored: {kinds}"))
    body.append("<h3>Report builder</h3>" + table(pd.DataFrame([builder])))
    return Section("environment", "Run environment", "".join(body))
