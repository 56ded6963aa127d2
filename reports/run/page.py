"""The run report's HTML, laid out from a :class:`~reports.run.model.RunModel`.

Order follows the questions a reader has: what was the verdict and why, what
the numbers are against which budgets, what the memory did over time, what
the garbage is and which attributes tie it into cycles, and how to run it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.runfiles.names import SAMPLES_FILE, SUMMARY_FILE
from harness.runfiles.sources import sources_sentence, where_sources
from harness.units import format_bytes
from harness.verdicts import PROCESS_VERDICTS, detection_words
from reports.render.html import (
    badge,
    bullet_list,
    esc,
    html_list,
    image,
    link,
    page,
    paragraph,
    section,
    status,
    table,
)
from reports.render.judged import convicting, failing_first
from reports.render.numbers import format_seconds, sig
from reports.run.model import MetricRow, RunModel

# Metrics about the process as a whole, shown even without a budget.
MAIN_PREFIXES = ("rss_", "uss_", "cyclic_garbage", "gen2_collections", "gc_pause", "ops_per_s")

MAX_HEADLINE = 3  # failing budgets named in the headline; the reasons list them all
PLOT_CAPTIONS = {
    "rss": "Memory over time",
    "gc": "Garbage collector activity",
    "garbage": "Cyclic garbage by type",
    "gauges": "Gauges",
}
MISSING = {
    "rss": "No RSS samples were recorded (the rss sampler was off or unavailable).",
    "gc": "No garbage-collector lines were recorded (the gc sampler was off or unavailable).",
    "garbage": "",  # the model's garbage_note: why, from what the run did
    "gauges": "The scenario registered no gauges.",
}


def render_run_page(model: RunModel, plots: Mapping[str, Path | None]) -> str:
    """The whole page; ``plots`` maps plot names to written PNGs (None: not drawn)."""
    parts = [_header(model), _crash(model), _judged(plots), _reasons(model), _where(model),
             _metrics(model), _plots(model, plots), _garbage(model), _cycles(model),
             _reproduce(model), _about(model)]
    return page(f"{model.summary.verdict}: {model.title}", parts)


def _header(model: RunModel) -> str:
    """The verdict, what convicted the run and the first culprit, then where it ran."""
    summary = model.summary
    return (
        f"<h1>{badge(summary.verdict)} {esc(model.title)}</h1>\n"
        f"{html_list(_headline(model), 'headline')}\n"
        f'<p class="meta">{" · ".join(_facts(model))}<br>run folder: <code>'
        f"{esc(model.rundir)}</code></p>"
    )


def _headline(model: RunModel) -> list[str]:
    """Escaped lines: each failing budget with its amount, detection, the first culprit."""
    summary = model.summary
    failing = convicting(model.judged)
    # Only budgets that confirmed a leak convict; a suspicious one beside them (an RSS
    # growth its own reason says does not confirm a leak) is not named as convicting.
    failing = [j for j in failing if j.status == "leak"] or failing
    lines = [f"<strong>Convicted by {esc(j.series)}</strong>: {esc(j.reason)}"
             + (f" <strong>({esc(j.amount())})</strong>" if j.amount() else "")
             for j in failing[:MAX_HEADLINE]]
    if not failing:
        first, _ = failing_first(summary.reasons, model.judged)
        if summary.verdict == "pass":
            lines.append(f"Every budget held ({len(model.judged)} judged).")
        lines += [esc(reason) for reason in first]
    if summary.time_to_detect_s is not None:
        words = detection_words(summary.verdict)
        lines.append(f"{esc(words.capitalize())} after "
                     f"{esc(format_seconds(summary.time_to_detect_s))} of workload.")
    where = summary.where_it_grows()
    if where:
        lines.append(f"<strong>Where it grows</strong>: {esc(where[0])}")
    return lines


def _facts(model: RunModel) -> list[str]:
    """Escaped facts: length, work, date, host, commit, the suite's index."""
    summary = model.summary
    env = model.run.header.get("env", {}) if model.run is not None else {}
    facts = [esc(f"ran {format_seconds(summary.duration_s)}"), esc(f"{summary.ops:,} operations")]
    if summary.time_to_detect_s is None and summary.verdict in PROCESS_VERDICTS:
        facts.append(esc(f"{summary.verdict} after {format_seconds(summary.duration_s)}"))
    for key, label in (("started_utc", "started"), ("host", "host"), ("git_commit", "commit")):
        value = env.get(key)
        if value:
            shown = str(value)[:12] if key == "git_commit" else str(value)
            facts.append(esc(f"{label} {shown}"))
    if model.index_href is not None:
        facts.append(link(model.index_href, "suite index"))
    return facts


def _crash(model: RunModel) -> str:
    if not model.traceback.strip():
        return ""
    return section("Crash", paragraph("The traceback the worker wrote when the scenario "
                                      "raised:"), f"<pre>{esc(model.traceback.strip())}</pre>")


def _judged(plots: Mapping[str, Path | None]) -> str:
    written = plots.get("judged")
    if written is None:
        return ""
    return section("What convicted it", f"<p>{image(written.name, 'The failing budgets')}</p>")


def _reasons(model: RunModel) -> str:
    first, rest = failing_first(model.summary.reasons, model.judged)
    extra = [paragraph(f"The samples could not be read: {model.load_error}", "muted")] \
        if model.load_error else []
    if not first and not rest:
        first = ["No budget was broken and no shape needed a note."]
    folded = (f"<details><summary>{len(rest)} more: budgets that held, shapes and "
              f"resolution</summary>{bullet_list(rest, 'reasons')}</details>") if rest else ""
    return section("Why this verdict", bullet_list(first, "reasons") if first else "", folded,
                   *extra)


def _where(model: RunModel) -> str:
    """The culprits, as the run output and the pytest failure print them."""
    where = model.summary.where_it_grows()
    if not where:
        return ""
    # The sources that ran, and why each other one did not: a list that named the
    # allocation windows on a Python where they were off sent people after sites.
    notes = [paragraph(sources_sentence(where_sources(model.run)), "muted")] \
        if model.run is not None else []
    return section("Where it grows", bullet_list(where, "where"), *notes)


def _metrics(model: RunModel) -> str:
    if not model.metrics:
        return section("Metrics", paragraph("The summary holds no metrics.", "muted"))
    # Every gauge adds a few metrics; they would bury the judged ones, so they fold away.
    main = [m for m in model.metrics if m.status or m.name.startswith(MAIN_PREFIXES)]
    rest = [m for m in model.metrics if m not in main]
    parts = [_metric_table(main)]
    if rest:
        parts.append(f"<details><summary>{len(rest)} gauge metrics</summary>"
                     f"{_metric_table(rest)}</details>")
    return section("Metrics", *parts)


def _metric_table(metrics: list[MetricRow]) -> str:
    rows = [
        [esc(m.name), esc(m.value), esc(m.unit), esc(m.interval), esc(m.budget), status(m.status),
         esc(m.note)]
        for m in metrics
    ]
    classes = ["judged" if m.status else "" for m in metrics]
    headers = ["metric", "value", "unit", "95% interval", "budget", "status", "note"]
    return table(headers, rows, numeric=(1,), row_classes=classes)


def _plots(model: RunModel, plots: Mapping[str, Path | None]) -> str:
    parts = []
    for name, caption in PLOT_CAPTIONS.items():
        written = plots.get(name)
        if written is None:
            parts.append(paragraph(f"{caption}: {MISSING[name] or model.garbage_note}", "muted"))
        else:
            parts.append(f"<p>{image(written.name, caption)}</p>")
    return section("Plots", *parts)


def _garbage(model: RunModel) -> str:
    if not model.garbage_types:
        return ""
    rows = [
        [esc(row.type), f"{row.objects:,}", esc(format_bytes(row.bytes)), esc(sig(row.per_kop))]
        for row in model.garbage_types[:15]
    ]
    headers = ["type", "objects", "bytes", "per 1000 ops"]
    return section("Garbage by type (after warm-up, all windows)",
                   table(headers, rows, numeric=(1, 2, 3)))


def _cycles(model: RunModel) -> str:
    if not model.cycles:
        return section("Reference cycles", paragraph(model.garbage_note, "muted"),
                       *[paragraph(f"explainer error: {e}", "muted") for e in model.cycle_errors])
    rows = [
        [f"<code>{esc(c.path)}</code>", str(c.count), esc(format_bytes(c.retained_bytes)),
         esc(format_bytes(c.retained_bytes / max(c.count, 1))), esc(c.types)]
        for c in model.cycles
    ]
    headers = ["cycle (attribute on each edge)", "seen", "bytes retained", "per cycle",
               "found from"]
    intro = paragraph("The shortest cycle through sampled garbage objects, one per type per "
                      "window; each edge names the attribute that holds the next object.")
    return section("Reference cycles", intro, table(headers, rows, numeric=(1, 2, 3)))


def _reproduce(model: RunModel) -> str:
    command = model.summary.command or "(the summary has no command)"
    return section("Reproduce", f"<pre>{esc(command)}</pre>")


def _about(model: RunModel) -> str:
    files = [SAMPLES_FILE, SUMMARY_FILE, *model.files]
    links = " · ".join(link(name, name) for name in files)
    rows = [[esc(key), esc(value)] for key, value in model.environment]
    parts = [paragraph("Files in this run folder:") + f"<p>{links}</p>"]
    if rows:
        parts.append(table(["item", "value"], rows))
    return section("Run environment and files", *parts)
