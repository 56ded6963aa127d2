"""Hooks for a program that ``leak-harness record`` runs; each is a no-op otherwise.

Import them behind a guard, so the program runs unchanged without the harness::

    try:
        from harness import record
    except ImportError:
        record = None

    if record:
        record.gauge("kv_free", lambda: pool.free_slots)   # sampled twice a second
        record.gauge("kv_lost", pool.lost_slots, at_idle=True)  # read at idle() only
    ...
    if record:
        record.ready()           # start-up is over: the warm-up counts from here
    ...
    if record:
        record.ops(len(batch))   # work done: rates per 1000 operations become available
        if not scheduler.running:
            record.idle()        # the books must add up now (budget 'kv_lost: <= 0')

This module imports nothing of the harness: the recorder (started from the
``sitecustomize`` hook in ``harness/record/site``) reads what it collects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

Reading = Callable[[], float]


@dataclass
class Hooks:
    """What the program told the recorder, and where idle readings go."""

    ops: int = 0
    gauges: dict[str, Reading] = field(default_factory=dict)
    idle_gauges: dict[str, Reading] = field(default_factory=dict)
    on_idle: Callable[[dict[str, float]], None] | None = None  # set while recording
    on_ready: Callable[[], None] | None = None  # set while recording
    scenario: str | None = None  # a calibrated scenario this program runs, if any


HOOKS = Hooks()
_count_lock = threading.Lock()


def ops(n: int = 1) -> None:
    """Count ``n`` operations of work done (requests, cache calls): the unit of /kop rates."""
    with _count_lock:
        HOOKS.ops += n


def gauge(name: str, reading: Reading, at_idle: bool = False) -> None:
    """Sample ``reading()`` as gauge ``name``; ``at_idle``: only when :func:`idle` is called."""
    (HOOKS.idle_gauges if at_idle else HOOKS.gauges)[name] = reading


def idle() -> None:
    """The program is idle now (nothing running): read the ``at_idle`` gauges."""
    sink = HOOKS.on_idle
    if sink is None or not HOOKS.idle_gauges:
        return
    values = {}
    for name, reading in list(HOOKS.idle_gauges.items()):
        try:
            values[name] = float(reading())
        except Exception:  # a broken gauge must not break the program
            continue
    sink(values)


def ready() -> None:
    """Start-up is over (imports, building the caches): the warm-up counts from now.

    Without it the warm-up counts from the interpreter's start, and start-up's
    own garbage and growth may land in the measured window.
    """
    if HOOKS.on_ready is not None:
        HOOKS.on_ready()


def scenario(name: str) -> None:
    """Declare that this program runs a harness scenario's workload, so its runs are
    judged against that scenario's calibrated healthy growth (as ``leak-harness run``)."""
    HOOKS.scenario = name


def recording() -> bool:
    """Whether a recorder runs in this process."""
    return HOOKS.on_idle is not None
