"""The frozen configuration of one run, as the parent hands it to the worker.

The parent writes it to ``<rundir>/config.json``; the worker reads it back and
copies it into the samples header, so every result file says how it was made.
Budgets are held parsed; the file keeps each as the text it was typed as, and
:func:`read_budget` is the one place a budget's text is read.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.budgets import Budget, parse_budget
from harness.errors import UsageError
from harness.worker.sampler_names import ATTRIBUTION_SAMPLERS, SAMPLER_NAMES

GC_MODES = ("default", "server", "off")
# Without an explicit --timeout a run may overrun its duration by this much
# (start-up, torch import, final garbage window on a big heap) before it is "hung".
TIMEOUT_SLACK_S = 120.0
DEFAULT_HEARTBEAT_S = 30.0  # a full collection of a huge heap can take seconds
# Runs bounded only by an op count get this wall-clock limit by default.
OPS_ONLY_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class SamplerIntervals:
    """Seconds between samples, per sampler (see ``harness/worker/samplers``)."""

    rss_s: float = 0.1
    uss_s: float = 1.0  # USS reads /proc/<pid>/smaps: too costly for 10 Hz
    heap_s: float = 0.1  # mallinfo2 and the block count: cheap enough for 10 Hz
    tensors_s: float = 1.0  # the tensor census walks every object: too costly for 10 Hz
    gc_flush_s: float = 1.0
    gauges_s: float = 0.5
    objects_s: float = 15.0  # walks every live object
    garbage_s: float = 30.0  # a full collection with DEBUG_SAVEALL
    alloc_window_s: float = 2.0  # each of the two tracemalloc windows (about 2x slower)
    progress_s: float = 1.0

    def validate(self) -> None:
        for f in fields(self):
            if not getattr(self, f.name) > 0:
                raise UsageError(f"sampler interval {f.name} must be positive.")


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one run; immutable once the worker starts."""

    scenario: str
    rundir: str
    duration_s: float | None = 60.0
    max_ops: int | None = None
    warmup_s: float = 2.0
    inject: tuple[str, ...] = ()
    seed: int = 0
    target: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    gc_mode: str = "default"
    ballast_objects: int = 2_000_000  # GC-tracked objects for gc_mode "server"
    timeout_s: float | None = None  # None: duration + TIMEOUT_SLACK_S
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    rss_ceiling: int | None = None  # bytes; None: half the machine's memory
    intervals: SamplerIntervals = field(default_factory=SamplerIntervals)
    samplers: tuple[str, ...] = SAMPLER_NAMES
    budgets: tuple[Budget, ...] = ()
    # Of ``budgets``, those skipped (with a reason) when the run has no such metric:
    # the scenario's declared budgets on a user's target (``--target``).
    skippable_budgets: tuple[Budget, ...] = ()
    # What the scenario itself would run with (``warmup_s``, ``gc_mode``, ``budgets`` as
    # texts), so the reproduce command names only what differs from it.
    scenario_defaults: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._check_limits()
        if self.gc_mode not in GC_MODES:
            raise UsageError(f"unknown GC mode {self.gc_mode!r}; use one of {', '.join(GC_MODES)}.")
        unknown = sorted(set(self.samplers) - set(SAMPLER_NAMES))
        if unknown:
            raise UsageError(f"unknown sampler {unknown[0]!r}; known: {', '.join(SAMPLER_NAMES)}.")
        self.intervals.validate()
        try:
            json.dumps(dict(self.options))
        except (TypeError, ValueError) as exc:
            raise UsageError(f"scenario options must be plain JSON values ({exc}).") from None

    def _check_limits(self) -> None:
        if self.duration_s is None and self.max_ops is None:
            raise UsageError("a run needs a duration or an op count.")
        if self.duration_s is not None and not self.duration_s > 0:
            raise UsageError(
                f"the duration (--duration) must be positive, got {self.duration_s:g} s.")
        if self.max_ops is not None and self.max_ops <= 0:
            raise UsageError(f"the op count (--ops) must be positive, got {self.max_ops}.")
        if self.warmup_s < 0 or not self.heartbeat_s > 0:
            raise UsageError("warm-up must be >= 0 and the heartbeat limit positive.")
        if self.duration_s is not None and self.warmup_s >= self.duration_s:
            raise UsageError(
                f"the warm-up ({self.warmup_s:g} s) must be shorter than the duration "
                f"({self.duration_s:g} s): nothing would be measured."
            )
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise UsageError(f"the timeout (--timeout) must be positive, got {self.timeout_s:g} s.")
        if self.rss_ceiling is not None and self.rss_ceiling <= 0:
            raise UsageError(
                f"the RSS ceiling (--rss-ceiling) must be positive, got {self.rss_ceiling}.")

    @property
    def path(self) -> Path:
        return Path(self.rundir)

    @property
    def wall_timeout_s(self) -> float:
        """The wall-clock limit the parent enforces."""
        if self.timeout_s is not None:
            return self.timeout_s
        if self.duration_s is None:
            return OPS_ONLY_TIMEOUT_S
        return self.duration_s + TIMEOUT_SLACK_S

    @property
    def budget_texts(self) -> tuple[str, ...]:
        """The budgets as typed: what config.json and the samples header keep."""
        return tuple(b.text for b in self.budgets)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["options"] = dict(self.options)
        data["scenario_defaults"] = dict(self.scenario_defaults)
        for key in ("inject", "samplers"):
            data[key] = list(data[key])
        for key in BUDGET_FIELDS:
            data[key] = [b.text for b in getattr(self, key)]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        known = {f.name for f in fields(cls)}
        extra = sorted(set(data) - known)
        if extra:
            raise UsageError(f"unknown run config field {extra[0]!r}.")
        values = dict(data)
        values["intervals"] = SamplerIntervals(**values.get("intervals", {}))
        for key in ("inject", "samplers"):
            if key in values:
                values[key] = tuple(values[key])
        for key in BUDGET_FIELDS:
            if key in values:
                values[key] = read_budgets(map(str, values[key]), f"run config {key}")
        return cls(**values)

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> RunConfig:
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))


BUDGET_FIELDS = ("budgets", "skippable_budgets")


def read_budget(text: str, where: str) -> Budget:
    """The budget ``text`` says; a UsageError naming ``where`` (its source) if malformed.

    Every face and the config file come through here, so a budget is parsed once,
    where it enters, and travels parsed from then on.
    """
    try:
        return parse_budget(text)
    except ValueError as exc:
        raise UsageError(f"{where}: {exc}") from None


def read_budgets(texts: Iterable[str], where: str) -> tuple[Budget, ...]:
    """:func:`read_budget` of each text, in order."""
    return tuple(read_budget(text, where) for text in texts)


def seconds_text(value: float) -> str:
    """A duration the CLI parses back exactly (``90s``, ``0.5s``)."""
    return f"{value:g}s"


def reproduce_command(config: RunConfig) -> str:
    """The ``leak-harness run`` command line that repeats this run, naming only what
    differs from the scenario's own defaults (all of it for a config that lacks them).

    Scenario options and sampler intervals have no CLI flags; runs that change
    them come from Python (pytest, ``check``) and are repeated from there.
    """
    defaults = config.scenario_defaults
    argv = ["leak-harness", "run", config.scenario]
    if config.duration_s is not None:
        argv += ["--duration", seconds_text(config.duration_s)]
    if config.max_ops is not None:
        argv += ["--ops", str(config.max_ops)]
    if config.warmup_s != defaults.get("warmup_s"):
        argv += ["--warmup", seconds_text(config.warmup_s)]
    for name in config.inject:
        argv += ["--inject", name]
    argv += ["--seed", str(config.seed)]
    if config.gc_mode != defaults.get("gc_mode"):
        argv += ["--gc-mode", config.gc_mode]
    if config.timeout_s is not None:
        argv += ["--timeout", seconds_text(config.timeout_s)]
    if config.heartbeat_s != DEFAULT_HEARTBEAT_S:
        argv += ["--heartbeat", seconds_text(config.heartbeat_s)]
    if config.rss_ceiling is not None:
        argv += ["--rss-ceiling", f"{config.rss_ceiling}B"]
    if config.target:
        argv += ["--target", config.target]
    for text in _budget_flags(config):
        argv += ["--budget", text]
    if not set(ATTRIBUTION_SAMPLERS) & set(config.samplers):
        argv += ["--no-attribution"]
    return shlex.join(argv)


def _budget_flags(config: RunConfig) -> list[str]:
    """``--budget`` values that turn the scenario's budgets into the run's: the changed
    or added ones, and ``metric: off`` for a declared metric the run dropped."""
    declared = tuple(map(str, config.scenario_defaults.get("budgets", ())))
    flags = [b.text for b in config.budgets
             if b not in config.skippable_budgets  # declared ones come back from the scenario
             and b.text not in declared]
    kept = {b.metric for b in config.budgets}
    dropped = dict.fromkeys(read_budget(t, "the scenario's budgets").metric for t in declared)
    return flags + [f"{metric}: off" for metric in dropped if metric not in kept]
