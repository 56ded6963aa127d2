"""The index of a recording (``leak-harness record``): one section and plot per process.

Each process's folder has its own ``report.html`` and plots (written by
:mod:`reports.run`); this page puts their verdicts side by side, the program
first, with each one's memory plot and a link to its full report.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.runfiles.names import RECORD_INDEX, REPORT_FILE, RSS_PLOT
from reports.render.html import badge, bullet_list, esc, image, link, page, paragraph, section


def write_record_index(summary: Mapping[str, Any], out: Path) -> Path:
    stopped = summary["stopped"]
    parts = [
        f"<h1>recording {badge(str(summary['verdict']))}</h1>",
        paragraph(f"{len(summary['processes'])} process(es); the program ended by "
                  f"{stopped['how']} after {stopped['wall_s']:.0f} s with exit code "
                  f"{stopped['exit_code']}; stop signals sent: "
                  f"{', '.join(stopped['signals']) or 'none'}.", "meta"),
    ]
    parts += [process_section(out, p) for p in summary["processes"]]
    path = out / RECORD_INDEX
    path.write_text(page("leak-harness recording", parts), encoding="utf-8")
    return path


def process_section(out: Path, process: Mapping[str, Any]) -> str:
    folder = str(process["folder"])
    role = "the program" if process["program"] else "a child"
    content = [
        f"<p>{badge(str(process['verdict']))} <code>{esc(process['argv'])}</code> "
        f"({esc(role)}) {link(f'{folder}/{REPORT_FILE}', 'full report')}</p>",
        bullet_list(process["reasons"][:6]),
    ]
    if process["where"]:
        content.append(paragraph("Where it grows:"))
        content.append(bullet_list(process["where"]))
    if process.get("sources"):  # which sources ran, and why each other one did not
        content.append(paragraph(str(process["sources"]), "muted"))
    if (out / folder / RSS_PLOT).exists():
        content.append(image(f"{folder}/{RSS_PLOT}", f"memory of process {process['pid']}"))
    return section(f"process {process['pid']}", *content)
