"""The report builder on small fixed results files: sections, images, tables, degraded inputs."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pandas as pd
import pytest
from bench_files import write_results
from test_bench_decision import synthetic_run

from lmckv.bench.common.machine import machine_id
from lmckv.bench.gate.compare import compare_files
from lmckv.reports.report_command import main

FIXTURES = Path(__file__).parent / "fixtures" / "report"
SECTIONS = [
    "summary",
    "e2e",
    "accuracy",
    "throughput",
    "conformance",
    "interop",
    "comparison",
    "environment",
]


def build(out: Path, *names: str, baseline: str | None = None) -> str:
    argv = [str(FIXTURES / n) for n in names] + ["--out", str(out)]
    if baseline:
        argv += ["--baseline", str(FIXTURES / baseline)]
    assert main(argv) == 0
    return (out / "index.html").read_text(encoding="utf-8")


def section(page: str, section_id: str) -> str:
    match = re.search(rf'<section id="{section_id}">(.*?)</section>', page, re.S)
    assert match, f"section {section_id} missing"
    return match.group(1)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """All fixtures, and the baseline."""
    out = tmp_path_factory.mktemp("report") / "latest"
    page = build(
        out,
        "conformance.json",
        "bench-cpu.jsonl",
        "bench-cuda.jsonl",
        baseline="bench-baseline.jsonl",
    )
    return out, page


def test_every_section_present_in_reading_order(full: tuple[Path, str]) -> None:
    _, page = full
    assert re.findall(r'<section id="([a-z0-9]+)">', page) == SECTIONS
    # the only notes: what the store path could not time, with the reason
    notes = re.findall(r'<p class="note">([^<]*)</p>', section(page, "throughput"))
    assert notes and all(n.startswith("store path ") for n in notes), notes


def test_every_image_referenced_exists_and_is_a_png(full: tuple[Path, str]) -> None:
    out, page = full
    sources = re.findall(r'<img src="([^"]+)"', page)
    assert sorted(sources) == sorted(
        [
            "producer_consumer.png",
            "throughput_cpu.png",
            "throughput_cuda.png",
            "accuracy_realistic.png",
            "accuracy_stress.png",
            "bytes_per_token.png",
        ]
    )
    for source in sources:
        width, height = png_size(out / source)
        assert width > 300 and height > 200, source


def test_page_stands_alone(full: tuple[Path, str]) -> None:
    _, page = full
    assert not re.search(r"https?://|<link|<script src|@import", page)


def test_tables_behind_figures_are_written(full: tuple[Path, str]) -> None:
    out, _ = full
    for name in [
        "throughput.csv",
        "throughput_by_scope.csv",
        "accuracy.csv",
        "accuracy_by_scope.csv",
        "conformance_tests.csv",
        "conformance_matrix.csv",
        "conformance_failures.csv",
        "producer_consumer.csv",
        "reader_versions.csv",
        "headline_ratios.csv",
        "scope_choice.csv",
        "comparison.csv",
        "telemetry.csv",
    ]:
        assert len(pd.read_csv(out / name)) > 0, name
    manifest = json.loads((out / "manifest.json").read_text())["files"]
    assert "index.html" in manifest and "throughput_cuda.png" in manifest
    skips = pd.read_csv(out / "skips.csv")
    assert [w for w in skips["what"] if not w.startswith("store path ")] == ["cuda"]
    assert "store_path.csv" in manifest
    environment = json.loads((out / "environment.json").read_text())
    gpu = environment["bench"][1]["GPU"]  # the machine record's GPU, by NVML UUID
    assert gpu.startswith("NVIDIA H200 GPU-32854893-e264-f552-d51e-1c550b01fd02, driver 570")
    assert "132 SMs" in gpu and "power limit 700 W" in gpu and "PCIe gen 5 x16" in gpu
    assert "MIG off" in gpu
    assert environment["bench"][1]["machine id"] == "de9f2f89d8ab2c1e"


def test_interop_shows_each_reader_against_each_vector_version(full: tuple[Path, str]) -> None:
    out, page = full
    assert "Reader × vector version" in section(page, "interop")
    rows = pd.read_csv(out / "reader_versions.csv")
    upstream_v2 = rows[(rows["reader"] == "upstream") & (rows["vectors"] == "v2")]
    assert list(upstream_v2["reads"]) == ["v1"] and list(upstream_v2["pass"]) == [74]


def test_summary_counts_and_recommended_scope(full: tuple[Path, str]) -> None:
    out, page = full

    def no_nan(constant: str) -> None:
        pytest.fail(f"summary.json holds {constant}: not strict JSON")

    summary = json.loads((out / "summary.json").read_text(), parse_constant=no_nan)
    counts = {(c["impl"], c["level"]): c for c in summary["counts"]}
    assert counts[("upstream", "MUST")]["fail"] == 1
    assert counts[("upstream", "MUST")]["known_failure"] == 2
    assert counts[("reference", "MUST")]["skip"] == 1
    assert summary["scope_choice"]["scope"] == "PER_PAGE_HEAD"
    verdicts = summary["comparison_verdicts"]
    # the fixtures are 3-process runs: too few for the run decision to reach its alpha,
    # so no row is called a regression and the page says why (below)
    assert verdicts["bench-cpu.jsonl"]["regressions"] == 0
    assert verdicts["bench-cuda.jsonl"]["regressions"] == 0
    text = section(page, "summary")
    assert "Recommended scale scope: PER_PAGE_HEAD" in text
    assert "Rule: Among scopes that store their scales in the blob" in text
    assert "no end-to-end rows" in text
    assert "upstream: 1 MUST test(s) FAIL" in text
    assert "producer × consumer: no unexpected failures in 1 check(s); 1 known failure(s)" in text
    assert "(3.8% slower than the fastest scope, inside the rule&#x27;s 25% bound" in text
    assert "which ranges from 0.0% to 7.5%." in text
    assert '<tr class="chosen"><td>PER_PAGE_HEAD</td>' in text
    assert "Against the baseline (lmckv bench compare), bench-cpu.jsonl: 0 regression(s)" in text
    assert "too few processes (3 vs 3)" in section(page, "comparison")
    assert "bench-cuda.jsonl: no measurement in common with the baseline" in text


def test_a_failing_producer_consumer_check_is_on_the_first_screen(tmp_path: Path) -> None:
    """Matrix checks are not counted per implementation; a failing one must still reach the
    summary, not only the matrix section far below."""
    results = json.loads((FIXTURES / "conformance.json").read_text())
    matrix = [t for t in results["tests"] if t["producer"]]
    assert matrix
    matrix[0]["outcome"] = "fail"
    (tmp_path / "conformance.json").write_text(json.dumps(results))
    assert main([str(tmp_path / "conformance.json"), "--out", str(tmp_path / "out")]) == 0
    text = section((tmp_path / "out" / "index.html").read_text(encoding="utf-8"), "summary")
    assert f"producer × consumer: 1 check(s) FAIL (of {len(matrix)})" in text


def test_results_without_the_versions_list_still_build(tmp_path: Path) -> None:
    """``versions`` came after schema_version 1: a results file without it is read, and the
    interop section leaves the reader x version table out."""
    results = json.loads((FIXTURES / "conformance.json").read_text())
    del results["versions"]
    (tmp_path / "conformance.json").write_text(json.dumps(results))
    assert main([str(tmp_path / "conformance.json"), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "Reader × vector version" not in section(page, "interop")
    assert "Producer × consumer" in page


def test_matrix_shows_which_impl_breaks_which_rule(full: tuple[Path, str]) -> None:
    _, page = full
    text = section(page, "conformance")
    row = re.search(r"<tr><td>KEY-FS-FORM</td>(.*?)</tr>", text, re.S)
    assert row
    assert '<td class="o-pass">pass · 2/2</td>' in row.group(1)
    assert '<td class="o-fail">FAIL · 1/2 pass</td>' in row.group(1)
    links = re.findall(r'<a href="([^"]+)">#key-fs-form</a>', text)
    assert links and all(
        link.endswith("reference_impl/SPEC.md#key-fs-form") and not link.startswith("/")
        for link in links
    )
    assert "cache_salt with &#x27;.&#x27; does not round-trip" in text
    assert '<td class="o-known">known failure</td>' in text
    grouped = re.search(r"<th>first reason</th>.*?</table>", text, re.S)
    assert grouped and grouped.group(0).count("<tr>") == 4  # fail, xpass, 2 known rules
    assert "Every failing test (5)" in text


def test_comparison_shows_bench_compare_verdicts(full: tuple[Path, str]) -> None:
    """The fixtures are 3-process runs: the run decision cannot reach its alpha, so no row
    is marked a regression and the page gives the decision with its reason."""
    out, page = full
    changes, decision, _ = compare_files(
        FIXTURES / "bench-baseline.jsonl",
        FIXTURES / "bench-cpu.jsonl",
        gated_impls=("reference",),
    )
    assert decision.exit_code == 3 and not any(c.regression for c in changes)
    table = pd.read_csv(out / "comparison.csv")
    cpu = table[table["current_run"] == "bench-20250301T101500Z-3f2a9c1"]
    assert not (cpu["verdict"] == "regression").any()
    text = section(page, "comparison")
    assert "run decision: exit 3" in text and "needs 5 per side" in text
    assert "no measurement appears in both runs" in text  # CUDA run against a CPU baseline
    assert "env.gpu differs" in text


def test_comparison_marks_the_rows_that_carried_a_regression(tmp_path: Path) -> None:
    """Five-process runs with encode 30% slower: the rows that carried the decision are the
    regression rows of the table and of the page."""
    base = write_results(tmp_path / "a", synthetic_run(1))
    head = write_results(tmp_path / "b", synthetic_run(2, slowdown={"encode": 1.3}))
    changes, decision, _ = compare_files(base, head)
    expected = {c.id for c in changes if c.regression}
    assert decision.exit_code == 1 and expected
    assert all(i.startswith("encode/reference/") for i in expected)
    out = tmp_path / "out"
    assert main([str(head), "--baseline", str(base), "--out", str(out)]) == 0
    table = pd.read_csv(out / "comparison.csv")
    assert set(table.loc[table["verdict"] == "regression", table.columns[0]]) == expected
    page = (out / "index.html").read_text()
    rows = re.findall(
        r"<tr><td>([^<]+)</td>(?:<td[^>]*>[^<]*</td>){3}<td class=\"o-fail\">regression",
        section(page, "comparison"),
    )
    assert set(rows) == expected


def test_baseline_is_read_once_and_newer_kinds_are_left_out(tmp_path: Path) -> None:
    """The comparison takes the records the report read (bench's one reader, skipping kinds
    newer than the schema): a baseline with a future record compares like one without."""
    baseline = tmp_path / "baseline.jsonl"
    text = (FIXTURES / "bench-baseline.jsonl").read_text()
    baseline.write_text(text + json.dumps({"kind": "future"}) + "\n")
    out = tmp_path / "out"
    assert (
        main([str(FIXTURES / "bench-cpu.jsonl"), "--baseline", str(baseline), "--out", str(out)])
        == 0
    )
    page = (out / "index.html").read_text()
    assert "baseline.jsonl: records of unknown kind left out of the comparison: future (1)" in (
        section(page, "comparison")
    )
    changes, _, _ = compare_files(FIXTURES / "bench-baseline.jsonl", FIXTURES / "bench-cpu.jsonl")
    table = pd.read_csv(out / "comparison.csv")
    assert set(table[table.columns[0]]) >= {c.id for c in changes} and changes
    verdicts = dict(zip(table[table.columns[0]], table["verdict"], strict=False))
    assert all(verdicts[c.id] == c.outcome for c in changes)


def test_bench_only_synthetic_only_notes_what_is_missing(tmp_path: Path) -> None:
    lines = (FIXTURES / "bench-cpu.jsonl").read_text().splitlines(keepends=True)
    synthetic = tmp_path / "bench-synthetic.jsonl"
    synthetic.write_text("".join(line for line in lines if '"real:' not in line))
    out = tmp_path / "out"
    assert main([str(synthetic), "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert re.findall(r'<section id="([a-z0-9]+)">', page) == SECTIONS
    for section_id in ("conformance", "interop"):
        assert "no conformance results file among the inputs" in section(page, section_id)
    assert "no CUDA rows in this run: cuda: no CUDA device" in section(page, "throughput")
    assert "no real-model rows in this run" in section(page, "accuracy")
    assert "no --baseline given" in section(page, "comparison")
    assert "Recommended scale scope: PER_PAGE_HEAD" in page
    assert "no real-model attention rows either" in page
    assert not (out / "throughput_cuda.png").exists()
    for source in re.findall(r'<img src="([^"]+)"', page):
        png_size(out / source)


def test_rebuild_removes_only_its_own_stale_files(tmp_path: Path) -> None:
    build(tmp_path, "conformance.json", "bench-cuda.jsonl")
    assert (tmp_path / "throughput_cuda.png").exists()
    (tmp_path / "notes.txt").write_text("mine")
    page = build(tmp_path, "conformance.json")
    assert not (tmp_path / "throughput_cuda.png").exists()
    assert not (tmp_path / "throughput.csv").exists()
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert re.findall(r'<img src="([^"]+)"', page) == ["producer_consumer.png"]
    assert "no bench results file among the inputs" in section(page, "throughput")


def test_two_runs_of_one_device_keep_separate_lines(tmp_path: Path) -> None:
    page = build(tmp_path, "bench-cpu.jsonl", "bench-baseline.jsonl")
    assert "accuracy rows come from 2 runs" in section(page, "accuracy")
    throughput = pd.read_csv(tmp_path / "throughput.csv")
    assert throughput["run_id"].nunique() == 2
    png_size(tmp_path / "throughput_cpu.png")


def test_odd_but_valid_inputs_degrade_with_notes(tmp_path: Path) -> None:
    """Null accuracy values, limit-only CUDA rows, a zero-case matrix cell, an unlisted rule."""
    lines = (FIXTURES / "bench-cpu.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    kept = [r for r in records if r["kind"] != "accuracy" or r["metric"] != "sqnr_db"]
    for record in kept:
        if record["kind"] == "accuracy" and record["scope"] == "PER_TENSOR":
            record["value"] = None
    limit = next(r for r in records if r["kind"] == "throughput" and r["impl"] == "memcpy")
    kept.append({**limit, "device": "cuda", "impl": "d2d"})
    bench = tmp_path / "bench.jsonl"
    bench.write_text("".join(json.dumps(r) + "\n" for r in kept))
    document = json.loads((FIXTURES / "conformance.json").read_text())
    document["matrix"].append(
        {
            "producer": "upstream",
            "consumer": "c",
            "cases": 0,
            "pass": 0,
            "fail": 0,
            "known_failure": 0,
        }
    )
    document["tests"].append(
        {
            "id": "t::x[c]",
            "rule": "NEW-RULE",
            "level": "MUST",
            "impl": "c",
            "producer": None,
            "outcome": "fail",
            "reason": "new",
        }
    )
    document["rules"][0]["spec_anchor"] = "#kv-magic"
    document["impls"][0]["version"] = None  # an implementation that reports no version
    conformance = tmp_path / "conformance.json"
    conformance.write_text(json.dumps(document))
    out = tmp_path / "out"
    assert main([str(conformance), str(bench), "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert "only limit rows (copy) on CUDA" in section(page, "throughput")
    assert " nan " not in section(page, "environment")
    assert "accuracy_realistic.png" in section(page, "accuracy")  # null values are left out
    assert 'SPEC.md#kv-magic">#kv-magic</a>' in page and "##" not in page
    assert re.search(r"<tr><td>NEW-RULE</td><td>\?</td>", section(page, "conformance"))
    assert "PER_TENSOR" not in set(pd.read_csv(out / "scope_choice.csv")["scope"])
    for source in re.findall(r'<img src="([^"]+)"', page):
        png_size(out / source)


def _on_machine(source: Path, target: Path, host: str, cpu: str) -> Path:
    """``source`` as if run on another machine: its machine record and machine_id in the
    header, that machine_id on every row, quartiles and raw samples on throughput rows."""
    records = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    header = records[0]
    header["run_id"] = f"{header['run_id']}-{host}"
    header["machine"] = {**header["machine"], "host_id": host, "cpu_model": cpu}
    header["machine_id"] = machine_id(header["machine"])
    for record in records[1:]:
        record["machine_id"] = header["machine_id"]
        if record["kind"] == "throughput":
            median = record["median_s"]
            record.update(q25_s=median * 0.9, q75_s=median * 1.1, samples_s=[median, median])
    target.write_text("".join(json.dumps(r) + "\n" for r in records))
    return target


def test_two_machines_are_shown_apart_never_averaged(tmp_path: Path) -> None:
    source = FIXTURES / "bench-cpu.jsonl"
    first = _on_machine(source, tmp_path / "bench-a.jsonl", "a" * 16, "CPU-A")
    second = _on_machine(source, tmp_path / "bench-b.jsonl", "b" * 16, "CPU-B")
    out = tmp_path / "out"
    assert main([str(first), str(second), "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    ids = [json.loads(p.read_text().splitlines()[0])["machine_id"] for p in (first, second)]
    a, b = f"{ids[0][:8]}: CPU-A x2", f"{ids[1][:8]}: CPU-B x2"  # labelled by machine_id

    headline = pd.read_csv(out / "headline_ratios.csv")
    assert set(headline["machine"]) == {a, b}
    per_machine = headline.groupby("machine")["reference GB/s (median)"].apply(list)
    assert per_machine[a] == per_machine[b]  # the same rows each, not one pooled row

    throughput = pd.read_csv(out / "throughput.csv")
    assert set(throughput["machine"]) == {a, b}
    assert throughput[["q25_s", "q75_s", "samples_s"]].notna().all().all()
    by_scope = pd.read_csv(out / "throughput_by_scope.csv")
    assert f"reference GB/s [{a}]" in by_scope.columns
    assert f"reference GB/s [{b}]" in by_scope.columns

    summary = section(page, "summary")
    assert f"<td>{a}</td>" in summary and f"<td>{b}</td>" in summary
    assert f"reference GB/s [{a}]" in section(page, "throughput")
    assert "throughput_cpu_1.png" in page and "throughput_cpu_2.png" in page


#: The issue's bound on every sentence below the answer (the first screen's three lines
#: included): a reader scans, so each sentence stays under this many words.
MAX_SENTENCE_WORDS = 30


def _sentences(html_text: str) -> list[str]:
    """The sentences of the paragraphs and list items of ``html_text`` (tables aside)."""
    out = []
    for _, inner in re.findall(r"<(p|li)\b[^>]*>(.*?)</\1>", html_text, re.S):
        text = re.sub(r"<[^>]+>", "", inner)
        out += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(])", text) if s.strip()]
    return out


def test_every_summary_sentence_is_short(tmp_path: Path) -> None:
    from lmckv.reports.inputs import load_inputs
    from lmckv.reports.output import Output
    from lmckv.reports.summary_section import summary_section

    names = ("conformance.json", "bench-cpu.jsonl", "bench-e2e.jsonl")
    inputs = load_inputs([FIXTURES / n for n in names])
    body = summary_section(inputs, Output(tmp_path), {}).body
    sentences = _sentences(body)
    assert len(sentences) > 20
    long = [s for s in sentences if len(s.split()) >= MAX_SENTENCE_WORDS]
    assert not long, long


def _with_lmcache(source: Path, target: Path, version: str | None) -> Path:
    """``source`` with its header's recorded LMCache release replaced by ``version``."""
    lines = source.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["env"]["lmcache"] = version
    target.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    return target


def _answer(tmp_path: Path, paths: list[Path]) -> tuple[str, dict[str, object]]:
    """The first screen's configure line (tags stripped) and summary.json's first serde."""
    from lmckv.reports.inputs import load_inputs
    from lmckv.reports.output import Output
    from lmckv.reports.summary_section import summary_section

    out = tmp_path / "out"
    body = summary_section(load_inputs(paths), Output(out), {}).body
    line = re.search(r'<li id="answer-configure">(.*?)<code>', body, re.S)
    assert line, "no configure line on the first screen"
    document = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return line.group(1), document["serde_choice"][0]


def test_the_first_screen_names_the_release_the_run_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inputs record lmcache 0.5.6; the report is built where another (or none) is
    installed: the page names 0.5.6 as the run's, the installed one only as the check's."""
    from lmckv.reports import summary_section

    paths = [FIXTURES / n for n in ("conformance.json", "bench-cpu.jsonl", "bench-e2e.jsonl")]
    for installed in ("lmcache 9.9.9", "no lmcache"):
        monkeypatch.setattr(summary_section, "installed_release", lambda i=installed: i)
        line, serde = _answer(tmp_path, paths)
        assert line.startswith("Configure --l2-adapter (run with lmcache 0.5.6; checked here")
        assert f"checked here with {installed}" in line
        assert serde["lmcache_release"] == "lmcache 0.5.6"
    monkeypatch.setattr(summary_section, "installed_release", lambda: "lmcache 0.5.6")
    line, _ = _answer(tmp_path, paths)
    assert line == "Configure --l2-adapter (run with lmcache 0.5.6): "


def test_inputs_that_disagree_on_the_release_are_named_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The e2e run and the store-path run recorded different releases: both, with their
    files, never one picked silently; a run without LMCache recorded says so."""
    from lmckv.reports import summary_section

    monkeypatch.setattr(summary_section, "installed_release", lambda: "lmcache 9.9.9")
    e2e = _with_lmcache(FIXTURES / "bench-e2e.jsonl", tmp_path / "bench-e2e.jsonl", "0.5.7")
    line, serde = _answer(tmp_path, [e2e, FIXTURES / "bench-cpu.jsonl"])
    expected = (
        "lmcache 0.5.7 (bench-e2e.jsonl), lmcache 0.5.6 (bench-cpu.jsonl): the inputs disagree"
    )
    assert f"(run with {expected}; checked here with lmcache 9.9.9)" in line
    assert serde["lmcache_release"] == expected
    e2e = _with_lmcache(FIXTURES / "bench-e2e.jsonl", tmp_path / "bench-e2e.jsonl", None)
    cpu = _with_lmcache(FIXTURES / "bench-cpu.jsonl", tmp_path / "bench-cpu.jsonl", None)
    _, serde = _answer(tmp_path, [e2e, cpu])
    assert serde["lmcache_release"] == "no lmcache"


def test_a_release_no_input_records_is_not_recorded() -> None:
    from types import SimpleNamespace
    from typing import Any

    from lmckv.reports.summary_section import recorded_release

    unrecorded: Any = SimpleNamespace(lmcache_release=None, path=Path("bench.jsonl"))
    assert recorded_release([]) == recorded_release([unrecorded]) == "lmcache release not recorded"
