"""Leaks nobody named: SGLang releases with one give-back call dropped ("mutants").

How well does the SGLang target catch a leak in SGLang's code that no test was written
for? For a release under ``.sglang/``:

1. **Sites.** ``bench/mutant_sites.py`` parses (``ast``) the release's cache modules
   (``sglang/srt/mem_cache/**``, the unified cache's and allocators' included), the
   request-release helpers the target calls (``release_kv_cache`` in ``mem_cache/common.py``,
   ``release_req`` in ``managers/schedule_batch.py``), the HiCache controller
   (``managers/cache_controller.py``) and the session code (``sglang/srt/session/``), and
   lists every expression statement that calls something whose last name has one of the
   words of ``mutant_sites.GIVES_BACK`` in it (regex
   ``(?:^|_)(?:free|release|dec|decrement|unlock|evict|remove|del|delete|pop|popleft|popitem|discard|dealloc|deallocate|drop|clear|unref)(?:_|$)``
   on the callee's last name): each is a candidate.
2. **Executed.** Each scenario the target maps runs once, fixed, for ``--probe`` seconds
   with a line probe on the candidate functions (``LEAK_HARNESS_MUTANT_PROBE``); a
   candidate is kept if one of its lines ran. Its scenario is the first that ran it,
   the exit scenarios (``*-exits``) first.
3. **Mutants.** ``bench/mutant_target.py`` (``--target bench.mutant_target:make``,
   ``LEAK_HARNESS_MUTANT=module:qualname:line``) recompiles the function with that one
   statement replaced by ``pass`` and swaps it onto the live function before the cache is
   built. A site it cannot recompile faithfully (a closure, a nested class's method, no
   Python function behind the name) is skipped with its reason.
4. **Runs.** Each kept site's scenario, fixed cell, ``--duration`` (20 s), two runs at
   once; the unmutated cells of the same scenarios are the control. ``leak``,
   ``crashed`` and ``hung`` count as detected (with the time to detect and the first
   "Where it grows" line), ``pass`` and ``suspicious`` as survived.

A survivor is not by itself a harness gap: many dropped calls change nothing a run can
see (an ``evict`` under a roomy pool, a ``clear`` of a list rebuilt next step); the
table is the start of that reading, not its end.

    python bench/sglang_mutants.py [--release 0.5.23] [--max-sites N] [--duration 20]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable without install

from bench.mutant_sites import Site
from bench.mutant_target import MUTANT_ENV, PROBE_ENV, candidates
from bench.record import ROOT, SECTIONS, Record, importable_here, write_page
from harness.runfiles.summary import load_summary

TARGET = "bench.mutant_target:make"
DETECTED = ("leak", "crashed", "hung")
SURVIVED = ("pass", "suspicious")
EXITS_SUFFIX = "-exits"


@dataclass
class Outcome:
    verdict: str
    detect_s: float | None
    first: str


@dataclass
class Plan:
    """One release's sites: all candidates, those that ran and where, those skipped."""

    release: str
    candidates: list[Site]
    scenario_of: dict[str, str] = field(default_factory=dict)  # executed site -> scenario
    skipped: dict[str, str] = field(default_factory=dict)      # executed site -> why
    probe_failed: list[str] = field(default_factory=list)

    def runnable(self) -> list[Site]:
        return [s for s in self.candidates
                if s.key in self.scenario_of and s.key not in self.skipped]


def env_for(release: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONWARNINGS": "ignore", "LEAK_HARNESS_SGLANG": release, **extra}


def python_json(args: list[str], release: str) -> Any:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env_for(release),
                          capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed on {release}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_cell(scenario: str, release: str, duration: float, out: Path,
             mutant: str | None = None, probe: Path | None = None) -> Outcome:
    if (out / "summary.json").exists():  # --work of an interrupted bench: kept, not re-run
        return outcome(out)
    extra = {MUTANT_ENV: mutant} if mutant else {}
    if probe is not None:
        extra[PROBE_ENV] = str(probe)
    try:
        subprocess.run([sys.executable, "-m", "leak_harness", "run", scenario, "--target",
                        TARGET, "--duration", f"{duration:g}s", "--out", str(out)],
                       cwd=ROOT, env=env_for(release, **extra), capture_output=True,
                       text=True, timeout=duration + 300, check=False)
    except subprocess.TimeoutExpired:
        return Outcome("hung (runner timed out)", None, "")
    return outcome(out)


def outcome(rundir: Path) -> Outcome:
    try:
        summary = load_summary(rundir)
    except (OSError, ValueError):
        return Outcome("no summary", None, "")
    where = list(summary.analysis.where or ()) if summary.analysis else []
    first = " ".join(where[0].text.split()) if where else ""
    return Outcome(str(summary.verdict), summary.time_to_detect_s, first)


def in_parallel(jobs: int, work: Sequence[Callable[[], None]]) -> None:
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(w) for w in work]:
            future.result()


def module_of(path: str) -> str | None:
    """``.../site/sglang/srt/x/y.py`` -> ``sglang.srt.x.y`` (as Site.module names it)."""
    marker = "/site/"
    if marker not in path or not path.endswith(".py"):
        return None
    rel = path.split(marker, 1)[1][:-3].split("/")
    return ".".join(rel[:-1] if rel[-1] == "__init__" else rel)


def probe_order(scenarios: list[str]) -> list[str]:
    return sorted(scenarios, key=lambda s: (not s.endswith(EXITS_SUFFIX), s))


def executed_lines(probe: Path) -> set[tuple[str, int]]:
    lines: set[tuple[str, int]] = set()
    if probe.exists():
        for row in probe.read_text().splitlines():
            path, _, line = row.rpartition(":")
            module = module_of(path)
            if module and line.isdigit():
                lines.add((module, int(line)))
    return lines


def probe(plan: Plan, scenarios: list[str], seconds: float, work: Path, jobs: int) -> None:
    """Which candidates each scenario executes; first scenario per site, exits first."""
    ran: dict[str, set[tuple[str, int]]] = {}

    def one(scenario: str) -> None:
        probe_file = work / f"probe-{scenario}.txt"
        result = run_cell(scenario, plan.release, seconds, work / f"probe-{scenario}",
                          probe=probe_file)
        ran[scenario] = executed_lines(probe_file)
        if not ran[scenario]:
            plan.probe_failed.append(f"{scenario} ({result.verdict})")
        print(f"  probe {scenario}: {result.verdict}, {len(ran[scenario])} candidate-function "
              f"lines ran", flush=True)

    in_parallel(jobs, [partial(one, s) for s in scenarios])
    for site in plan.candidates:
        span = {(site.module, n) for n in range(site.line, site.end_line + 1)}
        first = next((s for s in probe_order(scenarios) if span & ran.get(s, set())), None)
        if first is not None:
            plan.scenario_of[site.key] = first


def prepare(plan: Plan, work: Path) -> None:
    """Skip the executed sites whose mutant cannot be built faithfully, with the reason."""
    executed = [s for s in plan.candidates if s.key in plan.scenario_of]
    for site in executed:
        if site.nested:
            plan.skipped[site.key] = site.nested
    keys = [s.key for s in executed if s.key not in plan.skipped]
    keys_file = work / "keys.json"
    keys_file.write_text(json.dumps(keys))
    reasons = python_json(["-m", "bench.mutant_target", "prepare", str(keys_file)],
                          plan.release)
    plan.skipped.update({k: why for k, why in reasons.items() if why})


def plan_release(release: str, args: argparse.Namespace, work: Path) -> Plan:
    work.mkdir(parents=True, exist_ok=True)
    site_dir = ROOT / ".sglang" / release / "site"
    plan = Plan(release, candidates(site_dir))
    scenarios = python_json(["-m", "bench.mutant_target", "mapped"], release)
    print(f"SGLang {release}: {len(plan.candidates)} candidate sites; probing "
          f"{len(scenarios)} mapped scenarios for {args.probe:g} s each", flush=True)
    probe(plan, scenarios, args.probe, work, args.jobs)
    prepare(plan, work)
    print(f"SGLang {release}: {len(plan.scenario_of)} executed, {len(plan.skipped)} skipped, "
          f"{len(plan.runnable())} to mutate", flush=True)
    return plan


def past(deadline: dt.datetime | None) -> bool:
    return deadline is not None and dt.datetime.now(dt.UTC) >= deadline


def measure(plan: Plan, args: argparse.Namespace, work: Path,
            deadline: dt.datetime | None) -> tuple[dict[str, Outcome], dict[str, Outcome]]:
    """The mutants' outcomes by site key and the controls' by scenario."""
    sites = spread(plan.runnable())
    sites = sites[:args.max_sites] if args.max_sites else sites
    controls = sorted({plan.scenario_of[s.key] for s in sites})
    results: dict[str, Outcome] = {}
    control: dict[str, Outcome] = {}
    total = len(sites) + len(controls)

    def control_run(scenario: str) -> None:
        if not past(deadline):
            control[scenario] = run_cell(scenario, plan.release, args.duration,
                                         work / f"control-{scenario}")
            print(f"  [{len(results) + len(control)}/{total}] control {scenario}: "
                  f"{control[scenario].verdict}", flush=True)

    def mutant_run(site: Site) -> None:
        if past(deadline):
            return
        got = run_cell(plan.scenario_of[site.key], plan.release, args.duration,
                       work / f"mutant-{site.key}", mutant=site.key)
        results[site.key] = got
        when = f" at {got.detect_s:.1f} s" if got.detect_s is not None else ""
        print(f"  [{len(results) + len(control)}/{total}] {site.key} "
              f"({plan.scenario_of[site.key]}): {got.verdict}{when}", flush=True)

    work_items: list[Callable[[], None]] = [partial(control_run, c) for c in controls]
    work_items += [partial(mutant_run, s) for s in sites]
    in_parallel(args.jobs, work_items)
    return results, control


def spread(sites: list[Site]) -> list[Site]:
    """The sites one module at a time in turn, so a cut (--max-sites, --stop-at) leaves
    every module's first sites measured rather than the first modules' all."""
    by_module: dict[str, list[Site]] = {}
    for site in sites:
        by_module.setdefault(site.module, []).append(site)
    queues = list(by_module.values())
    out: list[Site] = []
    while any(queues):
        out += [q.pop(0) for q in queues if q]
    return out


def figures_of(plan: Plan, results: dict[str, Outcome],
               control: dict[str, Outcome]) -> dict[str, Any]:
    """What a release's section is rendered from (kept in the bench's JSON)."""
    by_key = {s.key: s for s in plan.candidates}
    return {
        "candidates": len(plan.candidates), "executed": len(plan.scenario_of),
        "skipped": plan.skipped, "probe_failed": plan.probe_failed,
        "control": {s: vars(o) for s, o in sorted(control.items())},
        "sites": {k: {**vars(o), "scenario": plan.scenario_of[k], "call": by_key[k].call}
                  for k, o in results.items()},
    }


def report(rec: Record, release: str, fig: dict[str, Any]) -> None:
    """A release's totals, controls, per-site table and skipped sites, said through rec."""
    sites: dict[str, dict[str, Any]] = fig["sites"]
    failing = {s for s, o in fig["control"].items() if o["verdict"] not in SURVIVED}
    count = {group: sum(1 for o in sites.values() if o["scenario"] not in failing
                        and verdict_group(o["verdict"]) == group)
             for group in ("detected", "error", "survived")}
    unjudged = sum(1 for o in sites.values() if o["scenario"] in failing)
    not_run = fig["executed"] - len(fig["skipped"]) - len(sites)
    rec.say(f"SGLang {release}: {fig['candidates']} candidate sites, {fig['executed']} "
            f"executed by the mapped scenarios, {len(fig['skipped'])} of those skipped (no "
            f"faithful recompile), {len(sites)} mutated and run: {count['detected']} "
            f"detected (leak, crashed, hung), {count['error']} error (the run did not do "
            f"its scenario's work: a failing cell, not a leak verdict), {count['survived']} "
            f"survived (pass, suspicious)"
            + (f"; {unjudged} not judged: their scenario's unmutated control fails too "
               f"({', '.join(sorted(failing))})" if unjudged else "")
            + (f"; {not_run} not run (--stop-at or --max-sites)" if not_run else ""))
    if fig["probe_failed"]:
        rec.say(f"probes that recorded nothing: {', '.join(fig['probe_failed'])}")
    rec.table(["control (unmutated)", "verdict"],
              [(s, o["verdict"]) for s, o in fig["control"].items()])
    rows = [(short_site(key), f"`{o['call'][:70]}`", o["scenario"],
             o["verdict"] + (" (control fails)" if o["scenario"] in failing else ""),
             f"{o['detect_s']:.1f}" if o["detect_s"] is not None
             and verdict_group(o["verdict"]) != "survived" else "-",
             (o["first"][:110] or "-").replace("|", "/"))
            for key, o in sorted(sites.items(), key=lambda kv: site_order(kv[0]))]
    rec.say(f"each mutant on its scenario's fixed cell ({release}):")
    rec.table(["site", "call", "scenario", "verdict", "detected (s)",
               "first 'Where it grows' line"], rows)
    if fig["skipped"]:
        rec.say("executed sites skipped:")
        rec.table(["skipped site", "why"],
                  [(short_site(k), why) for k, why in fig["skipped"].items()])
    rec.figures[release] = fig


def verdict_group(verdict: str) -> str:
    if verdict in DETECTED or verdict.startswith("hung"):
        return "detected"
    return "survived" if verdict in SURVIVED else "error"


def short_site(key: str) -> str:
    return key.removeprefix("sglang.srt.")


def site_order(key: str) -> tuple[str, str, int]:
    return Site.parse_key(key)


def render_again() -> None:
    """Rewrite the section from its recorded figures (the report's layout changed after
    the measurement): the date, load and parameters stay the measurement's."""
    path = SECTIONS / "sglang_mutants.json"
    doc = json.loads(path.read_text())
    rec = Record.__new__(Record)
    rec.body, rec.figures, rec.targets = [], {}, []
    for release, fig in doc["figures"].items():
        report(rec, release, fig)
    doc["body"], doc["figures"] = rec.body, rec.figures
    path.write_text(json.dumps(doc, indent=1) + "\n")
    write_page()


def deadline_of(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    hour, minute = (int(x) for x in text.split(":"))
    now = dt.datetime.now(dt.UTC)
    return now.replace(hour=hour, minute=minute, second=0, microsecond=0)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", action="append", help="SGLang release (repeatable; "
                    "default 0.5.23)")
    ap.add_argument("--max-sites", type=int, default=0, help="mutate at most N executed "
                    "sites per release (0: all)")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds per run")
    ap.add_argument("--probe", type=float, default=8.0, help="seconds per probe run")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once (at most 2 here)")
    ap.add_argument("--stop-at", help="HH:MM UTC: start no run after it (the rest: not run)")
    ap.add_argument("--work", help="the runs' folder; runs already in it (an interrupted "
                    "bench's) are read, not re-run")
    ap.add_argument("--render", action="store_true", help="run nothing: rewrite the "
                    "section from docs/benchmarks/sglang_mutants.json's figures")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    if args.render:
        render_again()
        return
    importable_here()
    found = args.release or ["0.5.23"]
    rec = Record("sglang_mutants", "Leaks nobody named: SGLang with one give-back call "
                 "dropped", {"releases": found, "duration_s": args.duration,
                             "probe_s": args.probe, "jobs": args.jobs,
                             "max_sites": args.max_sites})
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-mutants-"))
    print(f"runs in {work}", flush=True)
    deadline = deadline_of(args.stop_at)
    for release in found:
        if past(deadline):
            rec.say(f"SGLang {release}: not measured (--stop-at {args.stop_at} passed)")
            continue
        plan = plan_release(release, args, work / release)
        results, control = measure(plan, args, work / release, deadline)
        report(rec, release, figures_of(plan, results, control))
    rec.publish()


if __name__ == "__main__":
    main()
