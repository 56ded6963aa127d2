"""Run reports: every file written, the page says what the summary says, the line it judged."""

from __future__ import annotations

import dataclasses
import html
import json
import shutil
from pathlib import Path

import pytest

from harness.runfiles.names import (
    GARBAGE_PLOT,
    GAUGES_PLOT,
    GC_PLOT,
    JUDGED_PLOT,
    REPORT_FILE,
    RSS_PLOT,
    SAMPLES_FILE,
    SUMMARY_FILE,
    TRACEBACK_FILE,
)
from harness.runfiles.reader import open_run
from harness.runfiles.summary import SUMMARY_VERSION, Summary, load_summary, write_summary
from harness.runfiles.summary_records import Metric
from harness.units import format_duration
from leak_harness.cli import main
from reports.render.fitline import FitLine
from reports.run.model import RunModel, build_run_model
from reports.run.report import write_run_report
from tests.reports.synth import GOLDEN, MB, as_v1, write_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def report(rundir: Path) -> Path:
    return write_run_report(open_run(rundir))


def model_of(rundir: Path) -> RunModel:
    loaded = open_run(rundir)
    return build_run_model(loaded.rundir, loaded.samples, loaded.summary, loaded.why_no_samples)


@pytest.fixture(scope="module")
def leaking(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rundir = tmp_path_factory.mktemp("runs") / "leaking"
    write_run(rundir, "demo-cache", ["demo-unlink"], growth_per_h=400 * MB, garbage_per_op=2.0)
    report(rundir)
    return rundir


@pytest.fixture(scope="module")
def flat(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rundir = tmp_path_factory.mktemp("runs") / "flat"
    write_run(rundir, "demo-cache")
    report(rundir)
    return rundir


def page_text(rundir: Path) -> str:
    return html.unescape((rundir / REPORT_FILE).read_text(encoding="utf-8"))


def test_every_file_of_a_leaking_run_is_written(leaking: Path) -> None:
    for name in (RSS_PLOT, GC_PLOT, GARBAGE_PLOT, GAUGES_PLOT):
        assert (leaking / name).read_bytes()[:8] == PNG_MAGIC, name
    assert (leaking / REPORT_FILE).exists()


def test_page_states_verdict_reasons_metrics_cycle_and_command(leaking: Path) -> None:
    text = page_text(leaking)
    summary = json.loads((leaking / SUMMARY_FILE).read_text())
    assert summary["verdict"] == "leak"
    assert '<span class="badge"' in text and ">leak</span>" in text
    for reason in summary["reasons"]:
        assert reason in text
    for metric in ("rss_growth", "cyclic_garbage", "work_list_max"):
        assert metric in text
    assert "TreeNode.mamba_prev -> TreeNode.parent -> (back)" in text
    assert summary["command"] in text
    assert f'src="{RSS_PLOT}"' in text  # relative, so the folder can be moved or served


def test_a_flat_run_has_no_garbage_plot_and_says_why(flat: Path) -> None:
    assert not (flat / GARBAGE_PLOT).exists()
    text = page_text(flat)
    assert ">pass</span>" in text
    assert text.count("garbage windows found no cyclic garbage") == 2  # plot and cycles


def test_a_run_stopped_before_its_first_garbage_window_says_so_not_a_guess() -> None:
    """The flagship report said "found no cyclic garbage" beside cyclic_garbage 115 /kop:
    the early stop had come before any garbage window."""
    from reports.run.model import garbage_note
    from tests.analysis.synth import linear, run_data, times

    t = times(3.8, 10.0)
    run = run_data((t, linear(t, 1e8, 0.0)))
    assert run.garbage_windows == []
    summary = Summary("mamba-lru", ["mamba-lru-unlink"], "leak", [], {
        "cyclic_garbage": Metric(115.0, "/kop", (0.0, 290.0), note="2360 objects")},
        None, 3.8, 1000, "leak-harness run mamba-lru")
    note = garbage_note(run, summary)
    assert note.startswith("No garbage window ran: the run ended after 3.8s, before the first")
    assert note.endswith("cyclic_garbage 115 /kop (2360 objects).")
    assert "found no cyclic garbage" not in note


def test_a_stale_plot_is_removed_when_rewritten(flat: Path) -> None:
    (flat / GARBAGE_PLOT).write_bytes(PNG_MAGIC)
    report(flat)
    assert not (flat / GARBAGE_PLOT).exists()


def test_golden_v1_run_renders(tmp_path: Path) -> None:
    rundir = tmp_path / "golden"
    shutil.copytree(GOLDEN, rundir)
    report(rundir)
    text = page_text(rundir)
    assert ">pass</span>" in text and "leak-harness run tests.harness.fixtures" in text
    assert (rundir / RSS_PLOT).exists() and (rundir / GAUGES_PLOT).exists()
    model = model_of(rundir)
    assert model.summary.version == 1  # shown as it was judged: version 1 stored no line
    assert model.rss_fit is None and model.summary.metrics == load_summary(GOLDEN).metrics


def test_a_fresh_summary_stores_the_judged_line_and_the_plot_draws_it(leaking: Path) -> None:
    summary = load_summary(leaking)
    assert summary.version == SUMMARY_VERSION == 4
    fit = summary.fitted_line("rss")
    assert fit is not None and fit.unit == "B"
    assert fit.basis in ("all", "floor", "tail", "after_step")
    assert fit.analysed_from_s <= fit.start_s < fit.end_s
    judged = [m for name, m in summary.metrics.items() if name.startswith("rss_") and m.status]
    assert [(m.value, m.ci) for m in judged] == [(fit.per_h, fit.ci)]  # the verdict's
    assert summary.fitted_line("tree_nodes") is not None  # every series with a trend has one
    model = model_of(leaking)
    assert model.rss_fit is not None and model.rss_fit == FitLine.from_fitted(fit)


def test_a_v1_folder_renders_as_judged_and_reanalyse_brings_back_its_line(
    leaking: Path, tmp_path: Path
) -> None:
    rundir = as_v1(Path(shutil.copytree(leaking, tmp_path / "v1")))
    written = (rundir / SUMMARY_FILE).read_bytes()
    assert load_summary(rundir).version == 1 and load_summary(rundir).fitted_line("rss") is None
    report(rundir)
    model = model_of(rundir)
    assert model.summary.version == 1 and model.summary.verdict == "leak"
    assert model.rss_fit is None  # nothing recomputed behind the reader's back
    assert (rundir / RSS_PLOT).exists() and ">leak</span>" in page_text(rundir)
    assert (rundir / SUMMARY_FILE).read_bytes() == written
    assert main(["report", "--reanalyse", str(rundir)]) == 0  # judged again, when asked
    model = model_of(rundir)
    assert model.summary.version == SUMMARY_VERSION and model.summary.verdict == "leak"
    assert model.rss_fit is not None and model.rss_fit == model_of(leaking).rss_fit


def test_run_without_readable_samples_still_gets_a_page(tmp_path: Path) -> None:
    rundir = write_run(tmp_path / "crashed", verdict="crashed",
                       reasons=["the scenario raised: ImportError: no module named x."],
                       duration_s=120.0)
    (rundir / SAMPLES_FILE).write_text("")
    (rundir / TRACEBACK_FILE).write_text("Traceback ...")
    report(rundir)
    text = page_text(rundir)
    assert ">crashed</span>" in text and "ImportError: no module named x." in text
    assert "The samples could not be read" in text
    assert f'href="{TRACEBACK_FILE}"' in text
    assert not (rundir / RSS_PLOT).exists()


def test_html_escapes_what_comes_from_result_files(tmp_path: Path) -> None:
    rundir = write_run(tmp_path / "odd", "demo<script>", reasons=["a < b & c"], duration_s=120.0)
    report(rundir)
    raw = (rundir / REPORT_FILE).read_text()
    assert "<script>" not in raw and "a &lt; b &amp; c" in raw


def drawn_figure(monkeypatch: pytest.MonkeyPatch, module: object) -> list[object]:
    """Figures the plot function saves, drawn, so their artists have extents."""
    caught: list[object] = []

    def keep(figure: object, path: Path) -> Path:
        figure.canvas.draw()  # type: ignore[attr-defined]
        caught.append(figure)
        return path

    monkeypatch.setattr(module, "save", keep)
    return caught


def test_gauge_titles_with_growth_do_not_run_into_each_other(
    leaking: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import reports.run.gauge_plots as gauge_plots

    model = model_of(leaking)
    assert model.run is not None
    for name in ("alpha_nodes", "beta_nodes", "gamma_nodes"):  # three panels in a row
        model.run.gauges[name] = model.run.gauges["tree_nodes"]
        model.summary.metrics[f"{name}_growth"] = Metric(123456.0, "/h", (120000.0, 127000.0))
    caught = drawn_figure(monkeypatch, gauge_plots)
    gauge_plots.gauges_plot(model, tmp_path / "gauges.png")
    [figure] = caught
    renderer = figure._get_renderer()  # type: ignore[attr-defined]
    boxes = [a.title.get_window_extent(renderer) for a in figure.axes  # type: ignore[attr-defined]
             if a.get_visible() and a.get_title()]
    assert len(boxes) >= 4
    for i, one in enumerate(boxes):
        for other in boxes[i + 1:]:
            assert not one.overlaps(other), (one, other)


def test_the_no_gen2_note_is_not_hidden_by_a_legend(
    leaking: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import reports.run.plots as plots

    model = model_of(leaking)
    assert model.run is not None
    model.run.gc_events = [e for e in model.run.gc_events if e.get("gen") != 2]
    caught = drawn_figure(monkeypatch, plots)
    plots.gc_plot(model, tmp_path / "gc.png")
    [figure] = caught
    top = figure.axes[0]  # type: ignore[attr-defined]
    renderer = figure._get_renderer()  # type: ignore[attr-defined]
    [note] = [t for t in top.texts if "no gen-2 collection" in t.get_text()]
    legend = top.get_legend()
    if legend is not None:
        assert not legend.get_window_extent(renderer).overlaps(note.get_window_extent(renderer))


def test_the_page_shows_the_analysis_tables_and_limits_from_the_summary(
    leaking: Path, tmp_path: Path
) -> None:
    summary = load_summary(leaking)
    assert summary.level_limit("work_list") == 4.0  # parsed by the analysis, not the report
    rundir = Path(shutil.copytree(leaking, tmp_path / "edited"))
    data = json.loads((rundir / SUMMARY_FILE).read_text())
    data["analysis"]["garbage_by_type"] = [
        {"type": "OnlyInTheSummary", "objects": 7, "bytes": 70, "per_kop": 0.5}]
    data["analysis"]["cycles"] = [
        {"shape": ["Stored.edge"], "count": 3, "retained_bytes": 300, "types": ["Stored"]}]
    (rundir / SUMMARY_FILE).write_text(json.dumps(data))
    report(rundir)
    text = page_text(rundir)
    assert "OnlyInTheSummary" in text and "Stored.edge -> (back)" in text
    # The samples' cycles are not aggregated again for the table (the reasons still name them).
    assert "<code>TreeNode.mamba_prev" not in text


def test_a_v2_summary_draws_no_limit_it_lacks(leaking: Path, tmp_path: Path) -> None:
    rundir = Path(shutil.copytree(leaking, tmp_path / "v2"))
    data = json.loads((rundir / SUMMARY_FILE).read_text())
    analysis = {k: v for k, v in data.pop("analysis").items() if k != "limits"}
    data = {**data, "version": 2, "extra": {**data.pop("run"), "analysis": analysis}}
    (rundir / SUMMARY_FILE).write_text(json.dumps(data))
    model = model_of(rundir)
    assert model.summary.version == 2 and model.summary.level_limit("work_list") is None
    assert model.judged == []  # no parsed limits: the convicting plot has nothing to draw
    assert model.garbage_types == model_of(leaking).garbage_types
    report(rundir)
    assert ">leak</span>" in page_text(rundir)


def test_gauges_that_never_moved_share_one_line_instead_of_a_panel_each(
    leaking: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import reports.run.gauge_plots as gauge_plots

    model = model_of(leaking)
    assert model.run is not None
    flat = model.run.gauges["tree_nodes"]
    model.run.gauges["zz_never_moved"] = type(flat)(flat.t, flat.v * 0 + 3)
    caught = drawn_figure(monkeypatch, gauge_plots)
    gauge_plots.gauges_plot(model, tmp_path / "gauges.png")
    [figure] = caught
    titles = [a.get_title() for a in figure.axes if a.get_visible()]  # type: ignore[attr-defined]
    assert "zz_never_moved" not in titles and any(t.startswith("tree_nodes") for t in titles)
    assert "zz_never_moved=3" in figure._suptitle.get_text()  # type: ignore[attr-defined]


def test_a_leak_report_leads_with_what_convicted_it(leaking: Path) -> None:
    assert (leaking / JUDGED_PLOT).read_bytes()[:8] == PNG_MAGIC
    text = page_text(leaking)
    headline = text[:text.index("Why this verdict")]
    summary = load_summary(leaking)
    confirmed = [j.reason for j in model_of(leaking).judged if j.status == "leak"]
    assert confirmed and all(r in headline for r in confirmed)
    assert "Convicted by cyclic_garbage" in headline
    # RSS growth no allocator shows is suspicious: beside a confirmed leak it convicts nothing.
    rss = next(j for j in model_of(leaking).judged if j.series == "rss")
    assert rss.status == "suspicious" and "Convicted by rss" not in headline
    assert "started 2026-12-03 04:00:00 UTC" in headline and "host ci-runner-7" in headline
    assert "commit 000000000000" in headline
    # The convicting plot comes before every other plot; budgets that held are folded.
    assert text.index(f'src="{JUDGED_PLOT}"') < text.index(f'src="{RSS_PLOT}"')
    folded = text[text.index("<details><summary>"):]
    assert all(r in folded for r in summary.reasons if "is within" in r)
    assert not any(r in text[:text.index("<details>")] for r in summary.reasons
                   if "is within" in r)


def test_the_amount_is_the_fitted_growth_over_the_judged_window(leaking: Path) -> None:
    rss = next(j for j in model_of(leaking).judged if j.series == "rss")
    assert rss.fit is not None
    span = rss.fit.end_s - rss.fit.analysed_from_s
    grown_mb = rss.fit.per_h * span / 3600 / 1e6
    assert rss.amount() == f"+{grown_mb:.3g} MB in {format_duration(span)}"


def test_a_pass_says_every_budget_held_and_draws_no_convicting_plot(flat: Path) -> None:
    assert not (flat / JUDGED_PLOT).exists()
    text = page_text(flat)
    assert "Every budget held (3 judged)." in text and "Convicted by" not in text


def test_a_crash_shows_its_traceback_and_a_suite_cell_links_to_the_index(
    tmp_path: Path,
) -> None:
    rundir = tmp_path / "out" / "demo-cache" / "inject-demo-unlink"
    write_run(rundir, "demo-cache", ["demo-unlink"], duration_s=60.0, verdict="crashed",
              reasons=["the worker raised AssertionError: non-leaf"])
    (rundir / TRACEBACK_FILE).write_text(
        'Traceback (most recent call last):\n  File "cache.py", line 9, in evict\n'
        "AssertionError: non-leaf <x>\n", encoding="utf-8")
    report(rundir)
    text = page_text(rundir)
    assert 'File "cache.py", line 9, in evict' in text and "AssertionError: non-leaf <x>" in text
    assert text.index("AssertionError: non-leaf <x>") < text.index("Why this verdict")
    assert "the worker raised AssertionError: non-leaf" in text[:text.index("Crash")]
    assert 'href="../../index.html"' in text
    alone = tmp_path / "alone"
    write_run(alone, "demo-cache", duration_s=60.0)
    report(alone)
    assert "index.html" not in page_text(alone)


def test_a_command_with_bytes_that_are_not_utf8_still_gets_its_page(tmp_path: Path) -> None:
    rundir = tmp_path / "odd"
    write_run(rundir, "demo-cache", duration_s=60.0)
    summary = load_summary(rundir)
    # Python keeps an argument's undecodable bytes as surrogates: b"\xff" -> "\udcff".
    odd = "leak-harness record -- python app.py " + b"\xff\xfe".decode("utf-8", "surrogateescape")
    write_summary(rundir, dataclasses.replace(summary, command=odd))
    report(rundir)
    assert "python app.py \\udcff\\udcfe" in page_text(rundir)


def test_the_convicting_plot_draws_each_kind_of_signal_with_its_budget(tmp_path: Path) -> None:
    """A heap rate, a block count rate and a gauge level, each failing: one panel each."""
    from harness.analysis.calibration import Calibration
    from harness.analysis.summary import summarize
    from harness.budgets import parse_budget
    from harness.runfiles.rundata import Series
    from harness.runfiles.summary import Summary
    from reports.run.judged_plot import judged_plot, judged_series
    from reports.run.model import build_run_model
    from tests.analysis.synth import linear, run_data, times

    t = times(120.0, 5.0)
    run = run_data((t, linear(t, 0.0, 300e6)), gauges={"work_list": (t, 10.0 + 0.0 * t)},
                   warmup_end_s=2.0)
    run.memory["heap"] = Series(t, linear(t, 500e6, 90e6), "B")
    run.memory["py_blocks"] = Series(t, linear(t, 3e6, 6e5), "")
    texts = ("heap: 10 MB/h", "py_blocks: 250000 /h", "work_list: <= 4")
    analysis = summarize(run, [parse_budget(x) for x in texts], calibration=Calibration({}))
    summary = Summary("demo", [], analysis.verdict, analysis.reasons, dict(analysis.metrics),
                      analysis.time_to_detect_s, 120.0, 1000, "leak-harness run demo",
                      analysis=analysis.details)
    model = build_run_model(tmp_path, run, summary)
    failing = [j for j in model.judged if j.failing]
    assert [(j.series, j.kind) for j in failing] == [
        ("heap", "rate"), ("py_blocks", "rate"), ("work_list", "level")]
    assert all(judged_series(run, j.series) is not None for j in failing)
    assert failing[0].fit is not None and failing[2].fit is None  # a level has its limit
    assert judged_plot(model, tmp_path / JUDGED_PLOT) == tmp_path / JUDGED_PLOT
    assert (tmp_path / JUDGED_PLOT).read_bytes()[:8] == PNG_MAGIC
