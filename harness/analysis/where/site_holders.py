"""What holds a site's allocations, by name: the container a module names.

An allocation site is the line that allocates (``body = self.rfile.read(n)``);
the reader also wants what keeps it (``SEEN``). The windows record, per site,
the module-level container whose newest element the site made
(:mod:`harness.worker.heapgraph.module_holders`); the site's line names the one
seen in the most windows, the latest first.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from harness.analysis.where.common import Finding
from harness.runfiles.records import AllocLine, SiteHolder


def holder_of(windows: Sequence[AllocLine], site: str) -> SiteHolder | None:
    """The container holding what ``site`` made in most windows (the latest on a tie)."""
    seen: list[SiteHolder] = []
    for window in windows:
        for entry in window.get("sites") or ():
            if entry["site"] == site and "held_by" in entry:
                seen.append(entry["held_by"])
    if not seen:
        return None
    votes = Counter((h["module"], h["name"]) for h in seen)
    best = max(votes.values())
    return next(h for h in reversed(seen) if votes[(h["module"], h["name"])] == best)


def with_holder(finding: Finding, site: str, windows: Sequence[AllocLine]) -> Finding:
    """The line of ``site``, ending with the container that holds what it makes, if known."""
    holder = holder_of(windows, site)
    if holder is None:
        return finding
    text = (f"{finding.text}; held by {holder['name']}, a {holder['type']} of "
            f"{holder['entries']:,} entries in {holder['module']}")
    return dataclasses.replace(finding, text=text, owner=holder["name"])
