"""The three faces of a suite: ``index.html`` (a summary per scenario), ``junit.xml``, text.

All three render the same cells (:class:`harness.suite.CellOutcome`), already judged.
The JUnit file follows the common Jenkins/GitLab/GitHub schema: one
``testsuite``, one ``testcase`` per cell with ``classname`` ``leak-harness.<scenario>``,
and a ``failure`` element, carrying the reasons, when a cell is wrong.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from harness.runfiles.facts import FIXED
from harness.runfiles.names import REPORT_FILE
from harness.suite import CellOutcome
from harness.verdicts import PROCESS_VERDICTS
from reports.render.html import badge, bullet_list, esc, link, page, paragraph, section
from reports.render.numbers import format_seconds
from reports.suite.model import cell_culprit, cell_signal

SUITE_NAME = "leak-harness"
WRONG_MARK, RIGHT_MARK = "✗", "✓"


TRENDS_DIR = "trends"  # where check and the nightly merge draw the history's trend plots


def columns_of(cells: Sequence[CellOutcome]) -> list[str]:
    injected = sorted({c.column for c in cells if c.column != FIXED})
    return [FIXED, *injected] if any(c.column == FIXED for c in cells) else injected


def render_index(cells: Sequence[CellOutcome], out: Path, not_applicable: Sequence[str] = (),
                 flagged: Sequence[str] = ()) -> str:
    """The suite's page: per scenario, the fixed code's cell beside each injected
    regression's; links to run reports are relative to ``out``. ``flagged``: the
    history's regression flags, each a sentence."""
    wrong = [c for c in cells if not c.correct]
    verdict = "pass" if cells and not wrong else "leak"
    word = "all as expected" if verdict == "pass" else f"{len(wrong)} wrong"
    head = (f'<h1><span class="badge" style="background:{_colour(verdict)}">{esc(word)}</span> '
            f"Leak detection summary</h1>")
    meta = paragraph(f"{len(cells)} runs, {len({c.scenario for c in cells})} scenarios, from "
                     f"{len({c.rundir.parent for c in cells})} folders. A cell is right when the "
                     "fixed code passes and an injected regression gets a failing verdict "
                     "(leak, crashed, hung, ceiling).", "meta")
    parts = [head, meta]
    if flagged:
        parts.append(section("Flagged by the history", bullet_list(flagged)))
    if wrong:
        parts.append(section("Wrong cells", *(_wrong_cell(c, out) for c in wrong)))
    parts.append(section("Runs", _summary_table(cells, out)))
    if not_applicable:
        parts.append(section("Not run", bullet_list(not_applicable)))
    trends = sorted((out / TRENDS_DIR).glob("*.png"))
    if trends:
        links = ", ".join(link(str(p.relative_to(out)), p.stem) for p in trends)
        parts.append(section("Trends", f"<p>Growth per night on the signals each scenario's "
                                        f"budgets judge, from the history: {links}.</p>"))
    return page(f"leak-harness suite: {word}", parts)


def _colour(verdict: str) -> str:
    return "#1a7f37" if verdict == "pass" else "#cf222e"


def _summary_table(cells: Sequence[CellOutcome], out: Path) -> str:
    """One row per injected regression, its scenario's fixed cell beside it (spanning
    the scenario's rows); a scenario without one says so."""
    rows = []
    for scenario in sorted({c.scenario for c in cells}):
        fixed = [c for c in cells if c.scenario == scenario and c.column == FIXED]
        injected = [c for c in cells if c.scenario == scenario and c.column != FIXED]
        span = max(len(injected), 1)
        spans = f' rowspan="{span}"' if span > 1 else ""
        left = (f"<td{spans}><b>{esc(scenario)}</b></td>"
                + _cells_td(fixed, out, span, "the fixed code was not run"))
        right = [_cells_td([c], out, 1, "") for c in injected] or [
            '<td class="muted">no regression injected in this scenario</td>']
        rows.append(f"<tr>{left}{right[0]}</tr>")
        rows += [f"<tr>{cell}</tr>" for cell in right[1:]]
    head = "<tr><th>scenario</th><th>fixed code</th><th>injected regression</th></tr>"
    return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def _cells_td(here: Sequence[CellOutcome], out: Path, rowspan: int, none: str) -> str:
    span = f' rowspan="{rowspan}"' if rowspan > 1 else ""
    if not here:
        return f'<td class="muted"{span}>{esc(none)}</td>'
    css = "right" if all(c.correct for c in here) else "wrong"
    return f'<td class="{css}"{span}>' + "<hr>".join(_cell_html(c, out) for c in here) + "</td>"


def _cell_html(cell: CellOutcome, out: Path) -> str:
    report = _report_link(cell, out)
    shown = badge(cell.verdict)
    linked = f'<a href="{esc(report)}">{shown}</a>' if report else shown
    mark = RIGHT_MARK if cell.correct else f"{WRONG_MARK} {cell.why_wrong}"
    repeat = f" (run {cell.repeat})" if cell.repeat > 1 else ""
    name = f"<b>{esc(cell.column.removeprefix('inject:'))}</b> " if cell.column != FIXED else ""
    lines = [f"{name}{linked}{esc(repeat)} {esc(mark)}", f"<small>{esc(cell_timing(cell))}</small>"]
    signal, culprit = cell_signal(cell), cell_culprit(cell)
    if signal:
        lines.append(f"<small>{esc(signal)}</small>")
    if culprit and cell.verdict != "pass":
        lines.append(f'<small class="muted">where: {esc(culprit)}</small>')
    return "<br>".join(lines)


def cell_timing(cell: CellOutcome) -> str:
    if cell.verdict in PROCESS_VERDICTS:
        return f"{cell.verdict} after {format_seconds(cell.duration_s)}"
    if cell.detect_s is not None:
        return f"detected after {format_seconds(cell.detect_s)}"
    return f"ran {format_seconds(cell.duration_s)}"


def _report_link(cell: CellOutcome, out: Path) -> str | None:
    report = cell.rundir / REPORT_FILE
    if not report.exists():
        return None
    return Path(os.path.relpath(report.resolve(), out.resolve())).as_posix()


def _wrong_cell(cell: CellOutcome, out: Path) -> str:
    report = _report_link(cell, out)
    where = f'<a href="{esc(report)}">{esc(cell.rundir)}</a>' if report else esc(cell.rundir)
    title = (f"<p><b>{esc(cell.scenario)} · {esc(cell.name)}</b>: {badge(cell.verdict)} "
             f"{esc(cell.why_wrong)} — run folder {where}</p>")
    return title + bullet_list(cell.reasons or ("(the summary gives no reasons)",))


NOT_RUN = re.compile(r"^(?P<scenario>[^\[]+)\[(?P<column>[^\]]+)\]: (?P<why>.*)$")


def render_junit(cells: Sequence[CellOutcome], not_run: Sequence[str] = ()) -> bytes:
    """JUnit XML, UTF-8, with an XML declaration; ``not_run``: ``"scenario[column]: why"``
    sentences of cells that did not run (n/a on a target, not started when interrupted),
    written as skipped test cases so a CI's test view counts them."""
    skipped = [m for m in map(NOT_RUN.match, not_run) if m is not None]
    failures = sum(not c.correct for c in cells)
    total = f"{sum(c.duration_s for c in cells):.3f}"
    counts = {"tests": str(len(cells) + len(skipped)), "failures": str(failures),
              "errors": "0", "skipped": str(len(skipped))}
    root = ET.Element("testsuites", {"name": SUITE_NAME, **counts, "time": total})
    suite = ET.SubElement(root, "testsuite", {"name": SUITE_NAME, **counts, "time": total})
    for cell in cells:
        case = ET.SubElement(suite, "testcase", {
            "classname": f"{SUITE_NAME}.{cell.scenario}", "name": cell.name,
            "time": f"{cell.duration_s:.3f}",
        })
        if not cell.correct:
            failure = ET.SubElement(case, "failure", {
                "message": f"{cell.verdict}: {cell.why_wrong}", "type": cell.verdict,
            })
            failure.text = "\n".join([*cell.reasons, f"run folder: {cell.rundir}"])
        out = ET.SubElement(case, "system-out")
        out.text = f"verdict: {cell.verdict}\nrun folder: {cell.rundir}\n"
    for match in skipped:
        case = ET.SubElement(suite, "testcase", {
            "classname": f"{SUITE_NAME}.{match['scenario']}", "name": match["column"],
            "time": "0.000"})
        ET.SubElement(case, "skipped", {"message": match["why"]})
    ET.indent(root)
    written: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return written


def render_text(cells: Sequence[CellOutcome]) -> str:
    """A compact summary for CI logs: one line per cell, reasons under wrong ones."""
    wrong = [c for c in cells if not c.correct]
    state = "all as expected" if cells and not wrong else f"{len(wrong)} WRONG"
    lines = [f"leak-harness suite: {len(cells)} runs, {state}"]
    width = max((len(c.scenario) for c in cells), default=8)
    col_width = max((len(c.name) for c in cells), default=8)
    for cell in cells:
        mark = "ok" if cell.correct else f"WRONG: {cell.why_wrong}"
        lines.append(f"  {cell.scenario:<{width}}  {cell.name:<{col_width}}  "
                     f"{cell.verdict:<10} {cell_timing(cell):<24} {mark}")
        if not cell.correct:
            lines += [f"      - {reason}" for reason in cell.reasons]
            lines.append(f"      run folder: {cell.rundir}")
    return "\n".join(lines) + "\n"
