"""The convicting plot shows what was fitted, titled with the code that ran (issue 42, 5)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.figure import Figure

from harness.runfiles.reader import open_run
from harness.runfiles.summary import RunFacts, Summary
from harness.worker.main import describe_target
from reports.render.figure import TimeScale
from reports.render.fitline import FitLine
from reports.run.model import build_run_model, run_title
from reports.run.plots import draw_fit
from tests.reports.synth import MB, write_run

# A heap leak judged on its last third: the window runs from the warm-up's end (2 s)
# to 60 s, the line was fitted on 40.7 s to 60 s.
TAIL = FitLine(start_s=40.7, end_s=60.0, mid_v=52e6, per_h=30e6, ci=(28e6, 32e6),
               basis="tail", analysed_from_s=2.0)


def test_a_tail_fit_is_drawn_over_the_span_it_was_fitted_on_not_from_the_warm_up() -> None:
    axes = Figure().subplots()
    ends = draw_fit(axes, TAIL, TimeScale.for_span(60.0), 1e6)
    [line] = [a for a in axes.get_lines() if a.get_label() == TAIL.label]
    xs = np.asarray(line.get_xdata(), dtype=float)
    assert xs.tolist() == pytest.approx([40.7, 60.0])  # seconds: a 60 s run's scale
    assert ends.tolist() == [40.7, 60.0]
    # At its left end the line is the fitted value there, not 1.6 MB lower at 2 s.
    ys = np.asarray(line.get_ydata(), dtype=float)
    assert ys[0] == pytest.approx((52e6 - 30e6 / 3600 * (50.35 - 40.7)) / 1e6)


def summary(injected: list[str], facts: RunFacts) -> Summary:
    return Summary("radix-steady", injected, "leak", [], {}, None, 60.0, 1000, "", run=facts)


@pytest.mark.parametrize(("injected", "facts", "title"), [
    ([], RunFacts(), "radix-steady · fixed"),  # the reference
    ([], RunFacts(target="sglang", target_code="SGLang 0.5.23 from /opt/sglang/site; "
                  "untested: sgl_kernel stood in"), "radix-steady on SGLang 0.5.23"),
    ([], RunFacts(target="mycache.factory:make"), "radix-steady on mycache.factory:make"),
    (["slot-leak"], RunFacts(target="mycache.factory:make"),
     "radix-steady · inject:slot-leak on mycache.factory:make"),
])
def test_a_run_on_a_target_is_titled_with_the_target_not_fixed(
    injected: list[str], facts: RunFacts, title: str,
) -> None:
    assert run_title(summary(injected, facts)) == title


def test_the_target_and_what_it_runs_are_kept_and_older_summaries_have_neither() -> None:
    facts = RunFacts(ending="finished", target="sglang", target_code="SGLang 0.5.23 from x")
    assert RunFacts.from_json(facts.to_json()) == facts
    old = {"rundir": "/r", "ending": "finished", "exit_code": 0, "budgets": None,
           "window_s": None}  # version 4 before targets were kept
    assert RunFacts.from_json(old).target is None


def described(**options: Any) -> object:
    return object()


described.describe = lambda: "SGLang 9.9 from nowhere"  # type: ignore[attr-defined]


def silent(**options: Any) -> object:
    return object()


def failing(**options: Any) -> object:
    return object()


def _raise() -> str:
    raise RuntimeError("no release")


failing.describe = _raise  # type: ignore[attr-defined]


def test_the_worker_records_what_a_target_says_it_runs_and_nothing_else() -> None:
    assert describe_target(f"{__name__}:described") == "SGLang 9.9 from nowhere"
    assert describe_target(f"{__name__}:silent") is None
    assert describe_target(f"{__name__}:failing") is None  # costs the run nothing
    assert describe_target(None) is None  # the reference


LONG_TARGET = "inference_server.caching.prefix_tree_cache_v2.factories:make_prefix_cache"


def test_a_long_target_title_stays_inside_the_convicting_plot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 60 s run on bench.zoo.slow_targets:finished_keys: centred over the panel (the
    legend beside it takes a third of the width), the title ran off the figure's left
    edge ("hat the verdict was judged on: ..."). A user's factory path is longer still."""
    import reports.run.judged_plot as judged_plot

    rundir = write_run(tmp_path / "run", "radix-steady", growth_per_h=400 * MB)
    loaded = open_run(rundir)
    facts = dataclasses.replace(loaded.summary.run, target=LONG_TARGET)
    model = build_run_model(rundir, loaded.samples, dataclasses.replace(loaded.summary, run=facts))
    caught: list[Figure] = []

    def keep(figure: Figure, path: Path) -> Path:
        figure.canvas.draw()
        caught.append(figure)
        return path

    monkeypatch.setattr(judged_plot, "save", keep)
    assert judged_plot.judged_plot(model, tmp_path / "judged.png") is not None
    [figure] = caught
    axes = figure.axes[0]
    [title] = [t for t in (axes.title, axes._left_title) if t.get_text()]  # type: ignore[attr-defined]
    assert title.get_text().endswith(f"radix-steady on {LONG_TARGET}")
    box = title.get_window_extent(figure._get_renderer())  # type: ignore[attr-defined]
    assert box.x0 >= 0 and box.x1 <= figure.bbox.width
