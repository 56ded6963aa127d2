"""The command line: exit codes and one-sentence errors, against a fixture catalog."""

from __future__ import annotations

import dataclasses
import io
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness import registry
from harness.config import RunConfig, read_budgets, reproduce_command
from harness.configure import merge_budgets
from harness.errors import UsageError
from harness.parent.progress import ProgressLine, render
from harness.parent.supervisor import Snapshot
from leak_harness.cli import build_parser, main
from leak_harness.cli.run import config_from_args
from tests.harness.conftest import spec


@pytest.fixture(autouse=True)
def catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "PACKAGE", "tests.harness.fixtures.catalog")


def fails(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI, expect exit 2 with one line on stderr and no traceback; return it."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_list_shows_scenarios_regressions_and_broken_modules(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "demo-leaky\n" in out and "regressions: keep-chunks, keep-nodes" in out
    assert "demo-steady\n" in out and "regressions: none" in out
    assert "broken-import\n    cannot be loaded:" in out and "broken on purpose" in out
    assert "shared-helpers" not in out


def test_unknown_scenario_suggests_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    err = fails(["run", "demo-stedy"], capsys)
    assert "unknown scenario 'demo-stedy' (did you mean 'demo-steady'" in err


def test_unknown_regression_suggests_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    err = fails(["run", "demo-leaky", "--inject", "keep-chunk"], capsys)
    assert "no regression 'keep-chunk' (did you mean 'keep-chunks'" in err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--duration", "10x"], "--duration: cannot read duration '10x'"),
        (["--duration", "10"], "--duration: duration '10' has no unit"),
        (["--rss-ceiling", "lots"], "--rss-ceiling: cannot read size 'lots'"),
        (["--budget", "rss 50"], "--budget: budget 'rss 50' names no metric"),
        (["--target", "no_colon"], "--target 'no_colon' is not 'module:callable'"),
        (["--gc-mode", "turbo"], "invalid choice: 'turbo'"),
    ],
)
def test_malformed_values_are_one_sentence(
    flags: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert expected in fails(["run", "demo-steady", *flags], capsys)


def test_unwritable_output_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    err = fails(["run", "demo-steady", "--out", str(blocker / "run")], capsys)
    assert f"cannot write to the output folder {blocker / 'run'}: Not a directory." in err
    assert capsys.readouterr().out == ""


def test_corrupt_samples_in_the_output_folder_is_not_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "samples.jsonl").write_text("{}\n")
    err = fails(["run", "demo-steady", "--out", str(tmp_path)], capsys)
    assert "already holds a run" in err


@pytest.mark.integration
def test_a_budget_on_an_unknown_metric_is_exit_2_and_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", spec("HEALTHY"), "--duration", "60s", "--budget", "hepa: 1 MB/h",
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("leak-harness: budget 'hepa: 1 MB/h': this run publishes no metric "
                          "'hepa'; known: ")
    assert "Traceback" not in err and not (tmp_path / "run" / "summary.json").exists()


@pytest.mark.integration
def test_run_prints_verdict_reasons_and_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", spec("CRASHING"), "--duration", "5s", "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert code == 1, out
    assert f"running crashing for 5 s in {tmp_path / 'run'}; expected wall time" in out
    assert "crashing: crashed\n  - the scenario raised: RuntimeError: fixture failure" in out
    assert out.endswith(
        f"run folder: {tmp_path / 'run'}\nreport: {tmp_path / 'run' / 'report.html'}\n"
    )
    assert (tmp_path / "run" / "report.html").exists()
    assert "\r" not in out  # quiet when stdout is not a terminal


@pytest.mark.integration
def test_run_json_prints_the_summary_alone_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    code = main(["run", spec("CRASHING"), "--duration", "5s", "--out", str(tmp_path / "run"),
                 "--json"])
    captured = capsys.readouterr()
    summary = json.loads(captured.out)  # nothing else on stdout
    assert code == 1 and summary["verdict"] == "crashed"
    assert summary["report"] == str(tmp_path / "run" / "report.html")
    assert "crashing: crashed" in captured.err


def test_reproduce_command_parses_back_to_the_same_config(tmp_path: Path) -> None:
    config = RunConfig(
        scenario=spec("LEAKY"), rundir=str(tmp_path), duration_s=90.0, max_ops=5000,
        warmup_s=1.5, seed=7, gc_mode="server", timeout_s=300.0, heartbeat_s=12.0,
        rss_ceiling=2_000_000_000, target="tests.harness.fixtures.scenarios:Healthy",
        budgets=read_budgets(("rss: 50 MB/h", "kept: <= 4"), "budgets"),
        skippable_budgets=read_budgets(("rss: 50 MB/h",), "budgets"),  # LEAKY's own, on a target
    )
    argv = [*shlex.split(reproduce_command(config))[1:], "--out", str(tmp_path)]
    _, parsed = config_from_args(build_parser().parse_args(argv))
    assert dataclasses.replace(parsed, scenario_defaults={}) == config


@pytest.mark.parametrize(("flags", "said"), [
    ([], "--duration 20s --seed 0"),
    (["--budget", "rss: 1 GB/h", "--gc-mode", "server"],
     "--duration 20s --seed 0 --gc-mode server --budget 'rss: 1 GB/h'"),
    (["--budget", "rss: off", "--warmup", "3s"],
     "--duration 20s --warmup 3s --seed 0 --budget 'rss: off'"),
])
def test_reproduce_names_only_what_differs_from_the_scenario(
        tmp_path: Path, flags: list[str], said: str) -> None:
    """The first-hour review: 'Reproduce' repeated all 11 default budgets."""
    argv = ["run", spec("LEAKY"), "--duration", "20s", *flags, "--out", str(tmp_path)]
    _, config = config_from_args(build_parser().parse_args(argv))
    command = reproduce_command(config)
    assert command == f"leak-harness run {spec('LEAKY')} {said}"
    again = [*shlex.split(command)[1:], "--out", str(tmp_path)]
    assert config_from_args(build_parser().parse_args(again))[1] == config


def test_cli_budgets_replace_the_same_kind_only() -> None:
    merged = merge_budgets(("rss: 50 MB/h", "rss: <= 2 GiB", "kept: <= 4"), ("rss: 1 GB/h",))
    assert tuple(b.text for b in merged) == ("rss: 1 GB/h", "rss: <= 2 GiB", "kept: <= 4")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"duration_s": None}, "needs a duration or an op count"),
        ({"gc_mode": "turbo"}, "unknown GC mode 'turbo'"),
        ({"samplers": ("rss", "heaps")}, "unknown sampler 'heaps'"),
        ({"options": {"f": object()}}, "plain JSON values"),
    ],
)
def test_runconfig_refuses_bad_values(values: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        RunConfig(scenario="x", rundir="r", **values)  # type: ignore[arg-type]


def test_progress_line_shows_time_rate_rss_and_two_gauges() -> None:
    snap = Snapshot(elapsed_s=12.34, total_s=60.0, ops=4512, ops_per_s=876.4, phase="measure",
                    rss=20_600_000, gauges={"ring": 256.0, "kept": 12.0, "third": 1.0})
    assert render("healthy", snap) == (
        "healthy  12.3/60 s  4,512 ops (876/s)  RSS 20.6 MB  ring=256  kept=12"
    )
    warming = Snapshot(0.4, None, 10, 25.0, "warmup", None)
    assert render("x", warming) == "x  0.4 s  warm-up  10 ops (25/s)"


def test_progress_line_redraws_in_place_only_on_a_terminal() -> None:
    snap = Snapshot(1.0, 2.0, 5, 5.0, "measure", None)
    for live, expected in ((True, "\r\x1b[K"), (False, "")):
        stream = io.StringIO()
        line = ProgressLine(stream, "x", live=live)
        line.update(snap)
        line.end()
        assert stream.getvalue().startswith(expected) and ("\r" in stream.getvalue()) == live


def test_off_a_terminal_a_plain_progress_line_comes_every_ten_seconds() -> None:
    stream = io.StringIO()
    line = ProgressLine(stream, "x", live=False)
    for tenth in range(0, 305):  # 30.5 s of updates, twice a second in a real run
        line.update(Snapshot(tenth / 10, 60.0, tenth, 10.0, "measure", None))
    lines = stream.getvalue().splitlines()
    assert [ln.split("  ")[1] for ln in lines] == ["10.0/60 s", "20.0/60 s", "30.0/60 s"]
    assert "\r" not in stream.getvalue() and "\x1b" not in stream.getvalue()


def test_past_its_duration_the_line_says_finishing_instead_of_counting_on() -> None:
    late = Snapshot(24.3, 20.0, 5000, 0.0, "measure", None)
    assert render("x", late) == "x  20/20 s  finishing: last windows, analysis"


@pytest.mark.integration
def test_a_target_in_the_current_folder_loads_in_the_parent_too() -> None:
    """The README's command, from the repository root, without pytest's import path."""
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(Path(sys.executable).with_name("leak-harness")), "doctor", "--target",
         "examples.own_cache:make", "radix-steady", "--seconds", "0.3"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "conforms" in done.stdout and "cannot load" not in done.stdout


def test_where_it_grows_prints_the_three_most_certain_lines_unless_asked_for_all(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from leak_harness.cli.base import print_where

    lines = ["first", "second", "third", "fourth", "fifth"]
    print_where(lines, "top")
    out = capsys.readouterr().out
    assert "  - third" in out and "fourth" not in out
    assert "(2 less certain lines: --where all, or the report)" in out
    print_where(lines, "all", indent="  ")
    out = capsys.readouterr().out
    assert "    - fifth" in out and "less certain" not in out
    print_where([], "top")
    assert capsys.readouterr().out == ""


def test_exit_codes_tell_a_regression_from_a_broken_tool() -> None:
    from harness.suite import CellOutcome, Suite
    from harness.verdicts import exit_code

    assert [exit_code(v) for v in ("pass", "suspicious", "leak", "crashed", "hung", "ceiling",
                                   "error", "interrupted")] == [0, 0, 1, 1, 1, 1, 3, 130]
    assert exit_code("suspicious", strict=True) == 1 and exit_code("pass", strict=True) == 0

    def suite(*verdicts: str) -> Suite:
        return Suite(tuple(CellOutcome(f"s{i}", "fixed", v, "pass", Path("r"), 1.0, None, ())
                           for i, v in enumerate(verdicts)))

    assert suite("pass").exit_code() == 0
    assert suite("error", "error").exit_code() == 3
    assert suite("error", "leak").exit_code() == 1
    assert suite("pass").exit_code(flagged=True) == 1  # a flagged history row is a regression
    assert suite().exit_code() == 1  # nothing judged is not a pass


def test_version_and_the_exit_code_table_are_in_the_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from leak_harness.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("leak-harness ")
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert "--strict" in out and "3    the harness could not judge (error)" in out


def test_the_job_summary_is_a_markdown_table_appended_to_the_file(tmp_path: Path) -> None:
    from harness.suite import CellOutcome as Cell
    from leak_harness.cli.suite_out import append_step_summary

    cells = [Cell("radix-steady", "fixed", "pass", "pass", tmp_path, 20.0, None, ()),
             Cell("mamba-lru", "inject:mamba-lru-unlink", "pass", "fail", tmp_path, 20.0,
                  None, ())]
    path = tmp_path / "summary.md"
    path.write_text("earlier step\n", encoding="utf-8")
    append_step_summary(path, cells, ["REGRESSION: radix-steady[fixed] heap grew"])
    text = path.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n### leak-harness: 1 of 2 cells right")
    assert "| mamba-lru | inject:mamba-lru-unlink | pass | **no** | - |" in text
    assert "- REGRESSION: radix-steady[fixed] heap grew" in text
    append_step_summary(tmp_path / "no-such-dir" / "x.md", cells, [])  # one sentence, no raise


def test_the_projects_table_gives_defaults_and_the_command_line_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from leak_harness.cli.project_config import load_defaults

    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.leak-harness]\njobs = 2\nseed = 7\n'
        'budgets = ["heap: 5 MB/h"]\nout = "ci/check"\n', encoding="utf-8")
    defaults = load_defaults(tmp_path)
    args = build_parser(defaults).parse_args(["check"])
    assert (args.jobs, args.seed, args.out, args.budget) == (2, 7, "ci/check", ["heap: 5 MB/h"])
    args = build_parser(defaults).parse_args(["check", "-j", "1", "--budget", "rss: off"])
    assert args.jobs == 1 and args.budget == ["heap: 5 MB/h", "rss: off"]
    assert build_parser(defaults).parse_args(["run", "radix-steady"]).seed == 7
    (tmp_path / "pyproject.toml").write_text('[tool.leak-harness]\njob = 2\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["list"]) == 2
    err = capsys.readouterr().err
    assert "[tool.leak-harness] has no key 'job'. Did you mean 'jobs'?" in err
    (tmp_path / "pyproject.toml").write_text('[tool.leak-harness]\njobs = "2"\n',
                                             encoding="utf-8")
    assert main(["list"]) == 2
    assert "jobs must be an integer, not '2'" in capsys.readouterr().err


def test_a_built_in_target_is_named_by_its_name() -> None:
    """``--target sglang`` is the shipped SGLang target; other names must be module:callable."""
    from harness.api import BUILTIN_TARGETS, load_callable
    from leak_harness.cli.base import check_target_spec

    check_target_spec("sglang")
    factory = load_callable("sglang")  # importing the target needs no SGLang release
    assert f"{factory.__module__}:{factory.__name__}" == BUILTIN_TARGETS["sglang"]
    with pytest.raises(UsageError, match="nor a built-in target \\(sglang\\)"):
        check_target_spec("sglangx")


def test_a_target_that_declines_a_scenario_makes_its_cells_not_applicable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A factory's ``declines`` sees each scenario's cache options before any worker starts."""
    from harness.parent.matrix import plan
    from harness.registry import load_scenario
    from leak_harness.cli.check import applicable_cells

    (tmp_path / "nomamba.py").write_text(
        "def make(inject=(), **options):\n    raise AssertionError('never built here')\n"
        "def declines(options):\n"
        "    return 'no Mamba state pool' if 'mamba_size' in options else None\n"
        "make.declines = declines\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cells = plan([load_scenario("scenarios.mamba_lru:SCENARIO"),
                  load_scenario("scenarios.radix_steady:SCENARIO")])
    runnable, skipped = applicable_cells(cells, "nomamba:make")
    assert [c.label for c in runnable] == ["radix-steady[fixed]"]  # and it has no regression
    assert skipped == [
        "mamba-lru[fixed]: n/a (the target does not run this scenario: no Mamba state pool)",
        "mamba-lru[inject:mamba-lru-unlink]: n/a (the target does not run this scenario: "
        "no Mamba state pool)"]


def test_doctor_names_the_code_a_target_runs_and_what_it_declines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "declining.py").write_text(
        "def make(inject=(), **options):\n    raise AssertionError('never built here')\n"
        "make.describe = lambda: 'MyCache 1.2 from /opt/mycache'\n"
        "make.declines = lambda options: 'no Mamba state pool'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["doctor", "--target", "declining:make", "scenarios.mamba_lru:SCENARIO"]) == 0
    out = capsys.readouterr().out
    assert "  MyCache 1.2 from /opt/mycache\n" in out
    assert "scenarios.mamba_lru:SCENARIO  n/a: no Mamba state pool" in out
    assert "conforms: all 0 scenarios ran (1 n/a for this target)." in out


def test_when_a_run_was_detected_is_worded_by_its_verdict() -> None:
    """RELIABILITY-3 cases 56 and 63: a suspicious fixed cell was 'detected at' 6.0 s and
    a crashed run 'crashed detected after' its crash."""
    from harness.verdicts import detection_words

    assert [detection_words(v) for v in ("leak", "crashed", "suspicious", "hung")] == [
        "detected", "crashed", "a budget first failed", "a budget first failed"]
