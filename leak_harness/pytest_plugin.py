"""pytest plugin: leak tests with budgets, run in real workers.

    @pytest.mark.leak(scenario="mamba-lru", budgets=["rss: 50 MB/h"])
    def test_mamba_cache_does_not_leak(leak_result):
        pass  # the plugin judged the run before the body: a leak failed the test

A test carrying the ``leak`` marker gets its scenario run once. Its duration
comes from the marker, ``--leak-duration``, the ``leak_duration`` ini option or
the scenario's check duration; run folders go under ``--leak-results`` or
``leak_results`` (the command line wins over the ini options, as in
pytest-memray). The run fails the test with the verdict, the reasons, "Where it
grows" and the path of the HTML report unless the verdict is the one the marker
expects (``expect``: "pass" by default, which lets ``suspicious`` pass unless
``--leak-strict`` or ``leak_strict``; "fail" for a test that proves a regression
is caught). The ``leak_run`` fixture runs scenarios from the test body instead.

Leak tests take seconds to minutes, so they run only when selected with
``-m leak`` (or ``--leak``); a plain ``pytest`` run skips them.
"""

from __future__ import annotations

import inspect
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.calibration import short_run_warning
from harness.api import BUILTIN_TARGETS, Scenario, is_target_spec
from harness.config import GC_MODES
from harness.configure import BudgetOverrides, duration_from, scenario_config
from harness.errors import UsageError
from harness.parent.runner import RunOutcome, run
from harness.registry import check_injections, load_scenario
from harness.runfiles.names import REPORT_FILE
from harness.verdicts import FAILING, INTERRUPTED, PASS, PASSING, SUSPICIOUS, VERDICTS

MARKER_HELP = (
    "leak(scenario, budgets=(), inject=(), duration=None, seed=0, gc_mode=None, expect='pass'): "
    "run a leak-harness scenario in a worker and judge it against its budgets"
)


DEFAULT_RESULTS = "results/pytest"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("leak-harness")
    group.addoption("--leak", action="store_true", help="run tests marked 'leak' too")
    group.addoption("--leak-duration", default=None,
                    help="duration of each leak test (90s, 10m); ini: leak_duration")
    group.addoption("--leak-results", default=None,
                    help=f"folder for run folders (default {DEFAULT_RESULTS}); ini: leak_results")
    group.addoption("--leak-strict", action="store_true", default=None,
                    help="a suspicious verdict fails a test expecting pass; ini: leak_strict")
    # The project's defaults, as pytest-memray takes them; the command line wins.
    parser.addini("leak_duration", "duration of each leak test unless the marker or "
                  "--leak-duration says (90s, 10m)", default=None)
    parser.addini("leak_results", "folder for the leak tests' run folders",
                  default=DEFAULT_RESULTS)
    parser.addini("leak_strict", "a suspicious verdict fails a test expecting pass",
                  type="bool", default=False)


def option(config: pytest.Config, name: str) -> Any:
    """``--leak-<name>`` when given on the command line, else the ``leak_<name>`` ini value."""
    given = config.getoption(f"--leak-{name}")
    return given if given is not None else config.getini(f"leak_{name}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--leak") or "leak" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="leak test: select it with -m leak or --leak")
    for item in items:
        if item.get_closest_marker("leak") is not None:
            item.add_marker(skip)


class LeakRunner:
    """Runs scenarios for one test; each run gets its own folder."""

    def __init__(self, node: pytest.Item, results: Path, duration: str | None) -> None:
        self.base = results / re.sub(r"[^\w.-]+", "_", node.nodeid)
        self.duration = duration
        self.runs = 0
        self.node = node

    def say(self, line: str) -> None:
        """A line on the terminal, under the test's id (not a Python warning, which a
        project's ``filterwarnings = error`` would turn into a failure)."""
        reporter = self.node.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"\n{self.node.nodeid}: {line}", yellow=True)

    def __call__(
        self,
        scenario: str,
        budgets: BudgetOverrides = (),
        inject: Sequence[str] = (),
        duration: str | None = None,
        seed: int = 0,
        gc_mode: str | None = None,
        target: str | None = None,
    ) -> RunOutcome:
        spec = check_arguments(scenario, budgets, inject, duration, seed, gc_mode, target)
        self.runs += 1
        config = scenario_config(
            spec,
            self.base / f"run{self.runs}",
            spec=scenario,
            duration_s=duration_from("duration", duration or self.duration or spec.check_duration),
            inject=inject,
            seed=seed,
            gc_mode=gc_mode,
            target=target,
            budgets=budgets,
            budgets_from="the leak marker's budgets",
        )
        if config.path.exists():
            shutil.rmtree(config.path)  # a re-run of the same test starts clean
        warning = short_run_warning(config.duration_s, config.warmup_s,
                                    "duration=" if duration else "--leak-duration"
                                    if self.duration else f"{scenario}'s check duration")
        if warning is not None:
            self.say(warning)
        outcome = run(config)
        _write_report(outcome)
        if outcome.verdict == INTERRUPTED:
            raise KeyboardInterrupt  # the run was analysed; the session stops as asked
        return outcome


def check_arguments(scenario: Any, budgets: Any, inject: Any, duration: Any, seed: Any,
                    gc_mode: Any, target: Any) -> Scenario:
    """The scenario, once every argument has the type and a name the run takes: a marker
    typo is one sentence (a UsageError) before any worker starts, not a plugin traceback
    or a worker that refuses it seconds later."""
    if not isinstance(scenario, str):
        raise UsageError(f"scenario must be a string (a scenario name or 'module:ATTR'), "
                         f"not {scenario!r}.")
    spec = load_scenario(scenario)  # an unknown name: its did-you-mean sentence
    if duration is not None and not isinstance(duration, str):
        raise UsageError(f"duration must be a string like '20s' or '10m', not {duration!r}.")
    if isinstance(inject, str) or not isinstance(inject, (list, tuple)) or not all(
            isinstance(name, str) for name in inject):
        raise UsageError(f"inject must be a list of regression names, not {inject!r}.")
    check_injections(spec, tuple(inject))  # one the scenario does not know: its sentence
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UsageError(f"seed must be an integer, not {seed!r}.")
    if gc_mode is not None and gc_mode not in GC_MODES:
        raise UsageError(f"gc_mode must be one of {', '.join(GC_MODES)}, not {gc_mode!r}.")
    if target is not None and not (isinstance(target, str) and is_target_spec(target)):
        raise UsageError(f"target must be 'module:callable' or a built-in target "
                         f"({', '.join(BUILTIN_TARGETS)}), not {target!r}.")
    if isinstance(budgets, Mapping):
        if not all(isinstance(k, str) and (v is None or isinstance(v, str))
                   for k, v in budgets.items()):
            raise UsageError(f"budgets as a mapping go from a metric to a limit string or "
                             f"None, not {dict(budgets)!r}.")
    elif not isinstance(budgets, str) and not (isinstance(budgets, (list, tuple)) and all(
            isinstance(text, str) for text in budgets)):  # a string: override_texts says
        raise UsageError(f"budgets must be a list of strings like 'rss: 50 MB/h', "
                         f"not {budgets!r}.")
    return spec


def check_expect(expect: Any) -> None:
    """``expect`` is pass, fail or one verdict (refused at setup, not after the run)."""
    if not isinstance(expect, str) or expect not in (PASS, "fail", *VERDICTS):
        raise UsageError(f"expect must be 'pass', 'fail' or one verdict "
                         f"({', '.join(VERDICTS)}), not {expect!r}.")


def _write_report(outcome: RunOutcome) -> Path:
    from reports.run import write_run_report  # lazy: matplotlib stays off the run path

    return write_run_report(outcome.loaded)


def explain(outcome: RunOutcome) -> str:
    """What a failing leak test prints: verdict, reasons, where it grows, report path."""
    summary = outcome.summary
    lines = [f"{summary.scenario}: verdict {outcome.verdict}"]
    lines += [f"  - {reason}" for reason in outcome.reasons]
    where = summary.where_it_grows()
    if where:
        lines += ["  where it grows:", *(f"    - {line}" for line in where)]
    lines += [f"  cycle: {c}" for c in summary.cycle_paths()[:3]]
    report = outcome.rundir / REPORT_FILE
    lines.append(f"  report: {report if report.exists() else outcome.rundir}")
    return "\n".join(lines)


def judge(
    outcome: RunOutcome, expect: str, item: pytest.Item | None = None, strict: bool = False
) -> None:
    """Fail the test unless the verdict is as expected; the build-failing rule is the
    CLI's: ``expect="pass"`` accepts ``suspicious`` (said on the terminal, not hidden)
    unless ``strict`` (``--leak-strict``, ``leak_strict``, as the CLI's ``--strict``)."""
    if expect == "fail":
        ok = outcome.verdict in FAILING
    elif expect == PASS:
        ok = outcome.verdict == PASS if strict else outcome.verdict in PASSING
    else:
        ok = outcome.verdict == expect
    if not ok:
        pytest.fail(f"expected {expect}, got {outcome.verdict}\n{explain(outcome)}", pytrace=False)
    if outcome.verdict == SUSPICIOUS and expect == PASS and item is not None:
        reporter = item.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            first = outcome.reasons[0] if outcome.reasons else "no reason recorded"
            reporter.write_line(f"\n{item.nodeid}: suspicious, not failing: {first}",
                                yellow=True)


@pytest.fixture
def leak_run(request: pytest.FixtureRequest) -> LeakRunner:
    """Run scenarios from the test body: ``outcome = leak_run("mamba-lru", budgets=[...])``."""
    config = request.config
    return LeakRunner(
        request.node,
        Path(option(config, "results") or DEFAULT_RESULTS),
        option(config, "duration") or None,
    )


@pytest.fixture
def leak_result(request: pytest.FixtureRequest, leak_run: LeakRunner) -> RunOutcome:
    """Run the scenario named by the test's ``leak`` marker and judge it."""
    marker = request.node.get_closest_marker("leak")
    if marker is None:
        raise pytest.UsageError("the leak_result fixture needs @pytest.mark.leak(scenario=...)")
    kwargs: dict[str, Any] = dict(marker.kwargs)
    expect = kwargs.pop("expect", PASS)  # judged in pytest_runtest_call: a miss is a failure
    scenario = kwargs.pop("scenario", marker.args[0] if marker.args else None)
    if scenario is None:
        raise pytest.UsageError("@pytest.mark.leak needs scenario=NAME")
    known = set(inspect.signature(LeakRunner.__call__).parameters) - {"self", "scenario"}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        pytest.fail(f"@pytest.mark.leak: unknown option {unknown[0]!r}; known: expect, scenario, "
                    f"{', '.join(sorted(known))}.", pytrace=False)
    try:
        check_expect(expect)
        return leak_run(scenario, **kwargs)
    except UsageError as exc:  # a typo in the marker: its sentence, not the plugin's stack
        problem = exc.message
    # Failed outside the except block: inside, pytest printed the sentence twice (the
    # UsageError, then "during handling of the above exception", the failure).
    pytest.fail(f"@pytest.mark.leak: {problem}", pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """Judge a ``leak`` test's run before its body: a wrong verdict fails the test."""
    marker = item.get_closest_marker("leak")
    outcome = getattr(item, "funcargs", {}).get("leak_result")
    if marker is not None and isinstance(outcome, RunOutcome):
        judge(outcome, marker.kwargs.get("expect", "pass"), item,
              strict=bool(option(item.config, "strict")))
