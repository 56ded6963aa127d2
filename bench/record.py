"""Where benchmark figures go: stdout for people, a JSON file per script, one Markdown page.

Each script builds a :class:`Record`, says its lines through it (printed at
once, kept for the page), states its targets with :meth:`Record.target`, then
calls :meth:`Record.publish`. That writes ``docs/benchmarks/<key>.json`` (the
raw figures, parameters, machine and load) and regenerates
``docs/benchmarks.md`` from every JSON file there, so the page always holds
the latest run of each script and is never typed by hand.

The machine is shared, so each record also says how busy it was: the load
average at start and end, and how many cores other processes used on average
(machine CPU time minus this script's and its children's, over the wall time;
approximate: a PP peer rank whose worker did not wait for it counts as other).
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
import resource
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

from harness.runfiles.summary import Summary

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SECTIONS = DOCS / "benchmarks"
PAGE = DOCS / "benchmarks.md"
FORMAT = 1  # of the per-script JSON files
# Page order; scripts not listed here come after, by name.
ORDER = ("cache_throughput", "sampler_overhead", "time_to_detect", "accuracy", "sensitivity",
         "resolution", "attribution_cost", "harness_memory", "analysis_scale", "report_scale")


def importable_here() -> None:
    """Let workers import ``bench.*`` scenario specs (the runner adds only the cwd)."""
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": package_version("torch"),
        "os": f"{platform.system()} {platform.release()}",
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
    }


def own_cpu_s() -> float:
    """CPU seconds of this process and of its children that have been waited for."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def machine_cpu_s() -> float:
    t = psutil.cpu_times()
    return float(sum(getattr(t, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq",
                                                   "steal")))


class Record:
    def __init__(self, key: str, title: str, params: dict[str, Any]) -> None:
        self.key, self.title, self.params = key, title, params
        self.body: list[tuple[str, str]] = []  # ("text" | "md", line)
        self.targets: list[dict[str, Any]] = []
        self.figures: dict[str, Any] = {}
        self.started = dt.datetime.now(dt.UTC)
        self._wall0, self._own0, self._cpu0 = time.monotonic(), own_cpu_s(), machine_cpu_s()
        self._load0 = os.getloadavg()
        print(f"== {title} ({self.started:%Y-%m-%d %H:%M} UTC, load average "
              f"{self._load0[0]:.2f}) ==", flush=True)

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.body.append(("text", text))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        """Print aligned columns; keep a Markdown table for the page."""
        cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
        widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
        for row in cells:
            print("  ".join(c.rjust(w) if i else c.ljust(w)
                            for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        rule = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"
        md = ["| " + " | ".join(cells[0]) + " |", rule, *("| " + " | ".join(r) + " |"
                                                        for r in cells[1:])]
        self.body += [("md", line) for line in md]
        sys.stdout.flush()

    def target(self, name: str, met: bool, measured: str, why: str = "") -> None:
        """A target, met or missed; a miss says by how much (``measured``) and why."""
        entry = {"target": name, "met": met, "measured": measured, "why": why}
        self.targets.append(entry)
        text = f"target {name}: {'met' if met else 'MISSED'} ({measured})"
        self.say(text + (f" — {why}" if why and not met else ""))

    def publish(self) -> None:
        wall = time.monotonic() - self._wall0
        others = (machine_cpu_s() - self._cpu0) - (own_cpu_s() - self._own0)
        doc = {
            "format": FORMAT, "key": self.key, "title": self.title,
            "date": self.started.strftime("%Y-%m-%d %H:%M UTC"),
            "command": shlex.join([Path(sys.executable).name, *sys.argv]),
            "params": self.params, "machine": machine(),
            "load": {"start": round(self._load0[0], 2), "end": round(os.getloadavg()[0], 2),
                     "other_cores": round(max(others, 0.0) / wall, 2) if wall > 0 else None},
            "wall_s": round(wall, 1), "targets": self.targets, "figures": self.figures,
            "body": self.body,
        }
        SECTIONS.mkdir(parents=True, exist_ok=True)
        (SECTIONS / f"{self.key}.json").write_text(json.dumps(doc, indent=1) + "\n")
        write_page()
        print(f"recorded in {(SECTIONS / f'{self.key}.json').relative_to(ROOT)} "
              f"and {PAGE.relative_to(ROOT)} ({wall:.0f} s)", flush=True)


def load_sections() -> list[dict[str, Any]]:
    docs = [json.loads(p.read_text()) for p in sorted(SECTIONS.glob("*.json"))]
    docs = [d for d in docs if d.get("format") == FORMAT]
    rank = {key: i for i, key in enumerate(ORDER)}
    return sorted(docs, key=lambda d: (rank.get(d["key"], len(ORDER)), d["key"]))


def write_page() -> None:
    sections = load_sections()
    out = ["# Benchmarks", "",
           "Generated by `make bench` (the scripts in `bench/`) from "
           "`docs/benchmarks/*.json`; do not edit by hand. Each section says when, on what "
           "machine, with which command and parameters it was measured, and how busy the "
           "(shared) machine was meanwhile. `make bench` runs reduced defaults (about an "
           "hour, half of it the 70 false-alarm runs); `BENCH_FULL=1 make bench` runs the full "
           "sizes (parameter `full`).", "",
           "## Targets", "",
           "| benchmark | target | result | measured |", "|---|---|---|---|"]
    for doc in sections:
        for t in doc["targets"]:
            result = "met" if t["met"] else "**missed**"
            out.append(f"| {doc['title']} | {t['target']} | {result} | {t['measured']} |")
    for doc in sections:
        out += ["", f"## {doc['title']}", "", *section_header(doc), *render(doc["body"])]
        misses = [t for t in doc["targets"] if not t["met"] and t["why"]]
        if misses:
            out += ["", "Missed targets:", ""]
            out += [f"- {t['target']}: {t['measured']}. {t['why']}" for t in misses]
    PAGE.write_text("\n".join(out) + "\n")


def render(body: list[list[str]]) -> list[str]:
    """Printed lines in fenced blocks, tables as Markdown tables."""
    out: list[str] = []
    kind_before = ""
    for kind, line in body:
        if kind != kind_before:
            out += ["```"] if kind_before == "text" else []
            out += ["", "```"] if kind == "text" else [""]
            kind_before = kind
        out.append(line)
    return out + (["```"] if kind_before == "text" else [])


def section_header(doc: dict[str, Any]) -> list[str]:
    m, load = doc["machine"], doc["load"]
    params = ", ".join(f"{k}={v}" for k, v in doc["params"].items()) or "none"
    return [
        f"- measured {doc['date']} in {doc['wall_s']:.0f} s on {m['cpu']}, {m['cores']} cores, "
        f"{m['memory_gib']} GiB, {m['os']}, Python {m['python']}, torch {m['torch']}",
        f"- load average {load['start']} at start, {load['end']} at end; other processes used "
        f"{load['other_cores']} cores on average meanwhile",
        f"- command: `{doc['command']}`",
        f"- parameters: {params}",
        *([f"- note: {doc['note']}"] if doc.get("note") else []),
    ]


def metrics_json(summary: Summary) -> dict[str, dict[str, Any]]:
    """A summary's metrics as ``summary.json`` holds them: what the records store."""
    return {name: metric.to_json() for name, metric in summary.metrics.items()}
