"""One run's report content, from its result files: pure, no I/O, no analysis.

:func:`build_run_model` turns the loaded samples and summary into rows and
lines ready to render (metric table, garbage and cycle tables, fitted RSS
line); the HTML and the plots only lay them out. Everything the analysis
concluded comes from ``summary.json`` (what an older version lacks shows as
missing), so the page cannot disagree with it; the samples add the curves.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.runfiles.facts import column
from harness.runfiles.names import (
    CONFIG_FILE,
    STACKS_FILE,
    SUITE_INDEX,
    TRACEBACK_FILE,
    WORKER_LOG,
)
from harness.runfiles.rundata import RunData
from harness.runfiles.summary import Summary
from harness.runfiles.summary_records import Metric
from harness.units import format_duration
from reports.render.fitline import FitLine, stored_fit
from reports.render.judged import JudgedBudget, judged_budgets
from reports.render.numbers import sig, value_cells

ENV_KEYS = ("started_utc", "host", "python", "implementation", "platform", "torch", "cpu_count",
            "git_commit")
# Files a run folder may hold besides the two result files, worth a link.
SIDE_FILES = (TRACEBACK_FILE, STACKS_FILE, WORKER_LOG, CONFIG_FILE)


@dataclass(frozen=True)
class MetricRow:
    name: str
    value: str
    unit: str
    interval: str
    budget: str
    status: str
    note: str


@dataclass(frozen=True)
class GarbageRow:
    type: str
    objects: int
    bytes: int
    per_kop: float | None  # None when the windows saw no work


@dataclass(frozen=True)
class CycleRow:
    path: str  # "TreeNode.mamba_prev -> TreeNode.parent -> (back)"
    count: int  # how many explained cycles had this shape
    retained_bytes: int  # summed over them
    types: str  # garbage types the search started from


@dataclass
class RunModel:
    rundir: Path
    summary: Summary
    run: RunData | None
    load_error: str | None = None
    warmup_s: float | None = None
    rss_fit: FitLine | None = None
    metrics: list[MetricRow] = field(default_factory=list)
    cycles: list[CycleRow] = field(default_factory=list)
    cycle_errors: list[str] = field(default_factory=list)
    garbage_types: list[GarbageRow] = field(default_factory=list)
    environment: list[tuple[str, str]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    judged: list[JudgedBudget] = field(default_factory=list)
    traceback: str = ""  # the crash's, as the worker wrote it
    # Why the garbage and cycle tables are empty, from what the run did: said, not guessed.
    garbage_note: str = "No samples could be read, so no garbage window can be shown."
    index_href: str | None = None  # the suite's index, for a run that is a suite's cell

    @property
    def title(self) -> str:
        return run_title(self.summary)


def run_title(summary: Summary) -> str:
    """``<scenario> · <column>`` on the reference; on a ``--target``, the scenario on that
    target ("radix-steady on SGLang 0.5.23", "radix-steady on mycache:make"), where
    ``fixed`` would say the reference's fixed code ran (an injection is still named)."""
    label = target_label(summary)
    if label is None:
        return f"{summary.scenario} · {column(summary)}"
    injected = f" · {column(summary)}" if summary.injected else ""
    return f"{summary.scenario}{injected} on {label}"


def target_label(summary: Summary) -> str | None:
    """What ran instead of the reference: what the target says it runs, up to where it
    comes from ("SGLang 0.5.23 from /opt/site" -> "SGLang 0.5.23"), else ``--target``
    as given; None on the reference (or a summary written before targets were kept)."""
    facts = summary.run
    if facts.target is None:
        return None
    if facts.target_code:
        return facts.target_code.split(" from ", 1)[0].split(";", 1)[0].strip()
    return facts.target


def build_run_model(
    rundir: Path, run: RunData | None, summary: Summary, load_error: str | None = None
) -> RunModel:
    """Everything the run report shows; ``run`` is None when the samples could not be read."""
    model = RunModel(rundir, summary, run, load_error, metrics=metric_rows(summary.metrics))
    model.files = [name for name in SIDE_FILES if (rundir / name).exists()]
    model.judged = judged_budgets(summary)
    model.traceback = read_traceback(rundir)
    model.index_href = suite_index(rundir, summary)
    if run is None:
        return model
    model.warmup_s = warmup_of(run)
    model.rss_fit = stored_fit(summary, "rss")
    model.cycles = cycle_rows(summary)
    model.cycle_errors = sorted({str(w["cycles_error"]) for w in run.garbage_windows
                                 if w.get("cycles_error")})
    model.garbage_types = garbage_rows(summary)
    model.garbage_note = garbage_note(run, summary)
    model.environment = environment_rows(run.header, not_started(run))
    return model


def not_started(run: RunData) -> set[str]:
    """The samplers the run asked for that said they could not run here, or failed."""
    return {str(e.get("sampler")) for e in run.events
            if e.get("name") in ("sampler_unavailable", "sampler_failed")}


def garbage_note(run: RunData, summary: Summary) -> str:
    """Why no cycle or garbage type is shown: no window ran before the run ended (an
    early stop, a short run), the windows found nothing, or they found garbage the
    explainer did not explain. The collector's own count is quoted where it has one."""
    windows = run.garbage_windows
    found = sum(int(w.get("count", 0) or 0) for w in windows)
    metric = summary.metrics.get("cyclic_garbage")
    counted = (f"; the collector's own count of what it freed is cyclic_garbage "
               f"{sig(metric.value)} /kop ({metric.note})" if metric is not None
               and metric.note else "")
    if not windows:
        return (f"No garbage window ran: the run ended after {format_duration(summary.duration_s)}"
                f", before the first one, so no garbage was sampled by type and no cycle "
                f"explained{counted}.")
    if not found:
        return f"The {len(windows)} garbage windows found no cyclic garbage{counted}."
    return (f"The {len(windows)} garbage windows found {found:,} objects of cyclic garbage, "
            "but no cycle through them was explained (the explainer was off or failed: "
            "its errors are below).")


def read_traceback(rundir: Path) -> str:
    """The crash traceback the worker wrote, or "" (no crash, or unreadable)."""
    try:
        return (rundir / TRACEBACK_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def suite_index(rundir: Path, summary: Summary) -> str | None:
    """``../../index.html`` when the run folder is a suite's cell (``<out>/<scenario>/<column>``,
    where the suite writes its index when every cell is done), else None."""
    return f"../../{SUITE_INDEX}" if rundir.resolve().parent.name == summary.scenario else None


def warmup_of(run: RunData) -> float | None:
    """End of the declared warm-up: the worker's event, else the configured length."""
    if run.warmup_end_s is not None:
        return run.warmup_end_s
    configured = run.header.get("config", {}).get("warmup_s")
    return float(configured) if isinstance(configured, int | float) else None


def metric_rows(metrics: Mapping[str, Metric]) -> list[MetricRow]:
    """Table rows, budgeted metrics first (in summary order), then the rest by name."""
    judged = [name for name, m in metrics.items() if m.status]
    others = sorted(name for name in metrics if name not in judged)
    return [_metric_row(name, metrics[name]) for name in [*judged, *others]]


def _metric_row(name: str, metric: Metric) -> MetricRow:
    shown, unit, interval = value_cells(metric.value, metric.ci, metric.unit)
    return MetricRow(name=name, value=shown, unit=unit, interval=interval,
                     budget=metric.budget or "", status=metric.status or "",
                     note=metric.note or "")


def cycle_rows(summary: Summary) -> list[CycleRow]:
    """The most common explained cycle shapes over all garbage windows, as the analysis
    aggregated them."""
    return [CycleRow(c.path, c.count, c.retained_bytes, ", ".join(c.types))
            for c in summary.cycles()]


def garbage_rows(summary: Summary) -> list[GarbageRow]:
    """Garbage by type after the warm-up, as the analysis summed it."""
    return [GarbageRow(row.type, row.objects, row.bytes, row.per_kop)
            for row in summary.garbage_by_type()]


def environment_rows(header: Mapping[str, Any], off: Collection[str] = ()
                     ) -> list[tuple[str, str]]:
    """The environment and config rows; a sampler in ``off`` is marked as not run (the
    "Where it grows" note says why)."""
    env, config = header.get("env", {}), header.get("config", {})
    rows = [(key, str(env[key])) for key in ENV_KEYS if env.get(key) is not None]
    gc_info = env.get("gc") or {}
    if gc_info:
        rows.append(("gc", f"mode {gc_info.get('mode')}, thresholds {gc_info.get('thresholds')}"))
    if config.get("samplers"):
        rows.append(("samplers", ", ".join(f"{name} (did not run)" if name in off else
                                           str(name) for name in config["samplers"])))
    if config.get("budgets"):
        rows.append(("budgets", "; ".join(map(str, config["budgets"]))))
    return rows
