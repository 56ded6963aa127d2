"""The run report and the record index say which sources of "Where it grows" ran."""

from __future__ import annotations

import html
import json
from pathlib import Path

from harness.runfiles.names import RECORD_INDEX, REPORT_FILE, SAMPLES_FILE
from harness.runfiles.reader import open_run
from harness.runfiles.sources import sources_sentence, where_sources
from reports.record import write_record_index
from reports.run.report import write_run_report
from tests.reports.synth import MB, write_run

OFF = "allocation windows are off: the program handles signal 61 itself"


def test_the_run_page_names_only_the_sources_that_ran_and_why_the_others_did_not(
    tmp_path: Path,
) -> None:
    rundir = tmp_path / "leaking"
    write_run(rundir, "demo-cache", ["demo-unlink"], growth_per_h=400 * MB, garbage_per_op=2.0)
    lines = (rundir / SAMPLES_FILE).read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["config"]["samplers"] += ["allocations", "owners"]  # asked for; one of them off
    off = {"type": "event", "t": 0.1, "name": "sampler_unavailable", "sampler": "allocations",
           "reason": OFF}
    lines = [json.dumps(header), *lines[1:], json.dumps(off)]
    (rundir / SAMPLES_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    loaded = open_run(rundir)
    assert loaded.samples is not None
    expected = sources_sentence(where_sources(loaded.samples))
    write_run_report(loaded)
    text = html.unescape((rundir / REPORT_FILE).read_text(encoding="utf-8"))
    assert expected in text
    sources, _, not_run = expected.partition(" Did not run: ")
    assert "allocation windows" not in sources
    assert f"tracemalloc's allocation windows: {OFF}" in not_run
    assert "allocations (did not run), owners" in text  # the config's samplers row


def test_the_record_index_shows_each_processs_sources(tmp_path: Path) -> None:
    said = "Sources: owner paths. Did not run: tracemalloc's allocation windows: 2 skipped: x."
    summary = {
        "verdict": "leak",
        "stopped": {"how": "duration", "exit_code": 0, "signals": ["SIGINT"], "wall_s": 30.0},
        "processes": [{"pid": 7, "argv": "python app.py", "program": True, "verdict": "leak",
                       "folder": "proc-7", "reasons": ["heap grows"], "where": ["a.py:1"],
                       "sources": said}],
    }
    page = html.unescape(write_record_index(summary, tmp_path).read_text(encoding="utf-8"))
    assert (tmp_path / RECORD_INDEX).exists() and said in page
