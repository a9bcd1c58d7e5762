"""HTML building blocks and the page template: one self-contained file, no network.

Images are referenced by relative path (they sit beside index.html); CSS and the small
load-check script are inline. The script sets ``data-images-loaded``/``data-images-total``/
``data-sections`` on ``<body>`` once the page has loaded, and ``data-first-screen``: the text
of the summary's paragraphs and cards lying wholly above the fold (the window's height), for
headless-browser checks of what the reader sees first; where the page has the answer figure
(``#answer-figure``), its box and its lines' bottoms in page coordinates and the number of
words before it (``data-answer-*``, ``data-words-before``).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

import pandas as pd

OUTCOME_CLASS = {
    "pass": "o-pass",
    "known_failure": "o-known",
    "fail": "o-fail",
    "unexpected_pass": "o-xpass",
    "skip": "o-skip",
}

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
       color: #1d2330; background: #fafbfc; }
header, main { max-width: 1280px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 18px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 28px 0 8px; padding-top: 8px; border-top: 2px solid #d8dde6; }
h3 { font-size: 15px; margin: 16px 0 6px; }
nav { position: sticky; top: 0; background: #fafbfc; padding: 8px 0; z-index: 2;
      border-bottom: 1px solid #d8dde6; }
nav a { margin-right: 14px; color: #1f5fa8; text-decoration: none; font-weight: 600; }
.meta { color: #5b6473; font-size: 13px; }
.note { background: #fff7e0; border-left: 4px solid #e0a800; padding: 6px 10px; margin: 8px 0; }
.rule { background: #eef3fb; border-left: 4px solid #1f5fa8; padding: 6px 10px; margin: 8px 0; }
.verdict { font-size: 16px; font-weight: 600; margin: 8px 0; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 10px 0; }
.card { background: #fff; border: 1px solid #d8dde6; border-radius: 6px; padding: 10px 14px;
        min-width: 170px; }
.card .big { font-size: 22px; font-weight: 700; }
.card .label { color: #5b6473; font-size: 12px; }
table.data { border-collapse: collapse; background: #fff; margin: 6px 0 12px; font-size: 13px; }
table.data { max-width: 100%; }
table.data th, table.data td { border: 1px solid #d8dde6; padding: 3px 8px; text-align: left;
                               vertical-align: top; overflow-wrap: break-word; }
table.data td.wrap { overflow-wrap: anywhere; min-width: 14em; }
details > summary { cursor: pointer; color: #1f5fa8; margin: 4px 0; }
table.data th { background: #eef1f5; }
table.data td.num { text-align: right; font-variant-numeric: tabular-nums; }
.o-pass { background: #c9efcf; }
.o-known { background: #ffe3a3; }
.o-fail { background: #f6b3b3; font-weight: 600; }
.o-xpass { background: #f3c4e6; font-weight: 600; }
.o-skip { background: #e3e5e8; color: #5b6473; }
tr.chosen td { background: #c9efcf; font-weight: 600; }
.legend span { display: inline-block; padding: 1px 8px; margin-right: 6px; border-radius: 3px; }
figure { margin: 10px 0 18px; }
figure img { max-width: 100%; border: 1px solid #d8dde6; background: #fff; }
figcaption { color: #5b6473; font-size: 13px; }
code { background: #eef1f5; padding: 0 3px; border-radius: 3px; }
"""

LOAD_CHECK_SCRIPT = """
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  document.body.dataset.imagesTotal = String(imgs.length);
  document.body.dataset.imagesLoaded = String(ok.length);
  document.body.dataset.sections = Array.prototype.map.call(
    document.querySelectorAll("section[id]"), function (s) { return s.id; }).join(" ");
  var fold = window.innerHeight;
  var shown = Array.prototype.filter.call(
    document.querySelectorAll("#summary p, #summary .card"),
    function (e) { return e.getBoundingClientRect().bottom <= fold; });
  document.body.dataset.firstScreen = shown.map(function (e) {
    return e.textContent; }).join(" | ");
  var answer = document.getElementById("answer-figure");
  if (answer) {
    var box = answer.getBoundingClientRect(), img = answer.querySelector("img");
    var before = document.createRange();
    before.setStart(document.body, 0);
    before.setEndBefore(answer);
    var lines = Array.prototype.map.call(
      document.querySelectorAll("#answer-lines li"), function (e) {
        return e.getBoundingClientRect().bottom + window.scrollY; });
    document.body.dataset.answerTop = String(box.top + window.scrollY);
    document.body.dataset.answerBottom = String(box.bottom + window.scrollY);
    document.body.dataset.answerRight = String(box.right + window.scrollX);
    document.body.dataset.answerImage = String(img ? img.naturalWidth : 0);
    document.body.dataset.answerLines = lines.join(" ");
    document.body.dataset.wordsBefore = String(
      before.toString().split(/\\s+/).filter(Boolean).length);
  }
});
"""


@dataclass(frozen=True)
class Section:
    """One ``<section>`` of the page: anchor id, heading, and its (already escaped) body."""

    id: str
    title: str
    body: str


def note(text: str) -> str:
    """A visible note for missing or degraded inputs (never a silent empty section)."""
    return f'<p class="note">{escape(text)}</p>'


def paragraph(text: str, css_class: str | None = None) -> str:
    attr = f' class="{css_class}"' if css_class else ""
    return f"<p{attr}>{escape(text)}</p>"


def figure(src: str, alt: str, caption: str) -> str:
    """An ``<img>`` by relative path with a caption."""
    return (
        f'<figure><img src="{escape(src)}" alt="{escape(alt)}">'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
    )


def number(value: float) -> str:
    """A float for a table cell: thousands separated, else four significant digits."""
    if value == 0 or abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 0.001:
        return f"{value:.4g}"
    return f"{value:.3e}"


def _cell(value: object) -> tuple[str, bool]:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "—", False
    if isinstance(value, bool):
        return ("yes" if value else "no"), False
    if isinstance(value, float):
        return number(value), True
    if isinstance(value, int):
        return f"{value:,}", True
    return escape(str(value)), False


def table(
    frame: pd.DataFrame,
    row_class: pd.Series | None = None,
    cell_class: dict[str, pd.Series] | None = None,
    raw_columns: frozenset[str] = frozenset(),
    wrap_columns: frozenset[str] = frozenset(),
) -> str:
    """A DataFrame as an HTML table; cells escaped unless their column is in ``raw_columns``.

    ``row_class`` gives a CSS class per row; ``cell_class`` a CSS class per cell of a column;
    cells of ``wrap_columns`` (long ids, long reasons) may break anywhere.
    """
    head = "".join(f"<th>{escape(str(c))}</th>" for c in frame.columns)
    values = {column: frame[column].tolist() for column in frame.columns}
    body = []
    for position in range(len(frame)):
        cells = []
        for column in frame.columns:
            value = values[column][position]
            if column in raw_columns:
                text, numeric = str(value), False
            else:
                text, numeric = _cell(value)
            classes = ["num"] if numeric else []
            if column in wrap_columns:
                classes.append("wrap")
            if cell_class and column in cell_class:
                extra = cell_class[column].iloc[position]
                if isinstance(extra, str) and extra:
                    classes.append(extra)
            attr = f' class="{" ".join(classes)}"' if classes else ""
            cells.append(f"<td{attr}>{text}</td>")
        row_attr = ""
        if row_class is not None and isinstance(row_class.iloc[position], str):
            row_attr = f' class="{row_class.iloc[position]}"'
        body.append(f"<tr{row_attr}>{''.join(cells)}</tr>")
    return (
        f'<table class="data"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def collapsible(content: str, rows: int, csv_name: str, limit: int = 30) -> str:
    """A table longer than ``limit`` rows folded behind a summary line naming its CSV file."""
    if rows <= limit:
        return content
    return (
        f"<details><summary>all {rows} rows (also in {escape(csv_name)})</summary>"
        f"{content}</details>"
    )


def outcome_legend() -> str:
    """The colour key used by every conformance table."""
    labels = {
        "pass": "pass",
        "known_failure": "known failure",
        "fail": "FAIL",
        "unexpected_pass": "unexpected pass",
        "skip": "skip",
    }
    spans = "".join(f'<span class="{OUTCOME_CLASS[k]}">{v}</span>' for k, v in labels.items())
    return f'<p class="legend">{spans}</p>'


def page(title: str, subtitle: str, sections: list[Section]) -> str:
    """The whole self-contained document."""
    nav = "".join(f'<a href="#{escape(s.id)}">{escape(s.title)}</a>' for s in sections)
    body = "".join(
        f'<section id="{escape(s.id)}"><h2>{escape(s.title)}</h2>{s.body}</section>'
        for s in sections
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style>"
        f"<script>{LOAD_CHECK_SCRIPT}</script></head>"
        f'<body><header><h1>{escape(title)}</h1><p class="meta">{escape(subtitle)}</p>'
        f"<nav>{nav}</nav></header><main>{body}</main></body></html>\n"
    )


def details(summary: str, content: str, csv_name: str) -> str:
    """A table folded behind a summary line, with a link to its CSV file beside it."""
    return (
        f"<details><summary>{escape(summary)}</summary>{content}</details>"
        f'<p class="meta">Table: <a href="{escape(csv_name)}">{escape(csv_name)}</a></p>'
    )
