"""The run environment section: the machines and software each results file was measured on."""

from __future__ import annotations

import platform
from datetime import UTC, datetime
from typing import Any

import matplotlib
import pandas as pd

from .html import Section, collapsible, note, table
from .inputs import BenchRun, ReportInputs, machine_record
from .output import Output


def _gib(value: Any) -> str:
    return f"{value / 2**30:.1f} GiB" if isinstance(value, int | float) else "?"


def _gpu_text(gpu: Any) -> str:
    """The machine record's GPU (bench/common/machine.py, by NVML UUID) in one line."""
    if not isinstance(gpu, dict):
        return "none (torch saw no CUDA device)"
    if gpu.get("nvml_error"):
        return f"{gpu.get('name', '?')} {gpu.get('uuid', '?')} (NVML: {gpu['nvml_error']})"
    l2 = gpu.get("l2_bytes")
    power = gpu.get("power_limit_w")
    parts = [
        f"{gpu.get('name', '?')} {gpu.get('uuid', '?')}",
        f"driver {gpu.get('driver', '?')}",
        _gib(gpu.get("memory_total_bytes")),
        f"{gpu.get('sm_count', '?')} SMs",
        f"L2 {l2 / 2**20:.0f} MiB" if isinstance(l2, int | float) else "L2 ?",
        f"power limit {power:.0f} W" if isinstance(power, int | float) else "power limit ?",
        f"PCIe gen {gpu.get('pcie_gen', '?')} x{gpu.get('pcie_width', '?')}"
        f" (max gen {gpu.get('pcie_gen_max', '?')} x{gpu.get('pcie_width_max', '?')})",
        f"MIG {'on' if gpu.get('mig_mode') else 'off' if gpu.get('mig_mode') is False else '?'}",
    ]
    return ", ".join(parts)


def bench_environment(run: BenchRun, role: str) -> dict[str, str]:
    """The header of one bench file as label -> text (RESULTS.md: header ``machine`` record,
    ``machine_id`` and ``env``)."""
    env = run.header["env"]
    machine = machine_record(run.header)
    cpu = machine.get("cpu_model") or env.get("cpu_model", "?")
    usable = machine.get("cpu_usable", env.get("cpu_count", "?"))
    logical = machine.get("cpu_logical", "?")
    return {
        "role": role,
        "file": run.path.name,
        "run id": str(run.header["run_id"]),
        "machine": run.machine,
        "machine id": str(run.header.get("machine_id") or "?"),
        "host id (hash)": str(machine.get("host_id") or "?"),
        "mode": str(run.header["mode"]),
        "started (UTC)": str(run.header["started_utc"]),
        "CPU": f"{cpu} ({usable} usable of {logical} logical CPUs)",
        "CPU governor": str(machine.get("governor") or "unknown"),
        "RAM": _gib(machine.get("ram_bytes")),
        "GPU": _gpu_text(machine.get("gpu")),
        "python": str(env.get("python", "?")),
        "torch": str(env.get("torch", "?")),
        "CUDA runtime": str(env.get("cuda_runtime") or "none"),
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
