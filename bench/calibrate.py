"""Measure how much the fixed caches grow by themselves; write the analysis's calibration.

Every scenario runs with the fixed code for each duration and seed, exactly as
a user's run would (its own workload, budgets, warm-up). For each signal (RSS,
USS, C heap, Python blocks) the growth the run's own interval would have
confirmed, the judged slope's lower 95% bound times its window (0 if the bound
is not above zero), is kept as one point per run (times a margin);
``"*"`` pools every scenario's points. The result replaces
``harness/analysis/calibration.json``; see :mod:`harness.analysis.calibration`
for how the analysis uses it.

    python bench/calibrate.py [--durations 20s,60s] [--seeds 3] [--jobs 2] [-k radix]
    python bench/calibrate.py --durations 10m --seeds 2 -k radix-steady --out long.json
    python bench/calibrate.py --add long.json   # beside the 20 s and 60 s points
    python bench/calibrate.py --durations 60s --seeds 8 --signals heap -k radix-steady --replace
    python bench/calibrate.py --durations 20s --seeds 3 --first-seed 10 --target sglang \
        --out more.json && python bench/calibrate.py --add more.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.analysis.calibration import (
    ANY_SCENARIO,
    CALIBRATION_FILE,
    COMPARABLE,
    FORMAT,
    on_reference,
    target_key,
)
from harness.analysis.runview import RunView
from harness.api import load_callable
from harness.configure import scenario_config
from harness.parent.runner import run
from harness.registry import load_scenario, scenario_names
from harness.runfiles.names import SAMPLES_FILE
from harness.runfiles.reader import load_samples
from harness.units import parse_duration

SIGNALS = ("rss", "uss", "heap", "py_blocks")
# A handful of seeds shows less than the largest a healthy run can do; the
# stored amount is the largest seen times this margin.
MARGIN = 1.5
UNJUDGED = ("crashed", "hung", "error")  # verdicts of runs that did not run their workload
Point = tuple[str, str, float, float]  # signal, scenario, window_s, amount


def healthy_growth(rundir: Path, scenario: str) -> Iterator[Point]:
    """The growth each signal's interval confirms in one fixed run, as (window, amount).

    The lower bound, not the slope: a run's verdict subtracts the allowance from
    its own interval, which already holds this run's noise; an allowance of the
    whole slope would count that noise twice (the heap at 60 s: a healthy slope
    of 1.35 MB/h whose interval alone spans +-0.5 MB/h).
    """
    data = load_samples(rundir / SAMPLES_FILE)
    view = RunView(data, data.warmup_end_s)
    for signal in SIGNALS:
        if signal not in view.series:
            continue
        trend = view.trend(signal, view.end_s)
        if trend is None:
            continue
        slope = trend.judged
        yield signal, scenario, slope.span_s, max(slope.ci[0], 0.0) * slope.span_s / 3600.0


def one_run(name: str, duration: str, seed: int, out: Path,
            target: str | None = None) -> list[Point]:
    rundir = out / f"{name}-{duration}-{seed}"
    config = scenario_config(load_scenario(name), rundir, duration_s=parse_duration(duration),
                             seed=seed, target=target)
    outcome = run(config)
    if outcome.verdict in UNJUDGED:
        print(f"  {name} {duration} seed {seed}: {outcome.verdict}; no points (a run that "
              f"did not finish its workload says nothing of healthy growth)", flush=True)
        return []
    points = list(healthy_growth(rundir, target_key(name, target)))
    shown = ", ".join(f"{s} {a:.3g} in {w:.0f} s" for s, _, w, a in points)
    print(f"  {name} {duration} seed {seed}: {outcome.verdict}; {shown}", flush=True)
    return points


def maps_on(name: str, target: str) -> bool:
    """Whether ``target`` runs scenario ``name`` (a factory's ``declines`` says it does not)."""
    declines = getattr(load_callable(target), "declines", None)
    return not (callable(declines) and declines(load_scenario(name).cache_options))


def target_code(target: str) -> str:
    """What a target says it runs (the SGLang target: its release), for the notes."""
    describe = getattr(load_callable(target), "describe", None)
    return str(describe()) if callable(describe) else target


def calibration(points: list[Point]) -> dict[str, dict[str, list[list[float]]]]:
    """Every run's point with the margin, per signal and scenario; ``*`` pools them."""
    signals: dict[str, dict[str, list[list[float]]]] = {}
    for signal, scenario, window, amount in points:
        stored = [round(window, 1), round(MARGIN * amount)]
        for who in (scenario, ANY_SCENARIO) if on_reference(scenario) else (scenario,):
            signals.setdefault(signal, {}).setdefault(who, []).append(stored)
    for by_scenario in signals.values():
        for pts in by_scenario.values():
            pts.sort()
    return signals


def pooled(by_scenario: dict[str, list[list[float]]]) -> list[list[float]]:
    """``*``: every reference scenario's points (a target's speak for its code only)."""
    return sorted(p for who, pts in by_scenario.items()
                  if who != ANY_SCENARIO and on_reference(who) for p in pts)


def merged(old: dict[str, Any], new: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """``old`` with the points of ``names`` replaced by ``new``'s; ``*`` pooled again."""
    signals: dict[str, dict[str, list[list[float]]]] = {}
    for document, replaced in ((old, names), (new, [])):
        for signal, by_scenario in document["signals"].items():
            for who, points in by_scenario.items():
                if who != ANY_SCENARIO and who not in replaced:
                    signals.setdefault(signal, {})[who] = points
    for by_scenario in signals.values():
        by_scenario[ANY_SCENARIO] = pooled(by_scenario)
    # Earlier notes about the same scenarios are superseded by this measurement.
    kept = [note for note in str(old.get("measured", "")).split("; ")
            if not set(note.partition(": ")[0].split(", ")) <= set(names)]
    return {**old, "measured": "; ".join([*kept, f"{', '.join(names)}: {new['measured']}"]),
            "how": f"{old.get('how')}; {', '.join(names)} re-measured: {new['how']}",
            "signals": signals}


def added(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``old`` with ``new``'s points added beside its own (a longer duration measured
    apart, say); ``*`` pooled again. The notes say what was added and how."""
    signals = {signal: {who: list(points) for who, points in by_scenario.items()}
               for signal, by_scenario in old["signals"].items()}
    names = sorted({who for by_scenario in new["signals"].values() for who in by_scenario
                    if who != ANY_SCENARIO})
    for signal, by_scenario in new["signals"].items():
        for who, points in by_scenario.items():
            if who != ANY_SCENARIO:
                mine = signals.setdefault(signal, {}).setdefault(who, [])
                mine[:] = sorted([*mine, *points])
    for by_scenario in signals.values():
        by_scenario[ANY_SCENARIO] = pooled(by_scenario)
    return {**old, "measured": f"{old.get('measured')}; added for {', '.join(names)}: "
                               f"{new['measured']}",
            "how": f"{old.get('how')}; added for {', '.join(names)}: {new['how']}",
            "signals": signals}


def replaced(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``old`` with the points of ``new``'s signals and scenarios over windows like
    ``new``'s replaced by them (the other lengths kept); ``*`` pooled again."""
    signals = {signal: {who: list(points) for who, points in by_scenario.items()}
               for signal, by_scenario in old["signals"].items()}
    names: set[str] = set()
    for signal, by_scenario in new["signals"].items():
        for who, points in by_scenario.items():
            if who == ANY_SCENARIO or not points:
                continue
            names.add(who)
            low = COMPARABLE * min(w for w, _ in points)
            high = max(w for w, _ in points) / COMPARABLE
            mine = signals.setdefault(signal, {}).setdefault(who, [])
            mine[:] = sorted([*(p for p in mine if not low <= p[0] <= high), *points])
    for by_scenario in signals.values():
        by_scenario[ANY_SCENARIO] = pooled(by_scenario)
    what = f"{', '.join(new['signals'])} of {', '.join(sorted(names))}"
    return {**old, "measured": f"{old.get('measured')}; {what} replaced: {new['measured']}",
            "how": f"{old.get('how')}; {what} replaced: {new['how']}", "signals": signals}


def shortest_window(old: dict[str, Any], new: dict[str, Any]) -> float:
    """The shorter of two calibrations' shortest measured windows (a file without one
    does not say; harness.analysis.calibration)."""
    known = [float(d["shortest_window_s"]) for d in (old, new) if d.get("shortest_window_s")]
    return min(known, default=0.0)


def dump(document: dict[str, Any]) -> str:
    """JSON with one line per signal and scenario, so a diff shows what moved."""
    head = {k: v for k, v in document.items() if k != "signals"}
    lines = [json.dumps(head)[:-1] + ', "signals": {']
    for i, (signal, by_scenario) in enumerate(document["signals"].items()):
        lines.append(f"  {json.dumps(signal)}: {{")
        rows = [f"    {json.dumps(who)}: {json.dumps(points)}" for who, points in
                by_scenario.items()]
        lines.append(",\n".join(rows))
        lines.append("  }" + ("," if i < len(document["signals"]) - 1 else ""))
    return "\n".join([*lines, "}}"]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--durations", default="20s,60s")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds run: --first-seed up to --first-seed + --seeds - 1 "
                             "(seeds apart from those a benchmark judges, e.g. 10)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("-k", dest="select", default="",
                        help="scenarios whose name contains one of these (a,b)")
    parser.add_argument("--out", type=Path, default=CALIBRATION_FILE)
    parser.add_argument("--target", default=None,
                        help="measure the scenarios on this target's code (sglang: the "
                             "installed release, LEAK_HARNESS_SGLANG picks one); its points "
                             "are kept as scenario@target, apart from the reference's")
    parser.add_argument("--merge", action="store_true",
                        help="keep the other scenarios' points from --out; re-measure only -k's")
    parser.add_argument("--signals", default=",".join(SIGNALS),
                        help=f"the signals to write (of {', '.join(SIGNALS)})")
    parser.add_argument("--replace", action="store_true",
                        help="keep --out's points but those of the measured scenarios and "
                             "signals over windows like the new ones, which the new replace")
    parser.add_argument("--add", type=Path, default=None, metavar="FILE",
                        help="measure nothing: add FILE's points (a calibration written with "
                             "--out, e.g. of longer durations) to --out's and write it")
    args = parser.parse_args(argv)
    signals = [name for name in args.signals.split(",") if name]
    if not signals or any(name not in SIGNALS for name in signals):
        parser.error(f"--signals takes names among {', '.join(SIGNALS)}; got {args.signals!r}")
    if args.add is not None:
        old = json.loads(args.out.read_text(encoding="utf-8"))
        extra = json.loads(args.add.read_text(encoding="utf-8"))
        both = {**added(old, extra), "shortest_window_s": shortest_window(old, extra)}
        args.out.write_text(dump(both), encoding="utf-8")
        print(f"{args.add}'s points added to {args.out}")
        return 0
    names = [n for n in scenario_names() if any(k in n for k in args.select.split(","))]
    if args.target:
        names = [n for n in names if maps_on(n, args.target)]
    durations = args.durations.split(",")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(n, d, s) for d in durations for n in names for s in seeds]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(one_run, n, d, s, Path(tmp), args.target) for n, d, s in jobs]
        points = [p for f in futures for p in f.result() if p[0] in signals]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    how = (f"bench/calibrate.py --durations {args.durations} --seeds {args.seeds} "
           f"{f'--first-seed {args.first_seed} ' if args.first_seed else ''}"
           f"--jobs {args.jobs} --signals {','.join(signals)}"
           f"{f' --target {args.target} ({target_code(args.target)})' if args.target else ''}"
           f"; one point per fixed run: "
           f"its judged window and "
           f"{MARGIN} x the growth its lower 95% bound confirms over it")
    # The measured window of the shortest runs: what a run must be about as long as for
    # its memory growth to be judged against these amounts.
    shortest = min(parse_duration(d) - parse_duration(load_scenario(n).warmup)
                   for d in durations for n in names)
    document: dict[str, Any] = {"format": FORMAT, "shortest_window_s": round(shortest, 1),
                                "measured": now, "how": how, "signals": calibration(points)}
    if args.merge or args.replace:
        old = json.loads(args.out.read_text(encoding="utf-8"))
        keys = [target_key(n, args.target) for n in names]
        new = merged(old, document, keys) if args.merge else replaced(old, document)
        document = {**new, "shortest_window_s": shortest_window(old, document)}
    args.out.write_text(dump(document), encoding="utf-8")
    print(f"calibration written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
