"""Plots a reader can read: legends beside the panel, never over the samples (the end of a
series, where a leak shows, is where a corner legend sat), and allocation windows that do
not look like the warm-up (both were the same grey)."""

from __future__ import annotations

from pathlib import Path

import pytest

import reports.run.judged_plot as judged_plot
import reports.run.plots as plots
from harness.runfiles.reader import open_run
from reports.render.figure import TimeScale, new_figure, shade_warmup, use_agg
from reports.run.model import build_run_model
from tests.reports.synth import MB, write_run


def drawn(monkeypatch: pytest.MonkeyPatch, module: object) -> list[object]:
    caught: list[object] = []

    def keep(figure: object, path: Path) -> Path:
        figure.draw_without_rendering()  # type: ignore[attr-defined]  # runs the layout
        caught.append(figure)
        return path

    monkeypatch.setattr(module, "save", keep)
    return caught


@pytest.mark.parametrize(("module", "plot"), [(judged_plot, "judged_plot"), (plots, "rss_plot")])
def test_every_legend_sits_beside_its_panel_not_over_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: object, plot: str,
) -> None:
    rundir = write_run(tmp_path / "leaking", "demo-cache", ["demo-unlink"],
                       growth_per_h=400 * MB, garbage_per_op=2.0)
    loaded = open_run(rundir)
    model = build_run_model(loaded.rundir, loaded.samples, loaded.summary,
                            loaded.why_no_samples)
    caught = drawn(monkeypatch, module)
    getattr(module, plot)(model, tmp_path / "plot.png")
    [figure] = caught
    panels = [a for a in figure.axes if a.get_visible()]  # type: ignore[attr-defined]
    assert panels
    renderer = figure._get_renderer()  # type: ignore[attr-defined]
    for axes in panels:
        legend = axes.get_legend()
        assert legend is not None
        box, frame = legend.get_window_extent(renderer), axes.get_window_extent(renderer)
        assert box.x0 >= frame.x1, (axes.get_ylabel(), box, frame)
        # ... and inside the figure: the constrained layout made room for it.
        assert box.x1 <= figure.bbox.x1 + 1  # type: ignore[attr-defined]


def test_allocation_windows_are_shaded_unlike_the_warm_up() -> None:
    use_agg()
    _, (axes,) = new_figure()
    scale = TimeScale.for_span(60.0)
    shade_warmup(axes, scale, 0.0, 5.0, None)
    judged_plot._shade_windows(axes, scale, [(20.0, 25.0)], 60.0)
    warmup, window = axes.patches
    assert warmup.get_label().startswith("warm-up")
    assert window.get_label().startswith("allocation window")
    assert window.get_facecolor()[:3] != warmup.get_facecolor()[:3]
    assert window.get_hatch() and not warmup.get_hatch()
