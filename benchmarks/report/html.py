"""One self-contained HTML file: sections of paragraphs, tables and PNG figures (embedded as base64).

The document model (`Section`, `Table`, `Figure`: `trajonco.report_document`) is rendering-agnostic; `render_html` is
the only renderer.
Each section has an ``id`` (its anchor, listed in the table of contents); each figure is an ``<img>`` whose
``id`` is the figure's, so tests and readers can find every part. Tables sit in a horizontally scrolling box (a
wide table scrolls instead of being cut); a ``collapsed`` table renders inside ``<details>``. ``notices`` are
caveats shown above everything else (e.g. the agents ran on the embedded test model).

>>> doc = render_html("T", [Section("a", "A", paragraphs=["x < y"], tables=[Table("t", "T1", ["c"], [["1"]])])])
>>> '<section id="a">' in doc and "x &lt; y" in doc and '<table id="t">' in doc
True
"""

from __future__ import annotations

import base64
import html
from datetime import datetime, timezone

from trajonco.report_document import Figure, Section, Table

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#1d1d1f;
line-height:1.45;padding:0 1rem}
h1{font-size:1.7rem}h2{border-bottom:2px solid #e5e5ea;padding-bottom:.2rem;margin-top:2.4rem}
.scroll{overflow-x:auto;max-width:100%;margin:.6rem 0 1.2rem}
table{border-collapse:collapse;font-size:.82rem}
th,td{border:1px solid #d2d2d7;padding:.25rem .5rem;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}th{background:#f5f5f7}
caption{caption-side:top;text-align:left;font-weight:600;padding:.3rem 0;white-space:nowrap}
.note{color:#6e6e73;font-size:.82rem}pre{background:#f5f5f7;padding:.6rem;overflow-x:auto;font-size:.8rem}
img{max-width:100%;border:1px solid #e5e5ea;margin:.4rem 0}nav li{margin:.1rem 0}
.verdict{background:#f2f8ff;border-left:4px solid #0071e3;padding:.6rem 1rem}
.notice{background:#fff4e5;border-left:4px solid #ff9500;padding:.6rem 1rem;margin:1rem 0;font-weight:500}
details{margin:.6rem 0}summary{cursor:pointer;font-weight:600}
"""


def _table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in table.rows)
    note = f'<p class="note">{html.escape(table.note)}</p>' if table.note else ""
    box = (f'<div class="scroll"><table id="{html.escape(table.id)}"><caption>{html.escape(table.title)}</caption>'
           f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{note}")
    if table.collapsed:
        return f"<details><summary>{html.escape(table.title)}</summary>{box}</details>"
    return box


def _figure(figure: Figure) -> str:
    data = base64.b64encode(figure.png).decode("ascii")
    return (f'<figure><img id="{html.escape(figure.id)}" alt="{html.escape(figure.caption)}" '
            f'src="data:image/png;base64,{data}"><figcaption class="note">{html.escape(figure.caption)}'
            "</figcaption></figure>")


def render_html(title: str, sections: list[Section], *, subtitle: str | None = None,
                notices: list[str] | None = None) -> str:
    """The whole report as one HTML string (no external file, script or font); ``notices`` at the very top."""
    toc = "".join(f'<li><a href="#{html.escape(s.id)}">{html.escape(s.title)}</a></li>' for s in sections)
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
             f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    parts += [f'<p class="notice">{html.escape(n)}</p>' for n in notices or []]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f'<p class="note">{html.escape(subtitle or "")} Generated {stamp}.</p><nav><ol>{toc}</ol></nav>')
    for s in sections:
        inner = [f"<h2>{html.escape(s.title)}</h2>"]
        inner += [f"<p>{html.escape(p)}</p>" for p in s.paragraphs]
        inner += [f"<pre>{html.escape(c)}</pre>" for c in s.code]
        inner += [_table(t) for t in s.tables]
        inner += [_figure(f) for f in s.figures]
        klass = f' class="{s.css_class}"' if s.css_class else ""
        parts.append(f'<section id="{html.escape(s.id)}"{klass}>' + "".join(inner) + "</section>")
    parts.append("</body></html>")
    return "".join(parts)
