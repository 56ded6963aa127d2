"""``python -m scenarios.sglang``: the release found, the glue it took, and which class
each scenario runs on (or why it does not map), with the target's notes.

What ``leak-harness doctor --target scenarios.sglang:make`` prints once the harness
shows a target's ``notes()``; until then, this is where they are read.
"""

from __future__ import annotations

import sys

from harness.api import RunContext
from harness.registry import load_scenario, scenario_names
from scenarios.sglang import glue

TARGET = "scenarios.sglang:make"


def main() -> int:
    try:
        release = glue.load()
    except glue.GlueError as exc:
        print(f"no SGLang release: {exc}")
        return 1
    where = release.site or "the environment"
    print(f"SGLang {release.version} from {where}")
    mapped = 0
    notes: set[str] = set()
    for name in scenario_names():
        try:
            workload = load_scenario(name).build(RunContext(seed=0, target=TARGET))
        except glue.GlueError as exc:
            print(f"  {name}: {exc}")
            continue
        cache = getattr(workload, "cache", None)
        print(f"  {name}: {getattr(cache, 'kind', type(cache).__name__)}")
        mapped += 1
        notes.update(getattr(cache, "notes", lambda: [])())
        workload.close()
    print(f"{mapped} of {len(scenario_names())} scenarios map")
    print(f"stand-ins for absent modules: {', '.join(glue.stand_ins_used()) or 'none'}")
    for note in sorted(notes):
        print(f"  note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
