"""A self-contained HTML page: figures embedded as SVG, no external files.

The page opens offline (no scripts, fonts or styles from elsewhere) and
marks every modelled number so it is never read as measured.
"""

from __future__ import annotations

import html
import io
from dataclasses import dataclass, field
from typing import Any

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { border-bottom: 2px solid #345; padding-bottom: .2em; }
h2 { margin-top: 2em; color: #345; }
table { border-collapse: collapse; margin: 1em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: right; }
th { background: #eef; } td:first-child, th:first-child { text-align: left; }
.modelled { color: #a35200; font-style: italic; }
.modelled::after { content: " (modelled)"; font-size: .8em; }
.verdict { font-size: 1.2em; padding: .8em; background: #f3f7ee; border-left: 4px solid #5a2; }
.banner { font-size: 1.2em; padding: .8em; background: #fbeaea; border-left: 4px solid #b22; font-weight: bold; }
.warning { padding: .6em; background: #fff4e5; border-left: 4px solid #e90; }
td:last-child { text-align: left; }
figure { margin: 1em 0; } figcaption { font-size: .85em; color: #555; }
figure svg { max-width: 100%; height: auto; }
.figs { display: grid; grid-template-columns: repeat(auto-fill, minmax(480px, 1fr)); gap: 1em; }
"""


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)  # trusted HTML fragments
    figures: list[tuple[str, str]] = field(default_factory=list)  # (svg markup, caption)
    tables: list[str] = field(default_factory=list)  # HTML tables


def figure_svg(fig: Any) -> str:
    """Render a matplotlib figure to inline SVG markup."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def table_html(rows: list[dict[str, Any]], columns: list[str], modelled: set[str] | None = None,
               modelled_rows: list[bool] | None = None) -> str:
    """A table; cells in ``modelled`` columns of rows flagged modelled get the mark."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for i, row in enumerate(rows):
        cells = []
        for col in columns:
            text = html.escape(str(row.get(col, "")))
            is_modelled = modelled and col in modelled and (modelled_rows is None or modelled_rows[i])
            cells.append(f'<td class="modelled">{text}</td>' if is_modelled else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def page(title: str, intro: str, sections: list[Section]) -> str:
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
             f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>", intro]
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        parts.extend(f"<p>{p}</p>" for p in section.paragraphs)
        parts.extend(section.tables)
        if section.figures:
            parts.append("<div class='figs'>")
            for svg, caption in section.figures:
                parts.append(f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>")
            parts.append("</div>")
    parts.append("</body></html>")
    return "\n".join(parts)
