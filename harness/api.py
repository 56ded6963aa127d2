"""The public API between scenarios and the measuring engine.

A scenario module (``scenarios/<name>.py``, or any importable ``module:attr``)
exposes one :class:`Scenario`. The worker process calls ``scenario.build(ctx)``
once, then ``workload.step()`` in a loop until the run's duration or op count is
reached, sampling between steps. Nothing here imports ``refcache``: a scenario
builds its cache through a factory named by a ``"module:callable"`` string, which
the user may replace with ``--target``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

Gauge = Callable[[], float]

# Targets the harness ships, by name: ``--target sglang`` runs a scenario on the
# installed SGLang release's own caches (``scenarios/sglang``). Named by string:
# nothing here imports them.
BUILTIN_TARGETS: dict[str, str] = {"sglang": "scenarios.sglang:make"}
_TARGET_FORM = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def is_target_spec(spec: str) -> bool:
    """``module:callable`` or a built-in target's name: the form a target is given in
    (whether it imports is the worker's to say, before the run starts)."""
    return spec in BUILTIN_TARGETS or bool(_TARGET_FORM.match(spec))


class Workload(Protocol):
    """A running workload, driven by the worker's main loop."""

    def step(self) -> int:
        """Run one short batch of operations (milliseconds); return how many ran."""
        ...

    def gauges(self) -> Mapping[str, Gauge]:
        """Application gauges to sample, by name (e.g. ``work_list``)."""
        ...

    def close(self) -> None:
        """Release everything the workload started (peer ranks, threads)."""
        ...

    # Optional: ``notes() -> Mapping[str, Any]``, facts for "Where it grows" that
    # are not numbers, read once when the loop ends (JSON values). The scenarios'
    # workloads give ``unreleased_locks``: ``nodes`` still locked at the last idle
    # moment and the ``sites`` (``site``, ``nodes``) that locked them.


@dataclass(frozen=True)
class RunContext:
    """What a scenario needs to build its workload for one run."""

    seed: int
    inject: tuple[str, ...] = ()
    target: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    rundir: Path | None = None

    def factory(self, default: str) -> Callable[..., Any]:
        """The cache factory: ``--target`` if given, else the scenario's default."""
        return load_callable(self.target or default)


@dataclass(frozen=True)
class Scenario:
    """A named workload with its budgets and the regressions it must catch."""

    name: str
    description: str
    build: Callable[[RunContext], Workload]
    regressions: tuple[str, ...] = ()
    default_duration: str = "60s"
    check_duration: str = "20s"
    warmup: str = "2s"
    budgets: tuple[str, ...] = ()
    gc_mode: str = "default"
    # Budgets that replace those of the same metric and form in runs of LONG_RUN_S
    # (harness.configure) or longer: a long run resolves far smaller growth, and holds
    # the scenario to a tighter promise where its healthy growth was measured that long.
    long_budgets: tuple[str, ...] = ()
    # What ``build`` offers the cache factory (sizes, shapes: the cache family), so a
    # ``--target`` can say which scenarios it cannot run before any worker starts.
    cache_options: Mapping[str, Any] = field(default_factory=dict)
    # Metrics whose declared budgets are judged whenever the run records them and
    # skipped, with the reason said, when it does not: a gauge a cache publishes only
    # with an optional call (``stale_request_entries`` needs ``request_tables()``).
    if_published: tuple[str, ...] = ()


class TargetRejected(Exception):
    """Raised by a scenario's ``build`` when a ``--target`` cannot run it (methods the
    scenario calls are missing): the worker refuses the run with this sentence, before
    any workload, and the face exits 2, as for any other bad input."""


def load_callable(spec: str) -> Callable[..., Any]:
    """Import ``"package.module:attr"`` (or a built-in target's name) and return the
    attribute."""
    module_name, sep, attr = BUILTIN_TARGETS.get(spec, spec).partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected 'module:callable', got {spec!r}")
    obj = getattr(importlib.import_module(module_name), attr)
    if not callable(obj):
        raise TypeError(f"{spec!r} is not callable")
    return obj  # type: ignore[no-any-return]
