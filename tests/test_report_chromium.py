"""The generated page in headless Chromium: every image loads, every section renders, and the
first screen (1280x900) answers the operator: the recommended scope, its KL and top-1 figures
and its bytes per token, matching the tables behind them.

Needs the ``chromium`` executable (Debian package ``chromium``; CI installs it). Elsewhere the
test skips and says so. The screenshot is kept in pytest's tmp_path (path printed).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

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
CHROMIUM = shutil.which("chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    profile.mkdir()
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium executable on PATH (Debian: apt install chromium)"
)
def test_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    out = tmp_path / "report"
    names = ("conformance.json", "bench-cpu.jsonl", "bench-cuda.jsonl", "bench-e2e.jsonl")
    argv = [str(FIXTURES / n) for n in names]
    assert (
        main([*argv, "--baseline", str(FIXTURES / "bench-baseline.jsonl"), "--out", str(out)]) == 0
    )
    url = (out / "index.html").resolve().as_uri()

    dump = chromium(
        tmp_path / "profile-dom", "--virtual-time-budget=10000", "--window-size=1280,900",
        "--dump-dom", url,
    )  # fmt: skip
    assert dump.returncode == 0, dump.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", dump.stdout)
    assert body, f"no <body> in the dumped DOM: {dump.stdout[:500]!r}"
    attributes = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1)))
    assert "images-total" in attributes, "the page's load script did not run"
    assert int(attributes["images-total"]) == 8
    assert attributes["images-loaded"] == attributes["images-total"]
    assert attributes["sections"].split() == SECTIONS
    assert "Recommended scale scope: PER_LAYER_HEAD" in dump.stdout  # tied on KL, fewer bytes
    assert "so the choice rests on bytes and speed" in dump.stdout

    first_screen(out, attributes["first-screen"])

    screenshot = tmp_path / "report.png"
    shot = chromium(
        tmp_path / "profile-shot", f"--screenshot={screenshot}", "--window-size=1280,4000", url
    )
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = screenshot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 50_000, "screenshot looks blank"
    print(f"screenshot: {screenshot}")


def first_screen(out: Path, text: str) -> None:
    """The text above the fold names the scope and states the figures the tables hold."""
    choice = json.loads((out / "summary.json").read_text())["scope_choice"]
    scope = choice["scope"]
    chosen = next(row for row in choice["table"] if row["scope"] == scope)
    assert f"Recommended scale scope: {scope}." in text
    e2e = pd.read_csv(out / "e2e.csv")
    kl_rows = e2e[
        (e2e["metric"] == "kl") & (e2e["scope"] == scope) & (e2e["fmt"] == "e4m3")
        & e2e["layer"].isna()
    ]  # fmt: skip
    assert chosen["kl"] == kl_rows["value"].max()  # the worse of the two cache dtypes
    assert f"KL {chosen['kl']:.2e} [{chosen['kl_low']:.2e}, {chosen['kl_high']:.2e}]" in text
    assert f"top-1 agreement {chosen['top1'] * 100:.1f} [" in text
    assert f"{chosen['bytes_per_token']:,.1f} bytes per token" in text
    assert "How sure:" in text and "slower than the fastest scope" in text
