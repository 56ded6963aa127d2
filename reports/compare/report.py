"""``write_comparison(a, b, out)``: two runs (broken vs fixed, say) on shared axes.

Writes ``compare.png`` (RSS, cyclic garbage freed, key gauges), ``compare.html``
and ``compare.txt`` with the ratio of their growth rates. A ratio is only
quoted when both runs confirm growth: dividing by a slope whose interval
includes zero gives any number at all, so then the text says "no growth" and,
where it can, how much faster one grows than the other could at most.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.runfiles.facts import Growth, column, garbage_per_kop, judged_growth
from harness.runfiles.names import REPORT_FILE
from harness.runfiles.reader import LoadedRun
from harness.runfiles.summary import Summary
from reports.compare.model import Side
from reports.compare.plot import draw_comparison, key_gauges
from reports.render.fitline import stored_fit
from reports.render.growth import describe_growth
from reports.render.html import badge, esc, image, page, paragraph, section, table
from reports.render.numbers import sig

PNG, HTML, TEXT = "compare.png", "compare.html", "compare.txt"


@dataclass(frozen=True)
class Comparison:
    a: Side
    b: Side
    ratio: float | None  # a's growth over b's; None unless both confirm growth
    sentence: str
    png: Path | None
    html: Path
    text: Path


# Byte and count series a leak can be judged on, in the order a comparison prefers.
SERIES = ("rss", "heap", "uss", "py_blocks")


def write_comparison(a: LoadedRun, b: LoadedRun, out: Path) -> Comparison:
    """Compare runs ``a`` and ``b``; write the three files into ``out``.

    Both sides are compared on one series: the one a failing budget of either
    run was judged on (a leak the heap caught is compared on the heap), else RSS.
    """
    series = compared_series([a.summary, b.summary])
    first = load_side("A", a, series)
    second = load_side("B", b, series)
    ratio, sentence = growth_ratio(first, second)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    png = draw_comparison(first, second, out / PNG)
    html_path, text_path = out / HTML, out / TEXT
    text_path.write_text(render_text(first, second, sentence), encoding="utf-8")
    html_path.write_text(render_html(first, second, sentence, png, out), encoding="utf-8")
    return Comparison(first, second, ratio, sentence, png, html_path, text_path)


def compared_series(summaries: Sequence[Summary]) -> str:
    """The series a failing budget of either run was judged on, else ``rss``."""
    for status in ("leak", "suspicious"):
        for summary in summaries:
            for name, metric in summary.metrics.items():
                if metric.status == status and name.endswith("growth"):
                    series = next((s for s in SERIES if name.startswith(f"{s}_")), None)
                    if series is not None:
                        return series
    return "rss"


def load_side(letter: str, loaded: LoadedRun, series: str = "rss") -> Side:
    summary = loaded.summary
    growth = judged_growth(summary, series)
    if growth is None:
        # No growth metric: quote the stored line's slope.
        fit = stored_fit(summary, series)
        unit = "B/h" if series != "py_blocks" else "/h"
        growth = Growth(f"{series}_growth", fit.per_h, fit.ci, unit) if fit else None
    label = f"{letter}: {summary.scenario} · {column(summary)} · {series}"
    return Side(label, loaded.rundir, summary, loaded.samples, growth)


def growth_ratio(a: Side, b: Side) -> tuple[float | None, str]:
    """A's growth over B's when both confirm growth, and a sentence saying so honestly."""
    ga, gb = a.growth, b.growth
    lines = f"{a.label} {describe_growth(ga)}; {b.label} {describe_growth(gb)}."
    if ga is None or gb is None:
        return None, lines + " No ratio without both growth rates."
    if ga.confirmed and gb.confirmed:
        ratio = ga.per_h / gb.per_h
        return ratio, lines + f" A grows {sig(ratio)}x as fast as B."
    if not ga.confirmed and not gb.confirmed:
        return None, lines + " Neither grows, so there is no ratio to quote."
    grows, flat = (ga, gb) if ga.confirmed else (gb, ga)
    names = ("A", "B") if ga.confirmed else ("B", "A")
    bound = ""
    low, high = grows.ci[0] if grows.ci else grows.per_h, flat.ci[1] if flat.ci else flat.per_h
    if high > 0:
        bound = f" {names[0]} grows at least {sig(low / high)}x as fast as {names[1]} could."
    return None, lines + f" No ratio: {names[1]} shows no growth.{bound}"


def render_text(a: Side, b: Side, sentence: str) -> str:
    lines = [sentence, ""]
    for side in (a, b):
        kop = garbage_per_kop(side.summary)
        lines.append(f"{side.label}: {side.summary.verdict}; cyclic garbage "
                     f"{sig(kop)} /kop; ran {sig(side.summary.duration_s)} s; {side.rundir}")
    return "\n".join(lines) + "\n"


def render_html(a: Side, b: Side, sentence: str, png: Path | None, out: Path) -> str:
    rows = []
    for side in (a, b):
        report = side.rundir / REPORT_FILE
        where = esc(side.rundir)
        if report.exists():
            href = Path(os.path.relpath(report.resolve(), out.resolve())).as_posix()
            where = f'<a href="{esc(href)}">{where}</a>'
        kop = garbage_per_kop(side.summary)
        growth = describe_growth(side.growth)
        rows.append([esc(side.label), badge(side.summary.verdict), esc(growth),
                     esc(f"{sig(kop)} /kop"), where])
    parts = [
        f"<h1>{esc(a.label)} vs {esc(b.label)}</h1>",
        paragraph(sentence),
        table(["run", "verdict", "RSS growth per hour [95% interval]", "cyclic garbage",
               "run folder"], rows),
        section("Shared axes", image(png.name, "comparison") if png else
                paragraph("Neither run has samples to plot.", "muted")),
    ]
    keys = key_gauges(a, b)
    if keys:
        parts.append(paragraph(f"Gauges shown: {', '.join(keys)}.", "muted"))
    return page(f"compare: {a.label} vs {b.label}", parts)
