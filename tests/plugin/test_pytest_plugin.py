"""The pytest plugin, exercised in a child pytest run on the engine's fixture scenarios."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

HEALTHY = "tests.harness.fixtures.scenarios:HEALTHY"
LEAKY = "tests.harness.fixtures.scenarios:LEAKY"

# The child loads the plugin from this checkout by its module name, so it runs
# without the installed entry point too (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1, a
# plain checkout). The entry point, where installed, is blocked first: pytest
# refuses one module registered under two names ("leak_harness" and
# "leak_harness.pytest_plugin"). The same pair is in the outer run's addopts.
PLUGIN = ("-p", "no:leak_harness", "-p", "leak_harness.pytest_plugin", "-p", "no:cacheprovider")

TEST_FILE = f"""
import pytest

@pytest.mark.leak(scenario="{HEALTHY}", budgets=["rss: 50 MB/h"], duration="3s")
def test_healthy(leak_result):
    assert leak_result.verdict == "pass"

@pytest.mark.leak(scenario="{LEAKY}", budgets=["kept: <= 100"], duration="4s")
def test_leaky_fails_with_an_explanation(leak_result):
    pass
"""


def test_leak_tests_are_skipped_unless_selected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TEST_FILE)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(skipped=2)


@pytest.mark.integration
def test_leak_marker_runs_a_worker_and_explains_failure(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.harness.conftest import ROOT

    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(TEST_FILE)
    results = pytester.path / "leak-results"
    result = pytester.runpytest(*PLUGIN, "--leak", "--leak-results", str(results))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*expected pass, got leak*", "*verdict leak*", "*report:*"])
    assert list(results.rglob("report.html"))


TYPOS = f"""
import pytest

@pytest.mark.leak(scenario="radix-stedy", duration="3s")
def test_scenario_typo(leak_result):
    pass

@pytest.mark.leak(scenario="{HEALTHY}", duration="5 parsecs")
def test_duration_typo(leak_result):
    pass

@pytest.mark.leak(scenario="{HEALTHY}", budget=["rss: 5 MB/h"])
def test_option_typo(leak_result):
    pass
"""


def test_marker_typos_fail_with_one_sentence_and_no_plugin_traceback(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.harness.conftest import ROOT

    monkeypatch.syspath_prepend(str(ROOT))
    pytester.makepyfile(TYPOS)
    # -rN: no short summary, which repeats each error's first line cut to the
    # terminal's width (whole on a wide CI terminal, so counted twice there).
    result = pytester.runpytest(*PLUGIN, "--leak", "--leak-results", str(pytester.path / "r"),
                                "-rN")
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines([
        "*@pytest.mark.leak: unknown scenario 'radix-stedy'*",
        "*@pytest.mark.leak: * '5 parsecs'*",
        "*@pytest.mark.leak: unknown option 'budget'; known: *budgets*",
    ])
    assert "pytest_plugin.py" not in result.stdout.str()
    # Once each: not the UsageError and then the failure raised while handling it.
    assert result.stdout.str().count("unknown scenario 'radix-stedy'") == 1
    assert "During handling of the above exception" not in result.stdout.str()


@pytest.mark.parametrize(("verdict", "expect", "fails"), [
    ("pass", "pass", False), ("suspicious", "pass", False), ("leak", "pass", True),
    ("interrupted", "pass", True), ("error", "pass", True), ("leak", "fail", False),
    ("crashed", "fail", False), ("interrupted", "fail", True), ("suspicious", "fail", True),
])
def test_a_leak_test_fails_the_build_by_the_same_rule_as_the_cli(
    tmp_path: pytest.TempPathFactory, verdict: str, expect: str, fails: bool
) -> None:
    from pathlib import Path

    from harness.parent.runner import RunOutcome
    from harness.runfiles.summary import load_summary
    from leak_harness.pytest_plugin import judge
    from tests.reports.synth import write_summary_only

    rundir = write_summary_only(Path(str(tmp_path)) / "run", "demo", (), verdict)
    outcome = RunOutcome(verdict, rundir, None, load_summary(rundir))
    if fails:
        with pytest.raises(pytest.fail.Exception, match=f"expected {expect}, got {verdict}"):
            judge(outcome, expect)
    else:
        judge(outcome, expect)


OWN_CACHE = """
import pytest

@pytest.mark.leak(scenario="radix-steady", target="examples.own_cache:make", duration="8s")
def test_own_cache_holds_its_budgets(leak_result):
    pass

@pytest.mark.leak(scenario="radix-steady", target="examples.own_cache:mkae", duration="8s")
def test_target_typo(leak_result):
    pass
"""


@pytest.mark.integration
def test_a_leak_test_outside_the_repository_runs_the_scenarios_on_a_users_cache(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.harness.conftest import ROOT

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # where examples/ lives, as a user's package
    monkeypatch.syspath_prepend(str(ROOT))
    pytester.makepyfile(OWN_CACHE)
    result = pytester.runpytest(*PLUGIN, "--leak", "--leak-results", str(pytester.path / "r"))
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.leak: the target 'examples.own_cache:mkae' "
                                 "cannot be loaded*"])


@pytest.mark.integration
def test_ini_options_give_the_defaults_and_the_command_line_wins(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from tests.harness.conftest import ROOT

    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeini("[pytest]\nleak_results = ini-results\nleak_duration = 10m\n")
    pytester.makepyfile(f"""
import pytest

@pytest.mark.leak(scenario="{HEALTHY}", budgets=["rss: 50 MB/h"])
def test_healthy(leak_result):
    pass
""")
    result = pytester.runpytest(*PLUGIN, "--leak", "--leak-duration", "3s")
    result.assert_outcomes(passed=1)
    (config,) = (pytester.path / "ini-results").rglob("config.json")  # the ini's folder
    assert json.loads(config.read_text())["duration_s"] == 3.0  # the command line's length


def test_strict_fails_a_suspicious_run_as_the_cli_does(tmp_path: pytest.TempPathFactory) -> None:
    from pathlib import Path

    from harness.parent.runner import RunOutcome
    from harness.runfiles.summary import load_summary
    from leak_harness.pytest_plugin import judge
    from tests.reports.synth import write_summary_only

    rundir = write_summary_only(Path(str(tmp_path)) / "run", "demo", (), "suspicious")
    outcome = RunOutcome("suspicious", rundir, None, load_summary(rundir))
    judge(outcome, "pass")
    with pytest.raises(pytest.fail.Exception, match="expected pass, got suspicious"):
        judge(outcome, "pass", strict=True)


WRONG_TYPES = f"""
import pytest

@pytest.mark.leak(scenario=123)
def test_scenario_not_a_string(leak_result):
    pass

@pytest.mark.leak(scenario="{HEALTHY}", duration=-5)
def test_duration_a_number(leak_result):
    pass

@pytest.mark.leak(scenario="{HEALTHY}", expect="maybe")
def test_expect_unknown(leak_result):
    pass

@pytest.mark.leak(scenario="tests.harness.fixtures.scenarios:TOGGLE", inject=["nope"])
def test_inject_unknown(leak_result):
    pass

@pytest.mark.leak(scenario="{HEALTHY}", seed="abc")
def test_seed_a_string(leak_result):
    pass

@pytest.mark.leak(scenario="{HEALTHY}", target="mycache.cache")
def test_target_not_module_callable(leak_result):
    pass
"""


def test_marker_arguments_of_a_wrong_type_or_name_fail_at_setup_before_any_worker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RELIABILITY-3 cases 117-118: plugin tracebacks, a 10 s run before expect="maybe"
    failed, a worker started for inject=["nope"], seed="abc" accepted."""
    from tests.harness.conftest import ROOT

    monkeypatch.syspath_prepend(str(ROOT))
    pytester.makepyfile(WRONG_TYPES)
    results = pytester.path / "r"
    result = pytester.runpytest(*PLUGIN, "--leak", "--leak-results", str(results), "-rN")
    result.assert_outcomes(errors=6)
    result.stdout.fnmatch_lines([
        "*@pytest.mark.leak: scenario must be a string (a scenario name or 'module:ATTR'), "
        "not 123.",
        "*@pytest.mark.leak: duration must be a string like '20s' or '10m', not -5.",
        "*@pytest.mark.leak: expect must be 'pass', 'fail' or one verdict (*), not 'maybe'.",
        "*@pytest.mark.leak: scenario 'toggle' has no regression 'nope'*",
        "*@pytest.mark.leak: seed must be an integer, not 'abc'.",
        "*@pytest.mark.leak: target must be 'module:callable' or a built-in target (sglang), "
        "not 'mycache.cache'.",
    ])
    assert "pytest_plugin.py" not in result.stdout.str()
    assert not results.exists()  # no run folder: no worker started
