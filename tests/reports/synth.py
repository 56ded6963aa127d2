"""Synthetic run folders in the current result formats, for the report tests.

:func:`write_run` writes ``samples.jsonl`` line by line as the worker would,
then analyses it with the real ``summarize`` and writes ``summary.json`` as the
runner would, so reports see exactly what a real run leaves behind.
:func:`write_summary_only` is the cheap form for tests that read summaries only.
:func:`as_v1` turns a folder's summary into what a version 1 runner wrote.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis.summary import budget_limits, summarize
from harness.config import read_budgets
from harness.runfiles.names import SAMPLES_FILE, SUMMARY_FILE
from harness.runfiles.reader import load_samples
from harness.runfiles.summary import AnalysisDetails, RunFacts, Summary, write_summary
from harness.runfiles.summary_records import Metric

MB = 1e6
BUDGETS = ("rss: 50 MB/h", "cyclic_garbage: 0.5 /kop", "work_list: <= 4")
CYCLE = {"type": "TreeNode", "path": ["TreeNode.mamba_prev", "TreeNode.parent"], "length": 2,
         "retained_bytes": 5120, "retained_objects": 12}
GOLDEN = Path(__file__).resolve().parents[1] / "harness" / "golden" / "run-v1"


def write_run(
    rundir: Path,
    scenario: str = "demo-cache",
    injected: Sequence[str] = (),
    *,
    growth_per_h: float = 0.0,
    garbage_per_op: float = 0.0,
    duration_s: float = 600.0,
    hz: float = 2.0,
    seed: int = 0,
    verdict: str | None = None,
    reasons: Sequence[str] | None = None,
) -> Path:
    """A run of ``duration_s`` at ``hz`` whose RSS grows ``growth_per_h`` bytes per hour.

    ``garbage_per_op`` cyclic garbage objects per operation show in the gc lines
    and garbage windows (with an explained cycle). ``verdict`` and ``reasons``
    replace the analysis's (a crashed or hung run, say).
    """
    rundir.mkdir(parents=True, exist_ok=True)
    records = _records(scenario, injected, growth_per_h, garbage_per_op, duration_s, hz, seed)
    with (rundir / SAMPLES_FILE).open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
    analysis = summarize(load_samples(rundir / SAMPLES_FILE), read_budgets(BUDGETS, "budgets"),
                         60.0)
    summary = Summary(
        scenario=scenario, injected=list(injected), verdict=verdict or analysis.verdict,
        reasons=list(reasons if reasons is not None else analysis.reasons),
        metrics=dict(analysis.metrics), time_to_detect_s=analysis.time_to_detect_s,
        duration_s=duration_s, ops=int(duration_s * 1000), command=_command(scenario, injected),
        run=RunFacts(rundir=str(rundir), ending="finished", window_s=analysis.window_s),
        analysis=analysis.details,
    )
    write_summary(rundir, summary)
    return rundir


def as_v1(rundir: Path) -> Path:
    """Rewrite ``summary.json`` as version 1 had it: the same verdict and metrics, the
    run's facts under ``extra``, and no analysis details (so no fitted lines)."""
    path = rundir / SUMMARY_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    run, _ = data.pop("run"), data.pop("analysis")
    extra = {"rundir": run["rundir"], "ending": run["ending"], "analysis": "harness.analysis"}
    path.write_text(json.dumps({**data, "version": 1, "extra": extra}, indent=2) + "\n",
                    encoding="utf-8")
    return rundir


def write_summary_only(
    rundir: Path,
    scenario: str,
    injected: Sequence[str] = (),
    verdict: str = "pass",
    growth_per_h: float = 0.0,
    ci: tuple[float, float] | None = None,
    duration_s: float = 600.0,
) -> Path:
    """A run folder holding only ``summary.json`` with a judged RSS growth."""
    rundir.mkdir(parents=True, exist_ok=True)
    low, high = ci or (growth_per_h - 2 * MB, growth_per_h + 2 * MB)
    metrics = {
        "rss_growth": Metric(growth_per_h, "B/h", (low, high), "rss: 50 MB/h",
                             verdict if verdict != "crashed" else "pass"),
        "cyclic_garbage": Metric(0.0, "/kop", (0.0, 0.0)),
    }
    summary = Summary(scenario, list(injected), verdict, [f"{scenario}: {verdict}."], metrics,
                      None, duration_s, 1000, _command(scenario, injected),
                      RunFacts(rundir=str(rundir)),
                      AnalysisDetails(limits=budget_limits(read_budgets(BUDGETS[:1], "budgets"))))
    write_summary(rundir, summary)
    return rundir


def _command(scenario: str, injected: Sequence[str]) -> str:
    inject = "".join(f" --inject {name}" for name in injected)
    return f"leak-harness run {scenario} --duration 10m --seed 0{inject} --budget 'rss: 50 MB/h'"


def _records(
    scenario: str, injected: Sequence[str], growth_per_h: float, garbage_per_op: float,
    duration_s: float, hz: float, seed: int,
) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    t = np.arange(int(duration_s * hz)) / hz
    rss = 300 * MB + growth_per_h / 3600.0 * t + rng.normal(0.0, 0.2 * MB, t.size)
    records: list[dict[str, Any]] = [_header(scenario, injected, duration_s, seed),
                                     _event(0.0, "start")]
    for index, (at, value) in enumerate(zip(t, rss, strict=True)):
        uss = float(value - 40 * MB) if index % 10 == 0 else None
        records.append({"type": "rss", "t": float(at), "rss": float(value), "uss": uss,
                        "ops": int(at * 1000)})
    records.append(_event(60.0, "warmup_end"))
    records += _gauges(duration_s, growth_per_h)
    records += _gc_lines(duration_s, garbage_per_op)
    records += _garbage_windows(duration_s, garbage_per_op)
    records.append({**_event(duration_s, "malloc_trim"), "rss_before": 1, "rss_after": 1})
    records.append({**_event(duration_s, "end"), "ops": int(duration_s * 1000)})
    header, *lines = records
    return [header, *sorted(lines, key=lambda r: float(r["t"]))]  # the worker writes in time order


def _header(scenario: str, injected: Sequence[str], duration_s: float, seed: int) -> dict[str, Any]:
    config = {"scenario": scenario, "duration_s": duration_s, "warmup_s": 60.0,
              "inject": list(injected), "seed": seed, "budgets": list(BUDGETS),
              "samplers": ["rss", "gc", "garbage", "gauges"]}
    env = {"python": "3.11.7", "implementation": "cpython", "git_commit": "0" * 40,
           "host": "ci-runner-7", "started_utc": "2026-12-03 04:00:00 UTC",
           "gc": {"mode": "default", "thresholds": [700, 10, 10]}}
    return {"type": "header", "schema": "leak-harness/samples", "version": 1, "config": config,
            "env": env}


def _event(t: float, name: str) -> dict[str, Any]:
    return {"type": "event", "t": t, "name": name}


def _gauges(duration_s: float, growth_per_h: float) -> list[dict[str, Any]]:
    nodes_per_s = 1.0 if growth_per_h > 0 else 0.0
    return [
        {"type": "gauges", "t": float(s), "ops": s * 1000,
         "values": {"tree_nodes": 500.0 + nodes_per_s * s, "work_list": float(s % 3)}}
        for s in range(0, int(duration_s), 5)
    ]


def _gc_lines(duration_s: float, garbage_per_op: float) -> list[dict[str, Any]]:
    lines = []
    for second in range(1, int(duration_s) + 1, 5):
        lines.append({"type": "gc", "t": float(second), "gen": 0, "count": 50,
                      "collected": garbage_per_op * 1000, "uncollectable": 0, "pause_s": 0.001,
                      "ops": second * 1000})
        if second % 60 == 1:
            freed = garbage_per_op * 60_000
            lines.append({"type": "gc", "t": float(second), "gen": 2, "count": 1,
                          "collected": freed, "uncollectable": 0, "pause_s": 0.02,
                          "ops": second * 1000})
    return lines


def _garbage_windows(duration_s: float, garbage_per_op: float) -> list[dict[str, Any]]:
    windows = []
    for at in range(120, int(duration_s) + 1, 120):
        count = int(garbage_per_op * 2_000)
        by_type = {"TreeNode": count // 2, "dict": count - count // 2} if count else {}
        windows.append({
            "type": "garbage", "t": float(at), "ops": at * 1000, "collected": count,
            "freed": count, "final": at == int(duration_s), "count": count, "by_type": by_type,
            "bytes_by_type": {k: v * 100 for k, v in by_type.items()},
            "bytes": count * 100, "cycles": [CYCLE] if count else [],
        })
    return windows
