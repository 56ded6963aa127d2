"""From a scenario and a face's choices to a RunConfig: the one builder.

``leak-harness run``, ``check``, the pytest plugin and Python callers all come
through :func:`scenario_config`, so the same choices give the same run and the
same budgets whichever face asked. Each face parses its own input forms (flags,
marker keywords) and decides which of the scenario's durations applies; the
scenario's defaults and the budget rule live here.

The budget rule: an override replaces the scenario's budget of the same metric
and form (growth per hour, per 1000 operations, or a level) and keeps every
other declared budget, so overriding ``rss: 100 MB/h`` keeps ``cyclic_garbage``
and a declared ``rss: <= 2 GiB``. ``"<metric>: off"`` (or ``{metric: None}``)
drops every declared budget on that metric.

Long runs: from LONG_RUN_S on, a scenario's ``long_budgets`` replace its budgets
of the same metric and form before the overrides apply (a 30-minute run resolves
the heap to kilobytes per hour; a 20-second one to about a megabyte).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.api import Scenario
from harness.budgets import Budget
from harness.config import DEFAULT_HEARTBEAT_S, RunConfig, read_budget
from harness.errors import UsageError
from harness.units import parse_duration

OFF = "off"
# Runs at least this long are held to the scenario's long budgets: the fixed caches'
# heap resolution at 10 minutes is at most 0.4 MB/h (docs/benchmarks.md, Resolution).
LONG_RUN_S = 600.0
# Budgets as a face takes them: strings ("rss: 50 MB/h", "rss: off") or a mapping
# from metric to limit, where None switches the scenario's budgets on it off.
BudgetOverrides = Sequence[str] | Mapping[str, str | None]


def scenario_config(
    scenario: Scenario,
    rundir: Path,
    *,
    spec: str | None = None,
    duration_s: float | None = None,
    max_ops: int | None = None,
    warmup_s: float | None = None,
    inject: Sequence[str] = (),
    seed: int = 0,
    target: str | None = None,
    gc_mode: str | None = None,
    budgets: BudgetOverrides = (),
    budgets_from: str = "budgets",
    **limits: Any,
) -> RunConfig:
    """The RunConfig of one run of ``scenario``; None means the scenario's default.

    ``spec`` is how the scenario was named (a registry name or ``module:ATTR``),
    kept so the reproduce command names it the same way. ``limits`` are the
    supervisor's limits (``timeout_s``, ``heartbeat_s``, ``rss_ceiling``).
    Without a duration or an op count the run lasts the scenario's default
    duration. ``budgets_from`` names the overrides' source (``--budget``) in errors.
    """
    if duration_s is None and max_ops is None:
        duration_s = duration_from("the scenario's default duration", scenario.default_duration)
    limits.setdefault("heartbeat_s", DEFAULT_HEARTBEAT_S)
    declared = declared_budgets(scenario, duration_s)
    merged = merge_budgets(declared, budgets, budgets_from)
    return RunConfig(
        scenario=spec or scenario.name,
        rundir=str(rundir),
        duration_s=duration_s,
        max_ops=max_ops,
        warmup_s=duration_from("the scenario's warm-up", scenario.warmup) if warmup_s is None
        else warmup_s,
        inject=tuple(inject),
        seed=seed,
        target=target,
        gc_mode=gc_mode or scenario.gc_mode,
        budgets=merged,
        # A user's cache need not publish the reference cache's gauges, and no cache
        # need publish those of an optional call (the scenario's if_published).
        skippable_budgets=tuple(b for b in merged if b.text in declared
                                and (target or b.metric in scenario.if_published)),
        scenario_defaults={"warmup_s": duration_from("the scenario's warm-up", scenario.warmup),
                           "gc_mode": scenario.gc_mode, "budgets": list(declared)},
        **limits,
    )


def declared_budgets(scenario: Scenario, duration_s: float | None) -> tuple[str, ...]:
    """The scenario's budgets for a run of ``duration_s``: its long budgets in place of
    the same metric's and form's from LONG_RUN_S on (a run bounded by ops alone: not)."""
    if duration_s is None or duration_s < LONG_RUN_S or not scenario.long_budgets:
        return scenario.budgets
    merged = merge_budgets(scenario.budgets, scenario.long_budgets, "the scenario's long budgets")
    return tuple(budget.text for budget in merged)


def merge_budgets(
    declared: Sequence[str], overrides: BudgetOverrides, where: str = "budgets"
) -> tuple[Budget, ...]:
    """The scenario's budgets with the overrides applied (the rule in the module doc)."""
    merged: dict[tuple[str, str, str], Budget] = {}
    for text in declared:
        budget = read_budget(text, "the scenario's budgets")
        merged[(budget.metric, budget.kind, budget.per)] = budget
    for text in override_texts(overrides, where):
        metric, _, limit = text.partition(":")
        if limit.strip().lower() == OFF:
            merged = {key: kept for key, kept in merged.items() if key[0] != metric.strip()}
            continue
        budget = read_budget(text, where)
        merged[(budget.metric, budget.kind, budget.per)] = budget
    return tuple(merged.values())


def override_texts(overrides: BudgetOverrides, where: str = "budgets") -> list[str]:
    """Overrides as ``"metric: limit"`` strings; a mapping's None becomes ``off``."""
    if isinstance(overrides, str):
        raise UsageError(f"{where} must be a list of strings, not the string {overrides!r}.")
    if isinstance(overrides, Mapping):
        return [f"{metric}: {OFF if limit is None else limit}" for metric, limit in
                overrides.items()]
    return list(overrides)


def duration_from(where: str, text: str) -> float:
    """Seconds from a human duration; a UsageError naming ``where`` if malformed."""
    if text.strip().startswith("-"):
        raise UsageError(f"{where}: a duration must be positive, got {text!r}.")
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"{where}: {exc}") from None
