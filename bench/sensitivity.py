"""Sensitivity: which kinds of leak the harness catches, how fast, and how small a rate.

Every target of the leak zoo (``bench/zoo``) runs on ``radix-steady`` through
the harness's own path (``scenario_config`` with ``target=``, then
``runner.run``: a real worker, the default samplers, the scenario's budgets)
for 20 s and 60 s. Paced leaks whose rate is in bytes run at the rate the
target names for that duration (200 MB/h at 20 s, 50 MB/h at 60 s); the lock
leak runs at its default rate in tokens per hour; non-leaks at their
defaults. The idle-only leak runs on ``radix-idle`` when that scenario
exists, else on ``radix-steady`` with the zoo's load options (idle gaps).

Per run: the true rate (least-squares slope of the ``zoo_ledger_bytes``
gauge over the analysis window), the verdict, ``time_to_detect_s``, and the metric that
judged it with its estimate and 95% interval, and what every memory signal
(RSS, USS, heap, Python blocks: whatever the summary has) read. Then a
resolution table per signal from the fixed cache's runs: the field
``resolution_per_h`` of ``summary.metrics["<signal>_growth"]``, or the metric
``<signal>_resolution`` the analysis publishes today ("n/a" where neither
is), beside the interval half-width each signal really had.

Targets: every leak kind at >= 200 MB/h caught (``leak``) at 20 s and at
>= 50 MB/h at 60 s; no ``leak`` on a non-leak.

    python bench/sensitivity.py [--seeds 1] [--jobs 2] [-k dict,fixed] [--durations 20,60]
                                [--out DIR]
    BENCH_FULL=1 python bench/sensitivity.py   # 3 seeds, and a 10 min fixed run
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.record import Record, importable_here, metrics_json
from bench.zoo.base import LEDGER_GAUGE
from bench.zoo.targets import ZOO, ZooTarget
from harness.configure import scenario_config
from harness.parent.runner import RunOutcome, run
from harness.registry import load_scenario, scenario_names
from harness.runfiles.names import SAMPLES_FILE
from harness.runfiles.reader import load_samples

SCENARIO = "radix-steady"
IDLE_SCENARIO = "radix-idle"
DURATIONS = (20.0, 60.0)
RESOLUTION_LONG_S = 600.0  # BENCH_FULL only
RATE_AT = {20.0: 200e6, 60.0: 50e6}  # bytes per hour a leak must be caught at, by duration
FULL_SEEDS = 3


@dataclass(frozen=True)
class Job:
    target: ZooTarget
    duration_s: float
    seed: int
    asked: float | None = None  # bytes per hour for the byte leaks (--rate), else RATE_AT's

    @property
    def rate(self) -> float:
        """The rate this run asks of its target (bytes kinds: the duration's target rate)."""
        if self.target.leaks and self.target.unit == "B":
            return self.asked or RATE_AT.get(self.duration_s, self.target.default_rate)
        return self.target.default_rate

    @property
    def label(self) -> str:
        return f"{self.target.name} {self.duration_s:g}s seed {self.seed}"

    def scenario(self) -> tuple[str, dict[str, Any]]:
        """The scenario to run on and the run options it needs."""
        cache = {"rate": self.rate} if self.target.leaks or self.target.default_rate else {}
        if not self.target.load:
            return SCENARIO, {"cache": cache}
        if IDLE_SCENARIO in scenario_names():
            return IDLE_SCENARIO, {"cache": cache}
        return SCENARIO, {"cache": cache, "load": dict(self.target.load)}


def run_job(job: Job, out: Path) -> dict[str, Any]:
    try:
        return run_once(job, out)
    except Exception as exc:  # one broken run must not lose the others' figures
        print(f"  {job.label}: could not run: {exc}", flush=True)
        return {**job_fields(job, "-"), "true_rate": None, "verdict": "error",
                "detect_s": None, "judged_by": "-", "estimate": None, "ci": None,
                "estimate_unit": "", "reason": str(exc), "metrics": {}, "wall_s": None,
                "where": [], "culprit": "-"}


def run_once(job: Job, out: Path) -> dict[str, Any]:
    name, options = job.scenario()
    rundir = out / f"{job.target.name}-{job.duration_s:g}s-seed{job.seed}"
    config = scenario_config(load_scenario(name), rundir, duration_s=job.duration_s,
                             seed=job.seed, target=job.target.spec)
    began = time.monotonic()
    outcome = run(dataclasses.replace(config, options=options))
    row = describe(job, name, outcome)
    row["wall_s"] = round(time.monotonic() - began, 1)
    print(f"  {job.label}: {row['verdict']}, true {rate_text(row['true_rate'], job.target.unit)}, "
          f"detected {seconds(row['detect_s'])}, wall {row['wall_s']:.0f} s, "
          f"culprit {row['culprit']}", flush=True)
    for line in row["where"]:
        print(f"      where: {line}", flush=True)
    return row


def describe(job: Job, scenario: str, outcome: RunOutcome) -> dict[str, Any]:
    summary = outcome.summary
    metrics = metrics_json(summary)
    judged, metric = judging_metric(metrics, outcome.verdict)
    return {
        **job_fields(job, scenario),
        "true_rate": true_rate(outcome.rundir, summary.run.window_s),
        "verdict": outcome.verdict, "detect_s": summary.time_to_detect_s,
        "judged_by": judged, "estimate": metric.get("value"), "ci": metric.get("ci"),
        "estimate_unit": metric.get("unit", ""),
        "reason": summary.reasons[0] if summary.reasons else "",
        "metrics": metrics,
        "where": summary.where_it_grows(),
        "culprit": culprit_named(job.target, summary.where_it_grows()),
        "first": first_line_culprit(job.target, summary.where_it_grows()),
        "innocent": len(innocent_lines(job.target, summary.where_it_grows())),
    }


# Kinds whose leak is Python objects: a native claim on them is a false lead. (The
# idle-only leak keeps tensor copies: their data is native memory.)
PYTHON_KINDS = ("dict/list retention", "many small objects", "cycles of evicted nodes")
SITE_OR_OWNER = ("keeps what it allocates", "is held by")


def first_line_culprit(target: ZooTarget, where: list[str]) -> str:
    """Whether the first line of "Where it grows" names the culprit ("yes"/"no"/"-")."""
    if not target.leaks:
        return "-"
    return "yes" if where and any(word in where[0] for word in target.culprit) else "no"


def innocent_lines(target: ZooTarget, where: list[str]) -> list[str]:
    """Lines that send the reader to the wrong place: a site or an owner path that does
    not name the culprit (on a non-leak, any site or owner), or a native claim on a leak
    of Python objects."""
    wrong = []
    for line in where:
        names_culprit = any(word in line for word in target.culprit)
        wrong_lead = any(words in line for words in SITE_OR_OWNER) and not names_culprit
        false_native = line.startswith("native memory grows") and target.kind in PYTHON_KINDS
        if wrong_lead or false_native:
            wrong.append(line)
    return wrong


def culprit_named(target: ZooTarget, where: list[str]) -> str:
    """Whether "Where it grows" names this target's culprit ("yes"/"no"), or for a
    non-leak whether it names nothing ("nothing"/"blamed")."""
    text = " ".join(where)
    if not target.leaks:
        named = [w for w in where if not w.startswith(("nothing grows", "nothing is blamed"))]
        return "blamed" if named else "nothing"
    return "yes" if any(word in text for word in target.culprit) else "no"


def job_fields(job: Job, scenario: str) -> dict[str, Any]:
    t = job.target
    return {"target": t.name, "kind": t.kind, "site": t.site, "leaks": t.leaks, "unit": t.unit,
            "scenario": scenario, "duration_s": job.duration_s, "seed": job.seed,
            "rate": job.rate}


def judging_metric(metrics: dict[str, dict[str, Any]], verdict: str) -> tuple[str, dict[str, Any]]:
    """The metric that gave the verdict; for a pass, the RSS rate judged against its budget."""
    for name, metric in metrics.items():
        if metric.get("status") == verdict and verdict != "pass":
            return name, metric
    for name, metric in metrics.items():
        if str(metric.get("budget", "")).startswith("rss:") and metric.get("unit") == "B/h":
            return name, metric
    return "rss_growth", metrics.get("rss_growth", {})


def true_rate(rundir: Path, window: Sequence[float] | None) -> float | None:
    """Least-squares slope of the ledger gauge over the analysis window, per hour.

    A fitted line, not the two ends: a non-leak's ledger rises and falls (the
    sawtooth's by 16 MB every 4 s), and its ends would depend on the phase."""
    try:
        gauge = load_samples(rundir / SAMPLES_FILE).gauges[LEDGER_GAUGE]
    except (OSError, KeyError, ValueError):
        return None
    start, end = window if window else (-np.inf, np.inf)
    inside = (gauge.t >= start) & (gauge.t <= end)
    t, v = gauge.t[inside], gauge.v[inside]
    if t.size < 3 or np.ptp(t) <= 0:
        return None
    return float(np.polyfit(t, v, 1)[0] * 3600.0)


# ---------------------------------------------------------------------- formatting
def rate_text(value: float | None, unit: str) -> str:
    """A rate in ``unit`` per hour (``unit`` given with or without its ``/h``)."""
    if value is None:
        return "-"
    base = unit.removesuffix("/h")
    if base == "B":
        return f"{value / 1e6:+,.1f} MB/h"
    return f"{value:+,.0f} {base}/h" if base else f"{value:+,.0f} /h"


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def estimate_text(row: dict[str, Any]) -> str:
    value, ci, unit = row["estimate"], row["ci"], row["estimate_unit"]
    if value is None:
        return "-"
    if not unit.endswith("/h"):
        return f"{value:,.4g} {unit}".strip()
    shown = rate_text(value, unit)
    if ci:
        shown += f" [{rate_text(ci[0], unit)}, {rate_text(ci[1], unit)}]"
    return shown


def kind_table(rec: Record, rows: list[dict[str, Any]], duration: float) -> None:
    here = [r for r in rows if r["duration_s"] == duration]
    rec.say(f"{duration:g} s runs:")
    rec.table(["kind", "target", "leak?", "seed", "asked", "true rate", "verdict", "detected at",
               "judged by", "estimate [95% CI]", "culprit named", "first line", "innocent"],
              [[r["kind"], r["target"], "yes" if r["leaks"] else "no", r["seed"],
                rate_text(r["rate"], r["unit"]), rate_text(r["true_rate"], r["unit"]),
                r["verdict"], seconds(r["detect_s"]), r["judged_by"], estimate_text(r),
                r.get("culprit", "-"), r.get("first", "-"), r.get("innocent", "-")]
               for r in here])


# ---------------------------------------------------------------------- signals
GROWTH, RESOLUTION = "_growth", "_resolution"


def signals(metrics: dict[str, dict[str, Any]]) -> list[str]:
    """Memory signals the summary has: byte rates, and any rate with a resolution."""
    found: list[str] = []
    for name, m in metrics.items():
        if name.endswith(RESOLUTION):
            base = name.removesuffix(RESOLUTION)
        elif name.endswith(GROWTH) and (m.get("unit") == "B/h" or "resolution_per_h" in m):
            base = name.removesuffix(GROWTH)
        else:
            continue
        if base not in found:
            found.append(base)
    return found


def resolution(metrics: dict[str, dict[str, Any]], signal: str) -> tuple[float, str] | None:
    """The smallest growth of ``signal`` this run could confirm, and its unit.

    The field ``resolution_per_h`` of the signal's growth metric where the
    summary has one; else the metric ``<signal>_resolution`` (how the analysis
    publishes it today)."""
    growth = metrics.get(signal + GROWTH, {})
    if growth.get("resolution_per_h") is not None:
        return float(growth["resolution_per_h"]), str(growth.get("unit", ""))
    own = metrics.get(signal + RESOLUTION)
    if own is not None and own.get("value") is not None:
        return float(own["value"]), str(own.get("unit", ""))
    return None


def resolution_cell(metrics: dict[str, dict[str, Any]], signal: str) -> str:
    found = resolution(metrics, signal)
    shown = "n/a" if found is None else rate_text(found[0], found[1]).lstrip("+")
    growth = metrics.get(signal + GROWTH, {})
    ci = growth.get("ci")
    if ci:
        half = (ci[1] - ci[0]) / 2
        shown += f" (±{rate_text(half, str(growth.get('unit', ''))).lstrip('+')})"
    return shown


def resolution_table(rec: Record, fixed_rows: list[dict[str, Any]]) -> None:
    durations = sorted({r["duration_s"] for r in fixed_rows})
    first = {d: next(r for r in fixed_rows if r["duration_s"] == d) for d in durations}
    names: list[str] = []
    for d in durations:
        names += [n for n in signals(first[d]["metrics"]) if n not in names]
    rec.say("Resolution per signal, fixed cache (first seed): the smallest growth the run could "
            "confirm (n/a: the summary gives none), with the 95% interval's half-width in "
            "brackets.")
    rec.table(["signal", *(f"{d:g} s" for d in durations)],
              [[name, *(resolution_cell(first[d]["metrics"], name) for d in durations)]
               for name in names])


def signal_table(rec: Record, rows: list[dict[str, Any]], duration: float) -> None:
    """What each memory signal read, per target: which signal sees which kind.

    Signals with a resolution only (rss, uss, heap, py_blocks today): the
    other fits of a signal (``rss_tail``, ``rss_after_step``...) show in the
    kind table when one judged a run. Without any resolution, every byte rate."""
    here = [r for r in rows if r["duration_s"] == duration]
    names: list[str] = []
    for r in here:
        names += [n for n in signals(r["metrics"]) if n not in names]
    resolved = [n for n in names if any(resolution(r["metrics"], n) for r in here)]
    names = resolved or names
    rec.say(f"{duration:g} s runs, growth each signal read (first seed):")
    rec.table(["target", "true rate", *names],
              [[r["target"], rate_text(r["true_rate"], r["unit"]),
                *(growth_cell(r["metrics"], n) for n in names)]
               for r in here if r["seed"] == here[0]["seed"]])


def growth_cell(metrics: dict[str, dict[str, Any]], signal: str) -> str:
    growth = metrics.get(signal + GROWTH)
    if not growth or growth.get("value") is None:
        return "-"
    return rate_text(float(growth["value"]), str(growth.get("unit", "")))


# ---------------------------------------------------------------------- targets
def report_targets(rec: Record, rows: list[dict[str, Any]]) -> None:
    for duration in sorted({r["duration_s"] for r in rows if r["leaks"]}):
        leaks = [r for r in rows if r["leaks"] and r["duration_s"] == duration]
        asked = {r["rate"] for r in leaks if r["unit"] == "B"}
        if duration not in RATE_AT and not asked:
            continue
        rate = min(asked, default=RATE_AT.get(duration, 0.0))
        missed = sorted({r["target"] for r in leaks if r["verdict"] != "leak"})
        kinds = len({r["target"] for r in leaks})
        rec.target(f"every leak kind at >= {rate / 1e6:g} MB/h caught (leak) at {duration:g} s",
                   bool(leaks) and not missed,
                   f"{kinds - len(missed)}/{kinds} kinds caught",
                   why=f"not caught: {', '.join(missed)}")
    fixed = [r for r in rows if not r["leaks"]]
    if not fixed:  # no non-leak ran: nothing to claim either way
        culprit_targets(rec, rows)
        return
    false = [r for r in fixed if r["verdict"] == "leak"]
    where = sorted({f"{r['target']} {r['duration_s']:g}s" for r in false})
    rec.target("no false leak on the non-leaks", not false,
               f"{len(false)} of {len(fixed)} non-leak runs said leak",
               why=f"leak on {', '.join(where)}")
    culprit_targets(rec, rows)


def culprit_targets(rec: Record, rows: list[dict[str, Any]]) -> None:
    """Issue 13's: each leak kind's culprit named in 9 of 10 seeds; non-leaks blame nothing.
    Issue 32's: the culprit on the first line as often, and no innocent line anywhere."""
    worst_kind(rec, rows, "culprit", "every leak kind's culprit named in >= 9 of 10 runs",
               "named")
    worst_kind(rec, rows, "first",
               "every leak kind's culprit on the first line in >= 9 of 10 runs", "first")
    counted = [r for r in rows if "innocent" in r]
    if counted:
        total = sum(int(r["innocent"]) for r in counted)
        where = sorted({r["target"] for r in counted if r["innocent"]})
        rec.target("no innocent line in leaking or non-leak runs", total == 0,
                   f"{total} innocent lines in {len(counted)} runs",
                   why=f"innocent lines on {', '.join(where)}")
    calm = [r for r in rows if not r["leaks"]]
    if calm:
        blamed = sorted({r["target"] for r in calm if r["culprit"] == "blamed"})
        count = sum(r["culprit"] == "blamed" for r in calm)
        rec.target("non-leaks name nothing as growing", not blamed,
                   f"{count} of {len(calm)} non-leak runs blamed something",
                   why=f"blamed on {', '.join(blamed)}")


def worst_kind(rec: Record, rows: list[dict[str, Any]], field: str, target: str,
               verb: str) -> None:
    """The leak kind whose runs said ``yes`` in ``field`` least often, against 90%."""
    said: dict[str, list[bool]] = {}
    for r in rows:
        if r["leaks"] and field in r:
            said.setdefault(r["target"], []).append(r[field] == "yes")
    if not said:
        return
    worst = min(said, key=lambda t: sum(said[t]) / len(said[t]))
    share = sum(said[worst]) / len(said[worst])
    rec.target(target, share >= 0.9, f"worst {worst}: {sum(said[worst])} of {len(said[worst])}",
               why=f"{worst} {verb} in {share:.0%} of its runs")


def detect_summary(rec: Record, rows: list[dict[str, Any]]) -> None:
    caught = [r["detect_s"] for r in rows if r["leaks"] and r["verdict"] == "leak"
              and r["detect_s"] is not None]
    if caught:
        rec.say(f"leaks caught: {len(caught)} runs, time to detect median "
                f"{statistics.median(caught):.1f} s, worst {max(caught):.1f} s")


# ---------------------------------------------------------------------- main
def plan(seeds: int, durations: Sequence[float], full: bool, select: str | None,
         non_leaks: bool = False, rate: float | None = None) -> list[Job]:
    chosen = [t for t in ZOO if not select or any(k in t.name for k in select.split(","))]
    chosen = [t for t in chosen if not (non_leaks and t.leaks)]
    jobs = [Job(t, d, s, rate) for s in range(seeds) for d in durations for t in chosen]
    if full:
        jobs += [Job(t, RESOLUTION_LONG_S, 0) for t in chosen if t.name == "fixed"]
    # Longest first, so two workers finish together.
    return sorted(jobs, key=lambda j: -j.duration_s)


def main(argv: list[str] | None = None) -> int:
    full = os.environ.get("BENCH_FULL") == "1"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=FULL_SEEDS if full else 1)
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (each one worker)")
    parser.add_argument("-k", dest="select", default=None, help="zoo targets (substrings, a,b)")
    parser.add_argument("--out", default=None, help="keep the run folders here (default: a "
                                                    "temporary folder, removed at the end)")
    parser.add_argument("--durations", default=",".join(f"{d:g}" for d in DURATIONS),
                        help="seconds per run; byte leaks run at 200 MB/h at 20 s, 50 MB/h at "
                             "60 s, their default rate otherwise")
    parser.add_argument("--non-leaks", action="store_true",
                        help="only the targets that do not leak (false alarms over many seeds)")
    parser.add_argument("--rate", type=float, default=None, metavar="MB_PER_H",
                        help="run the byte leaks at this rate instead (e.g. 20: a malloc "
                             "leak of 20 MB/h at 60 s)")
    parser.add_argument("--section", default="",
                        help="record under 'Sensitivity: SECTION' instead of the main section")
    args = parser.parse_args(argv)
    durations = [float(d) for d in args.durations.split(",") if d]
    rate = args.rate * 1e6 if args.rate else None
    jobs = plan(args.seeds, durations, full, args.select, args.non_leaks, rate)
    # The key names a file: a section like "leaks at 20 MB/h" must not make a folder.
    slug = re.sub(r"[^A-Za-z0-9,.]+", "-", args.section).strip("-")
    key = "sensitivity" + (f"-{slug}" if slug else "")
    title = "Sensitivity" + (f": {args.section}" if args.section else "")
    rec = Record(key, title, {
        "seeds": args.seeds, "durations_s": " ".join(f"{d:g}" for d in durations),
        "jobs": args.jobs, "targets": len({j.target.name for j in jobs}), "full": full,
        "select": args.select or "all", **({"rate_mb_h": args.rate} if args.rate else {})})
    importable_here()
    with tempfile.TemporaryDirectory(prefix="bench-sensitivity-") as tmp:
        out = Path(args.out or tmp)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            rows = list(pool.map(lambda job: run_job(job, out), jobs))
    publish(rec, rows)
    return 0


def publish(rec: Record, rows: list[dict[str, Any]]) -> None:
    order = {t.name: i for i, t in enumerate(ZOO)}
    rows.sort(key=lambda r: (r["duration_s"], order[r["target"]], r["seed"]))
    rec.figures["runs"] = [{**{k: v for k, v in r.items() if k != "metrics"},
                            "signals": {n: r["metrics"].get(n + GROWTH) for n in
                                        signals(r["metrics"])}} for r in rows]
    rec.say("Each zoo target (bench/zoo/targets.py) on radix-steady in a real worker; true rate = "
            "the ledger gauge's slope over the analysis window (lock leak: locked tokens).")
    # A fixed-only duration (BENCH_FULL's 10 min run) feeds the resolution table alone.
    for duration in sorted({r["duration_s"] for r in rows if r["target"] != "fixed"
                            or r["duration_s"] in RATE_AT}):
        kind_table(rec, rows, duration)
        signal_table(rec, rows, duration)
    detect_summary(rec, rows)
    fixed = [r for r in rows if r["target"] == "fixed"]
    if fixed:
        rec.figures["resolution"] = {f"{r['duration_s']:g}s seed {r['seed']}": {
            n: resolution(r["metrics"], n) for n in signals(r["metrics"])} for r in fixed}
        resolution_table(rec, fixed)
    report_targets(rec, rows)
    rec.publish()


if __name__ == "__main__":
    raise SystemExit(main())
