"""Python allocation sites, from the allocation windows (the ``allocations`` sampler).

The source line whose retained Python allocations grow, from tracemalloc's
windows (``AllocLine``): a site counts only if it grows in every complete
window, so a structure that was still filling in the first window and stopped
is not blamed; and only if the run kept what it makes (the window's type
census against the run's), so a healthy structure's turnover is not blamed.
A site's rate is its net: what its growing call paths kept less what its other
paths freed in the window, and a table that only re-allocates at its working size
(one untracked block a window, no larger later) is not a growing site. A site in
a library is named by the first frame outside the library's folder that asked for it.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence

from harness.analysis.where.common import Finding, Kept, Site, from_driver, from_scenarios
from harness.runfiles.records import AllocLine, AllocSite
from harness.units import format_rate

# A Python site growing at under this share of the fastest site's rate is not named:
# the healthy tree's churn sites (the LRU's dict, the pools' free lists, new nodes)
# grew 4 to 33 MB/h in the windows of 60 s zoo runs whose culprit kept 200+ MB/h.
MIN_OF_TOP = 0.25
TOP_SITES = 3
# A site whose tracked objects the run kept less than this share of is turnover: what
# it makes is freed later than the window could see (a node evicted after a minute).
TURNOVER_SHARE = 0.2
MIN_TYPED = 10  # tracked objects a site must make in a window for its types to count
# A window in which a site's shrinking paths freed at least this share of what its
# growing paths kept is turnover there: allocated about as much as freed.
CHURN_SHARE = 0.5
# A table re-allocated at its working size has the same size window after window; a
# growing dict doubles its table and a list adds an eighth per resize, and a leaking
# one resizes many times between windows tens of seconds apart.
TABLE_GROWTH = 1.25


def growing_sites(windows: Sequence[AllocLine]) -> list[Site]:
    """Sites that grew in every complete allocation window, largest first."""
    complete = [w for w in windows if w.get("sites") is not None]
    if not complete:
        return []
    seen: dict[str, list[tuple[float, float | None, tuple[str, ...], float | None]]] = {}
    more_blocks: set[str] = set()  # sites that kept more blocks, not only bigger ones
    for window in complete:
        span = float(window["t"]) - float(window["from_t"])
        ops = float(window.get("ops", 0))
        for entry in window["sites"]:
            net = net_bytes(entry)
            if net <= 0 or span <= 0:
                continue
            per_kop = net / ops * 1000.0 if ops > 0 else None
            count = entry.get("count") or 0
            size = entry["bytes"] / count if count > 0 else None
            if count > 0:
                more_blocks.add(entry["site"])
            seen.setdefault(entry["site"], []).append(
                (net / span * 3600.0, per_kop, tuple(entry.get("stack", ())), size)
            )
    sites = [
        Site(site, rates[0][2], statistics.median(r[0] for r in rates),
             _median([r[1] for r in rates]), len(rates), len(complete),
             _median([r[3] for r in rates]), kept_of(complete, site), own_line(site, rates[0][2]))
        for site, rates in seen.items()
        if len(rates) == len(complete) and not from_driver(site)
        # Bytes without blocks: what the site made died within the window and a
        # block it resized (an index tensor replaced by a longer one) was bigger.
        and site in more_blocks and not at_working_size(complete, site)
    ]
    sites = [s for s in sites if s.kept is None or s.kept.share >= TURNOVER_SHARE]
    top = max((s.per_h for s in sites), default=0.0)
    kept = [s for s in sites if s.per_h >= MIN_OF_TOP * top]
    return sorted(kept, key=lambda s: -s.per_h)[:TOP_SITES]


def net_bytes(entry: AllocSite) -> float:
    """What a site kept over a window: its growing paths' bytes less what its shrinking
    paths freed; 0 when they freed at least ``CHURN_SHARE`` of it (turnover: the tree
    makes a node's key on one request's path and frees it with the node on another)."""
    grown = float(entry["bytes"])
    freed = float(entry.get("freed", 0))
    return grown - freed if freed < CHURN_SHARE * grown else 0.0


def at_working_size(windows: Sequence[AllocLine], site: str) -> bool:
    """Whether the site is a container's table at its working size: in every window it
    grew by one block that is no object the collector tracks (a table, not the things
    in it), and that block is no larger in the last window than in the first.

    A window traces from its own start, so the first time a dict or list that stopped
    growing long ago re-allocates its table (a resize after deletions, at the same
    size), the whole table counts as new: +9 KB in a 1 s window reads as a 30 MB/h
    site. A container that grows re-allocates a larger table each time.
    """
    entries = [next((e for e in w["sites"] if e["site"] == site), None) for w in windows]
    found = [e for e in entries if e is not None]
    if len(found) < 2 or any((e.get("count") or 0) > 1 or e.get("types") for e in found):
        return False
    return net_bytes(found[-1]) <= TABLE_GROWTH * net_bytes(found[0])


def own_line(site: str, stack: Sequence[str]) -> str | None:
    """The first frame of the site's stack outside the site's folder, when the stack
    shows the whole way from the scenarios' side to it: the code under test that asked
    a library for what it keeps (a leak keeping ``req.key()`` allocates at the key's
    constructor, the line the tree's own turnover allocates at). None when the stack
    never leaves the folder, leaves it for the scenarios' side (the driver, a release's
    adapter: the site's own package is then the code under test), or ends before the
    scenarios' side is reached: a subclass that wraps the tree's call (a --target
    built on the reference) is no more the owner of the tree's turnover than the
    driver is, and a frame with nothing seen after it cannot be told from one."""
    frames = list(stack)
    if site not in frames:
        return None
    folder = os.path.dirname(site.rpartition(":")[0])
    after = frames[frames.index(site) + 1:]
    out = next((i for i, f in enumerate(after)
                if os.path.dirname(f.rpartition(":")[0]) != folder), None)
    if out is None or from_scenarios(after[out]):
        return None
    rest = after[out + 1:]
    entered = next((i for i, f in enumerate(rest) if from_scenarios(f)), None)
    if entered is None or any(os.path.dirname(f.rpartition(":")[0]) == folder
                              for f in rest[:entered]):
        return None
    return after[out]


def kept_of(windows: Sequence[AllocLine], site: str) -> Kept | None:
    """What the run kept of the site's tracked objects, from the last window whose type
    census began before it (a span of the run, not the window); None if unknown.

    The type kept most is the evidence: a leak keeps all it makes, a healthy
    structure's turnover (nodes evicted later, requests that finish) keeps none.
    """
    for window in reversed(windows):
        census_t, traced_t = window.get("census_from_t"), window.get("traced_from_t")
        if census_t is None or traced_t is None or census_t >= traced_t:
            continue
        entry = next((e for e in window["sites"] if e["site"] == site), None)
        kinds = (entry.get("types") or []) if entry is not None else []
        if sum(k["made"] for k in kinds) < MIN_TYPED:
            return None
        end = float(window["t"])
        scale = (end - float(census_t)) / max(end - float(traced_t), 1e-9)
        best = max(kinds, key=lambda k: k["grew"] / k["made"])
        share = best["grew"] / (best["made"] * scale)
        return Kept(best["type"], best["grew"], end - float(census_t), min(share, 1.0))
    return None


def site_finding(site: Site) -> Finding:
    rate = format_rate(site.per_h, "B/h")
    per_kop = f", {format_rate(site.per_kop, 'B/kop')}" if site.per_kop is not None else ""
    if site.own is not None:  # the code that asked for it leads; the library line follows
        named = f"{site.own} keeps what it allocates at {site.site}"
    else:
        caller = site_caller(site)
        named = f"{site.site}{f' (called from {caller})' if caller else ''} keeps what it allocates"
    text = (
        f"{named}: +{rate}{per_kop} retained, in "
        f"{site.windows} of {site.of} allocation windows (tracemalloc)"
    )
    if site.kept is not None:
        text += (f"; the {site.kept.type} objects it makes grew by {site.kept.grew:,} over "
                 f"{site.kept.span_s:.0f} s, {site.kept.share:.0%} of what it made")
    return Finding("python", "tracemalloc", text, site=site.own or site.site, stack=site.stack,
                   per_h=site.per_h, unit="B")


def site_caller(site: Site) -> str | None:
    """The first frame out of the site's file: a helper's caller is often the owner;
    None when that is the scenario driver (which calls the code under test, and is
    not it)."""
    filename = site.site.rpartition(":")[0]
    after = list(site.stack)[1:] if site.stack and site.stack[0] == site.site else []
    for frame in after:
        if frame.rpartition(":")[0] != filename:
            return None if from_driver(frame) else frame
    return None



def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None
