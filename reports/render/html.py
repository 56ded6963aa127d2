"""Small HTML building blocks: one self-contained page, inline CSS, escaped text.

No template engine: the pages are a few tables and images, and a dependency
for that would be heavier than the pages. Every piece of text from a result
file goes through :func:`esc` (scenario names, reasons and commands are user
input as far as HTML is concerned).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

VERDICT_COLOURS = {
    "pass": "#1a7f37",
    "suspicious": "#9a6700",
    "leak": "#cf222e",
    "crashed": "#82071e",
    "hung": "#8250df",
    "ceiling": "#bc4c00",
    "interrupted": "#6e7781",
    "error": "#57606a",
}

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #24292f;
       margin: 0 auto; padding: 18px 28px 40px; max-width: 1100px; }
h1 { font-size: 24px; margin: 4px 0 6px; } h2 { font-size: 19px; margin: 26px 0 8px;
     border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
.meta { color: #57606a; margin: 0 0 10px; }
.badge { display: inline-block; padding: 2px 12px; border-radius: 14px; color: #fff;
         font-weight: 700; text-transform: uppercase; letter-spacing: .04em; font-size: 15px; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 14px; }
th, td { border: 1px solid #d0d7de; padding: 4px 9px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.judged td { background: #fbfcfd; font-weight: 600; }
.status { font-weight: 700; } .wrong { background: #ffebe9 !important; }
.right { background: #f0fff4; }
code, pre { font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; padding: 10px; white-space: pre-wrap;
      word-break: break-all; }
img { max-width: 100%; border: 1px solid #d0d7de; margin: 6px 0; }
ul.reasons li { margin: 3px 0; } ul.headline { font-size: 16px; padding-left: 20px; }
ul.headline li { margin: 4px 0; } .muted { color: #57606a; }
details summary { cursor: pointer; color: #0969da; margin: 4px 0; }
"""


def esc(text: object) -> str:
    """HTML-escaped, and valid UTF-8: bytes that were not (a program's argument, kept by
    Python as surrogates) are shown as ``\\udcff`` escapes instead of failing the page."""
    shown = str(text).encode("utf-8", "backslashreplace").decode("utf-8")
    return html.escape(shown, quote=True)


def page(title: str, parts: Iterable[str]) -> str:
    """A complete HTML document; ``parts`` are already-escaped fragments."""
    body = "\n".join(parts)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta name=\"viewport\" content=\"width=device-width\">\n<title>{esc(title)}</title>\n"
        f"<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def badge(verdict: str) -> str:
    colour = VERDICT_COLOURS.get(verdict, "#57606a")
    return f'<span class="badge" style="background:{colour}">{esc(verdict)}</span>'


def status(text: str) -> str:
    """A budget status (pass, suspicious, leak, error) in its colour; blank stays blank."""
    if not text:
        return ""
    colour = VERDICT_COLOURS.get(text, "#24292f")
    return f'<span class="status" style="color:{colour}">{esc(text)}</span>'


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    numeric: Sequence[int] = (),
    row_classes: Sequence[str] | None = None,
    cell_classes: Sequence[Sequence[str]] | None = None,
) -> str:
    """A table of already-escaped cells; columns in ``numeric`` are right-aligned."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    lines = []
    for index, row in enumerate(rows):
        styles = cell_classes[index] if cell_classes else [""] * len(row)
        cells = "".join(
            f'<td class="{" ".join(filter(None, ("num" if column in numeric else "", css)))}">'
            f"{cell}</td>"
            for column, (cell, css) in enumerate(zip(row, styles, strict=True))
        )
        css = row_classes[index] if row_classes and row_classes[index] else ""
        lines.append(f'<tr class="{css}">{cells}</tr>' if css else f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"


def section(title: str, *content: str) -> str:
    return f"<h2>{esc(title)}</h2>\n" + "\n".join(content)


def paragraph(text: str, css: str = "") -> str:
    """A paragraph of plain text (escaped here)."""
    return f'<p class="{css}">{esc(text)}</p>' if css else f"<p>{esc(text)}</p>"


def link(href: str, text: str) -> str:
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def image(src: str, alt: str) -> str:
    return f'<img src="{esc(src)}" alt="{esc(alt)}">'


def bullet_list(items: Iterable[str], css: str = "") -> str:
    """A list of plain-text items (escaped here)."""
    inner = "".join(f"<li>{esc(item)}</li>" for item in items)
    return f'<ul class="{css}">{inner}</ul>' if css else f"<ul>{inner}</ul>"


def html_list(items: Iterable[str], css: str = "") -> str:
    """A list of items that are HTML already (escaped by the caller)."""
    inner = "".join(f"<li>{item}</li>" for item in items)
    return f'<ul class="{css}">{inner}</ul>' if css else f"<ul>{inner}</ul>"
