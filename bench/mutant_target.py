"""SGLang's own caches with one give-back call dropped: a target for mutation runs.

``--target bench.mutant_target:make`` builds what ``scenarios.sglang:make`` builds, after
two optional steps read from the environment:

- ``LEAK_HARNESS_MUTANT=module:qualname:line`` (a :class:`bench.mutant_sites.Site` key):
  that function of the installed release runs with the call statement at that line
  replaced by ``pass`` (``bench/mutant_sites.py`` recompiles it from its source and swaps
  the code onto the live function), as a release that lost that one call would run.
- ``LEAK_HARNESS_MUTANT_PROBE=FILE``: a trace function on the candidate functions
  (:func:`candidate_files`, only the functions holding a site) appends each
  ``file:line`` they execute to FILE the first time it runs, so a run that is stopped
  still leaves what it reached. It traces the threads the build starts (HiCache's) from
  their start and the worker's own thread once the cache is built: tracing the build
  itself slows it tenfold, and the host tier's (a native hash module) then misses the
  worker's 30 s heartbeat.

As commands, with ``LEAK_HARNESS_SGLANG`` naming the release:
``python -m bench.mutant_target mapped`` prints the scenarios the SGLang target runs
(JSON list) and ``python -m bench.mutant_target prepare KEYS.json`` tries to build each
site's mutant without running it, printing ``{key: reason or ""}``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import scenarios.sglang as target
from bench import mutant_sites
from scenarios.sglang import glue

MUTANT_ENV = "LEAK_HARNESS_MUTANT"
PROBE_ENV = "LEAK_HARNESS_MUTANT_PROBE"
# The release's files whose give-back calls are candidates: its cache modules, the
# request-release helpers the target calls (schedule_batch's release_req, common's
# release_kv_cache are in these), the HiCache controller and the session code.
CANDIDATE_GLOBS = ("sglang/srt/mem_cache/**/*.py", "sglang/srt/managers/schedule_batch.py",
                   "sglang/srt/managers/cache_controller.py", "sglang/srt/session/**/*.py")

Tracer = Callable[[types.FrameType, str, Any], Any]


def candidate_files(site: Path) -> list[Path]:
    found = {p for pattern in CANDIDATE_GLOBS for p in site.glob(pattern)}
    return sorted(p for p in found if "__pycache__" not in p.parts)


def candidates(site: Path) -> list[mutant_sites.Site]:
    return mutant_sites.sites_in_files(site, candidate_files(site))


def release_site() -> Path:
    site = glue.load().site
    if site is None:
        raise glue.GlueError("the mutation runs need a release under .sglang/ (a site folder)")
    return site


def apply_mutant(key: str) -> None:
    """Swap the mutant of site ``key`` onto the installed release's live function."""
    module_name, qualname, line = mutant_sites.Site.parse_key(key)
    module = glue.import_modules([module_name])[0]
    filename = str(module.__file__)
    mutant_sites.swap(module, Path(filename).read_text(), filename, qualname, line)


def try_mutant(key: str) -> str:
    """Why site ``key``'s mutant cannot be built faithfully ("" when it can); no swap."""
    module_name, qualname, line = mutant_sites.Site.parse_key(key)
    try:
        module = glue.import_modules([module_name])[0]
        filename = str(module.__file__)
        func = mutant_sites.live_function(module, qualname)
        if func.__code__.co_filename != filename:
            return f"the live {qualname} comes from {func.__code__.co_filename}"
        mutant_sites.mutant_code(Path(filename).read_text(), filename, qualname, line,
                                 func.__code__, vars(module))
    except mutant_sites.Unfaithful as exc:
        return str(exc)
    except Exception as exc:  # any import or compile failure is a skip, with its text
        return f"{type(exc).__name__}: {exc}"
    return ""


class Probe:
    """Records the lines the candidate functions execute, appending new ones to a file."""

    def __init__(self, out: Path, site: Path) -> None:
        self.names: dict[str, set[str]] = {}
        for s in candidates(site):
            path = str(site / Path(*s.module.split("."))) + ".py"
            if not Path(path).exists():
                path = str(site / Path(*s.module.split(".")) / "__init__.py")
            self.names.setdefault(path, set()).add(s.qualname.rsplit(".", 1)[-1])
        self.seen: set[tuple[str, int]] = set()
        self.lock = threading.Lock()
        self.out = out.open("a", buffering=1)

    def on_call(self, frame: types.FrameType, event: str, arg: Any) -> Tracer | None:
        code = frame.f_code
        names = self.names.get(code.co_filename)
        if names is None or code.co_name not in names:
            return None
        return self.on_line

    def on_line(self, frame: types.FrameType, event: str, arg: Any) -> Tracer | None:
        if event == "line":
            where = (frame.f_code.co_filename, frame.f_lineno)
            if where not in self.seen:
                with self.lock:
                    self.seen.add(where)
                    self.out.write(f"{where[0]}:{where[1]}\n")
        return self.on_line


def make(inject: Sequence[str] = (), kv_size: int = 8192, **options: Any) -> Any:
    """``scenarios.sglang:make`` on the release, with the mutant and probe the
    environment asks for applied first."""
    glue.load()
    key = os.environ.get(MUTANT_ENV)
    if key:
        apply_mutant(key)
    probe_file = os.environ.get(PROBE_ENV)
    probe = Probe(Path(probe_file), release_site()) if probe_file else None
    if probe is not None:  # the threads the build starts (HiCache's) are traced from birth
        threading.settrace(probe.on_call)
    cache = target.make(inject, kv_size, **options)
    if probe is not None:  # this thread after the build: tracing the build (the host
        sys.settrace(probe.on_call)  # tier's native hash) misses the 30 s heartbeat
    return cache


make.regressions = ()  # type: ignore[attr-defined]
make.describe = target.describe  # type: ignore[attr-defined]
make.declines = target.declines  # type: ignore[attr-defined]


def mapped() -> list[str]:
    from harness.registry import load_scenario, scenario_names

    return [name for name in scenario_names()
            if target.declines(load_scenario(name).cache_options) is None]


def main(argv: Sequence[str]) -> None:
    glue.load()
    if argv[:1] == ["mapped"]:
        print(json.dumps(mapped()))
    elif argv[:1] == ["prepare"] and len(argv) == 2:
        keys = json.loads(Path(argv[1]).read_text())
        print(json.dumps({key: try_mutant(key) for key in keys}))
    else:
        raise SystemExit("usage: python -m bench.mutant_target mapped | prepare KEYS.json")


if __name__ == "__main__":
    main(sys.argv[1:])
