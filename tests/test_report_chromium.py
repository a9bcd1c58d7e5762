"""The generated page in headless Chromium: every image loads, every section renders, and the
first screen (the first 800 pixels of a 1280-pixel-wide page) is the operator's answer: the
answer figure and its three lines (what to configure, what it costs, how sure), with fewer
than ``MAX_WORDS_BEFORE`` words before the figure; the scope choice below states the figures
the tables hold.

Coordinates are the page's own (``data-answer-*``, set by the page's load script), compared
with the constant fold: in ``--dump-dom`` mode Chromium's viewport is shorter than
``--window-size`` says, so its ``innerHeight`` is not the fold.

Needs the ``chromium`` executable (Debian package ``chromium``; CI installs it). Elsewhere the
test skips and says so. The screenshot is kept in pytest's tmp_path (path printed).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image, ImageStat

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
#: The first screen: 1280 x 800 pixels.
WIDTH, FOLD = 1280, 800
MAX_WORDS_BEFORE = 150
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
        tmp_path / "profile-dom", "--virtual-time-budget=10000", f"--window-size={WIDTH},{FOLD}",
        "--dump-dom", url,
    )  # fmt: skip
    assert dump.returncode == 0, dump.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", dump.stdout)
    assert body, f"no <body> in the dumped DOM: {dump.stdout[:500]!r}"
    attributes = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1)))
    assert "images-total" in attributes, "the page's load script did not run"
    assert int(attributes["images-total"]) == 9
    assert attributes["images-loaded"] == attributes["images-total"]
    assert attributes["sections"].split() == SECTIONS
    box = answer_box(out, attributes, dump.stdout)
    scope_choice(out, dump.stdout)

    screenshot = tmp_path / "first-screen.png"
    shot = chromium(
        tmp_path / "profile-shot", f"--screenshot={screenshot}", f"--window-size={WIDTH},{FOLD}",
        url,
    )  # fmt: skip
    assert shot.returncode == 0, shot.stderr[-2000:]
    with Image.open(screenshot) as image:
        assert image.size == (WIDTH, FOLD)
        figure = image.convert("L").crop((0, int(box[0]), WIDTH, int(box[1])))
        assert ImageStat.Stat(figure).stddev[0] > 20, "the figure's area of the screenshot is blank"
    print(f"screenshot of the first screen: {screenshot}")


def answer_box(out: Path, attributes: dict[str, str], dom: str) -> tuple[float, float]:
    """The answer figure and its three lines lie in the first screen, after fewer than
    ``MAX_WORDS_BEFORE`` words; the configure line holds the recommendation's JSON.
    Returns the figure's (top, bottom) in page pixels."""
    assert int(attributes["answer-image"]) > 0, "the answer figure did not load"
    top, bottom = float(attributes["answer-top"]), float(attributes["answer-bottom"])
    assert 0 < top < bottom <= FOLD and float(attributes["answer-right"]) <= WIDTH
    lines = [float(b) for b in attributes["answer-lines"].split()]
    assert len(lines) == 3 and max(lines) <= FOLD, lines
    assert int(attributes["words-before"]) < MAX_WORDS_BEFORE
    chosen = json.loads((out / "summary.json").read_text())["serde_choice"][0]
    configure = re.search(r'<li id="answer-configure">(.*?)</li>', dom, re.S)
    assert configure, "no configure line"
    code = re.search(r"<code>(.*?)</code>", configure.group(1), re.S)
    assert code and json.loads(html.unescape(code.group(1))) == chosen["adapter_spec"]
    assert '<li id="answer-cost">Costs: ' in dom and '<li id="answer-sure">How sure: ' in dom
    return top, bottom


def scope_choice(out: Path, text: str) -> None:
    """The scope choice below the answer states the figures the tables hold."""
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
