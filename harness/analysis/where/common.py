"""What the evidence sources of "Where it grows" share: the finding and the site.

:class:`Finding` is one line of "Where it grows" (the summary's own
record, :class:`harness.runfiles.summary_records.Finding`); :class:`Site` and
:class:`Kept` are what the allocation windows say of a source line, read by
:mod:`.sites` and weighed against the C heap by :mod:`.native`. Below every source
module of the package and importing none of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from harness.provenance import REPO_ROOT

# One line of "Where it grows": the summary's own record, built here.
from harness.runfiles.summary_records import Finding

# The harness's own scenario driver: its synthetic traffic (conversation histories),
# scheduler and idle-check records keep filling towards their bounds for minutes in
# every run, fixed or not. They drive the code under test; they are not it, so they
# are never named. A sampler names a file relative to the worker's folder when it is
# inside it, else by its absolute path (harness.worker.frames.short): both forms.
DRIVER_SITES = ("scenarios/workloads/",
                os.path.join(str(REPO_ROOT), "scenarios", "workloads") + os.sep)

# The scenarios' side as a whole: the driver and the adapters that call a release's
# cache for it (scenarios/sglang), which ask for what the code under test keeps.
SCENARIO_SIDE = ("scenarios/", os.path.join(str(REPO_ROOT), "scenarios") + os.sep)

__all__ = [
    "DRIVER_SITES",
    "SCENARIO_SIDE",
    "Finding",
    "Kept",
    "Site",
    "from_driver",
    "from_scenarios",
]


def from_driver(path: str) -> bool:
    """Whether a site or frame (``file:line``) is in the scenario driver."""
    return path.startswith(DRIVER_SITES)


def from_scenarios(path: str) -> bool:
    """Whether a frame (``file:line``) is on the scenarios' side: the driver or an adapter."""
    return path.startswith(SCENARIO_SIDE)


@dataclass(frozen=True)
class Site:
    """A source line whose retained allocations grew, over the allocation windows."""

    site: str
    stack: tuple[str, ...]
    per_h: float  # median over the windows it grew in, bytes per hour
    per_kop: float | None
    windows: int  # complete windows it grew in
    of: int  # complete windows in all
    avg_bytes: float | None = None  # per allocation kept: <= 512 B lives in pymalloc's arenas
    kept: Kept | None = None  # what the run kept of the tracked objects it makes
    # The first frame of its stack outside its folder: who asked (sites.own_line).
    own: str | None = None


@dataclass(frozen=True)
class Kept:
    """Of one tracked type a site makes: how many the run kept, against how many it
    would have kept had it kept all (the window's rate over the census's span)."""

    type: str
    grew: int
    span_s: float
    share: float  # grew / (made in the window, scaled to the span)
