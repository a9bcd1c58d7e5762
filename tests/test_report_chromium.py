"""The generated page in headless Chromium: every image loads, every section renders.

Needs the ``chromium`` executable (Debian package ``chromium``; CI installs it). Elsewhere the
test skips and says so. The screenshot is kept in pytest's tmp_path (path printed).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reports.cli import main

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
    argv = [str(FIXTURES / n) for n in ("conformance.json", "bench-cpu.jsonl", "bench-cuda.jsonl")]
    assert (
        main([*argv, "--baseline", str(FIXTURES / "bench-baseline.jsonl"), "--out", str(out)]) == 0
    )
    url = (out / "index.html").resolve().as_uri()

    dump = chromium(tmp_path / "profile-dom", "--virtual-time-budget=10000", "--dump-dom", url)
    assert dump.returncode == 0, dump.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", dump.stdout)
    assert body, f"no <body> in the dumped DOM: {dump.stdout[:500]!r}"
    attributes = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1)))
    assert "images-total" in attributes, "the page's load script did not run"
    assert int(attributes["images-total"]) == 5
    assert attributes["images-loaded"] == attributes["images-total"]
    assert attributes["sections"].split() == SECTIONS
    assert "Recommended scale scope: PER_PAGE_HEAD" in dump.stdout

    screenshot = tmp_path / "report.png"
    shot = chromium(
        tmp_path / "profile-shot", f"--screenshot={screenshot}", "--window-size=1280,4000", url
    )
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = screenshot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 50_000, "screenshot looks blank"
    print(f"screenshot: {screenshot}")
