"""Integration: real workers on fixture scenarios, one verdict each, nothing left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from harness.config import BUDGET_FIELDS, RunConfig, SamplerIntervals, read_budgets
from harness.errors import UsageError
from harness.parent.runner import RunOutcome, run
from harness.runfiles.names import CLOSED_EVENT, SAMPLES_FILE, STACKS_FILE, TRACEBACK_FILE
from harness.runfiles.reader import load_samples
from harness.runfiles.rundata import RunData
from harness.runfiles.summary import Summary, load_summary
from tests.harness.conftest import ROOT, spec
from tests.harness.records_check import file_problems

pytestmark = pytest.mark.integration  # every test starts a worker (or the CLI that does)

FAST = SamplerIntervals(rss_s=0.05, gauges_s=0.2, objects_s=1.0, garbage_s=1.0)


def run_fixture(rundir: Path, name: str, **overrides: Any) -> RunOutcome:
    values: dict[str, Any] = {"duration_s": 2.0, "warmup_s": 0.5, "intervals": FAST}
    values.update(overrides)
    for key in BUDGET_FIELDS:  # typed as text here, parsed as a face would
        if key in values:
            values[key] = read_budgets(values[key], "the test's budgets")
    return run(RunConfig(scenario=spec(name), rundir=str(rundir), **values))


def test_healthy_run_passes_and_keeps_every_kind_of_sample(no_leftovers: Path) -> None:
    outcome = run_fixture(no_leftovers, "HEALTHY", budgets=("rss: 2 GB/h", "ring: <= 256"))
    data, summary = load_run_files(no_leftovers)
    assert outcome.verdict == "pass", outcome.reasons
    assert summary.verdict == "pass" and summary.ops > 500
    assert 2.0 <= summary.duration_s < 3.0
    assert len(data.rss) >= 20 and data.uss.v.min() > 0
    assert data.gauges["ring"].v.max() == 256
    assert data.warmup_end_s is not None and 0.5 <= data.warmup_end_s < 0.7
    assert data.garbage_windows[-1]["final"] and len(data.object_windows) >= 2
    assert data.event("end") is not None and data.event("malloc_trim") is not None
    assert file_problems(no_leftovers / SAMPLES_FILE) == []
    assert summary.command.startswith("leak-harness run tests.harness.fixtures.scenarios:HEALTHY")


def test_cyclic_garbage_is_counted_explained_and_collected_in_server_mode(
    no_leftovers: Path,
) -> None:
    outcome = run_fixture(no_leftovers, "CYCLIC", gc_mode="server", ballast_objects=300_000)
    data = load_samples(no_leftovers / SAMPLES_FILE)
    assert data.header["env"]["gc"]["mode"] == "server"
    assert data.header["env"]["gc"]["ballast_objects"] == 300_000
    windows = data.garbage_windows
    # The final window comes after the loop ended: on a loaded machine no Pair is made
    # after the window before it, so only the windows taken while the workload ran count.
    running = [w for w in windows if not w.get("final")]
    assert len(windows) >= 2 and running
    assert all(w["by_type"].get("Pair", 0) > 0 for w in running)
    assert ["Pair.partner", "Pair.partner"] in [c["path"] for c in windows[0]["cycles"]]
    assert sum(e["collected"] for e in data.gc_events) > 1000  # gen-0/1 free the rest
    assert "cyclic_garbage" in outcome.summary.metrics


def test_leaking_run_fails_its_budget(no_leftovers: Path) -> None:
    # The gauge level is the deterministic part of the verdict; the RSS rate's
    # status is left to the analysis, whose interval can still be too wide at 3 s.
    budgets = ("rss: 2 GB/h", "kept: <= 100")
    outcome = run_fixture(no_leftovers, "LEAKY", duration_s=3.0, budgets=budgets)
    assert outcome.verdict == "leak", outcome.reasons
    assert any("'kept: <= 100'" in reason for reason in outcome.reasons)
    rates = [m for m in outcome.summary.metrics.values() if m.budget == "rss: 2 GB/h"]
    assert rates and all(m.unit == "B/h" and m.value > 2e9 for m in rates)


def test_crash_keeps_traceback_and_samples(no_leftovers: Path) -> None:
    outcome = run_fixture(no_leftovers, "CRASHING", duration_s=10.0)
    assert outcome.verdict == "crashed"
    assert "fixture failure after 300 steps" in outcome.reasons[0]
    traceback = (no_leftovers / TRACEBACK_FILE).read_text()
    assert "RuntimeError: fixture failure" in traceback and "in step" in traceback
    data = load_samples(no_leftovers / SAMPLES_FILE)
    crash = data.event("crash")
    assert crash is not None and crash["where"] == "step"
    assert len(data.rss) >= 3 and data.event("end") is None
    assert outcome.summary.time_to_detect_s == crash["t"]  # the crash is the detection
    assert outcome.summary.duration_s == crash["t"]  # "crashed after" matches the plot's marker


def test_a_segfault_names_the_signal_and_the_frame_the_worker_died_in(
    no_leftovers: Path,
) -> None:
    outcome = run_fixture(no_leftovers, "SEGFAULTING", duration_s=10.0)
    assert outcome.verdict == "crashed"
    reason = outcome.reasons[0]
    assert reason.startswith("the worker died from SIGSEGV: Fatal Python error: "
                             "Segmentation fault; the crashing thread was in string_at ("), reason
    assert "called from read_address_zero (tests/harness/fixtures/scenarios.py:" in reason
    assert reason.endswith("(worker.log has every stack).")


def test_hang_is_killed_with_stacks_and_peers_die(no_leftovers: Path) -> None:
    began = time.monotonic()
    outcome = run_fixture(no_leftovers, "HANGING_WITH_PEERS", duration_s=30.0, heartbeat_s=1.5)
    assert outcome.verdict == "hung", outcome.reasons
    assert time.monotonic() - began < 1.5 + 6.0  # heartbeat limit + start-up and kill
    assert "heartbeat" in outcome.reasons[0]
    stacks = (no_leftovers / STACKS_FILE).read_text()
    assert "wait_forever" in stacks and "in step" in stacks
    for pid in map(int, (no_leftovers / "peers.txt").read_text().split()):
        assert not alive(pid), f"peer {pid} survived the kill"


def test_a_build_and_a_close_slower_than_the_heartbeat_limit_are_not_a_hang(
    no_leftovers: Path,
) -> None:
    # Each phase takes 2.5 s against a 1 s limit: the main loop is not running yet
    # (or any more), so a bounded keep-alive beats for it.
    outcome = run_fixture(no_leftovers, "SLOW_TO_BUILD_AND_CLOSE", heartbeat_s=1.0)
    assert outcome.verdict == "pass", outcome.reasons
    assert load_samples(no_leftovers / SAMPLES_FILE).event(CLOSED_EVENT) is not None


def test_a_thread_that_dies_is_recorded_named_and_keeps_the_run_from_passing(
    no_leftovers: Path,
) -> None:
    outcome = run_fixture(no_leftovers, "LOSES_A_THREAD")
    assert outcome.verdict == "suspicious", outcome.reasons
    died = load_samples(no_leftovers / SAMPLES_FILE).event("thread_died")
    assert died is not None and died["thread"] == "page-copier"
    assert died["error"] == "IndexError: list index out of range"
    [where] = load_summary(no_leftovers).analysis.where or ()
    assert where.text.startswith("a thread of the code under test (page-copier) died at "
                                    "tests/harness/fixtures/scenarios.py:")
    assert "in copy_pages" in where.text


def test_wall_clock_timeout_is_a_hang(no_leftovers: Path) -> None:
    outcome = run_fixture(no_leftovers, "HANGING", duration_s=30.0, timeout_s=1.5)
    assert outcome.verdict == "hung"
    assert "timeout" in outcome.reasons[0]


def test_rss_ceiling_kills_the_run(no_leftovers: Path) -> None:
    outcome = run_fixture(no_leftovers, "BALLOON", duration_s=30.0, rss_ceiling=250_000_000)
    assert outcome.verdict == "ceiling", outcome.reasons
    assert "ceiling" in outcome.reasons[0]
    assert outcome.summary.duration_s < 10.0
    assert len(load_samples(no_leftovers / SAMPLES_FILE).rss) >= 1


def test_stop_when_ends_the_run_early_and_cleanly(no_leftovers: Path) -> None:
    seen: list[float] = []

    def enough(data: RunData) -> bool:
        seen.append(data.data_end_s)
        return len(data.rss) > 0 and data.rss.t[-1] > 1.0

    config = RunConfig(scenario=spec("HEALTHY"), rundir=str(no_leftovers), duration_s=30.0,
                       warmup_s=0.5, intervals=FAST)
    outcome = run(config, stop_when=enough)
    data = load_samples(no_leftovers / SAMPLES_FILE)
    end = data.event("end")
    assert end is not None and end["reason"] == "stopped: SIGTERM"
    assert 1.0 < outcome.summary.duration_s < 5.0 and seen
    assert outcome.verdict in ("pass", "suspicious")  # a healthy fixture, cut short
    assert any("stopped early" in reason for reason in outcome.reasons)
    # Judged on the samples the decision saw, not on those that came while it stopped.
    loop_end = data.event("loop_end")
    assert outcome.analysis is not None and outcome.analysis.window_s is not None
    assert outcome.analysis.window_s[1] == seen[-1] < float(loop_end["t"])
    assert any(f"on the samples up to {seen[-1]:.1f} s" in r for r in outcome.reasons)


def test_a_failing_stop_when_is_switched_off_and_noted(no_leftovers: Path) -> None:
    def broken(data: RunData) -> bool:
        raise LookupError("no such metric yet")

    again = run(RunConfig(scenario=spec("HEALTHY"), rundir=str(no_leftovers),
                          duration_s=1.5, warmup_s=0.2, intervals=FAST), stop_when=broken)
    assert again.summary.run.ending == "finished" and again.summary.duration_s >= 1.5
    assert ("the early-stop check failed and was switched off: LookupError: no such metric yet"
            in again.reasons)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_to_the_cli_ends_interrupted_with_the_partial_samples_analysed(
    no_leftovers: Path, sig: signal.Signals, code: int
) -> None:
    rundir = no_leftovers / "interrupted"
    with subprocess.Popen(  # leaving the block closes the pipes, on a failure too
        [sys.executable, "-m", "leak_harness", "run", spec("HEALTHY"), "--duration", "60s",
         "--warmup", "0.2s", "--out", str(rundir)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as cli:
        try:
            # Two seconds of workload: enough samples of every budgeted signal to judge on a
            # loaded machine (after one, a slow start can leave a signal without data: error).
            wait_for(lambda: progressed(rundir, lines=2), 30.0)
            cli.send_signal(sig)
            out, err = cli.communicate(timeout=30)
        finally:
            cli.kill()  # a no-op once it has exited; on a failed test it must not linger
            cli.wait()
    data, summary = load_run_files(rundir)
    assert cli.returncode == code, err
    assert "healthy: interrupted\n  - interrupted (Ctrl-C or SIGTERM) after" in out
    assert "the partial data showed: pass." in out or "showed: suspicious." in out, out
    assert summary.verdict == "interrupted" and summary.run.ending == "interrupted"
    assert summary.duration_s < 30 and data.event("end") is not None and len(data.rss) > 0


def test_sigterm_to_check_stops_every_cell_and_still_writes_the_suite(
    no_leftovers: Path,
) -> None:
    out = no_leftovers / "check"
    cell = out / "radix-steady" / "fixed"
    with subprocess.Popen(
        [sys.executable, "-m", "leak_harness", "check", "-k", "radix-steady[fixed]",
         "--duration", "60s", "--out", str(out), "--no-history"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as cli:
        try:
            wait_for(lambda: progressed(cell), 60.0)
            cli.send_signal(signal.SIGTERM)
            stdout, err = cli.communicate(timeout=60)
        finally:
            cli.kill()
            cli.wait()
    assert cli.returncode == 143, err
    assert (out / "index.html").exists() and (out / "junit.xml").exists()
    _, summary = load_run_files(cell)
    assert summary.verdict == "interrupted" and summary.duration_s < 45
    assert "interrupted" in stdout


def progressed(rundir: Path, lines: int = 1) -> bool:
    """The worker has written ``lines`` progress lines (about one a second of workload)."""
    path = rundir / SAMPLES_FILE
    return path.exists() and path.read_text().count('"type":"progress"') >= lines


def worker_pid(rundir: Path) -> int | None:
    """The worker's pid from the samples header, once the header line is complete."""
    path = rundir / SAMPLES_FILE
    text = path.read_text() if path.exists() else ""
    if "\n" not in text:
        return None
    return int(json.loads(text.split("\n", 1)[0])["env"]["pid"])


def wait_for(condition: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False



def test_a_killed_runner_takes_its_worker_down(no_leftovers: Path) -> None:
    rundir = no_leftovers / "orphan"
    cli = subprocess.Popen(
        [sys.executable, "-m", "leak_harness", "run", spec("HANGING"), "--duration", "60s",
         "--out", str(rundir)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    worker: int | None = None
    try:
        wait_for(lambda: worker_pid(rundir) is not None, 30.0)
        worker = worker_pid(rundir)
    finally:
        cli.kill()  # no finally, no cleanup in the runner: only the kernel's death signal
        cli.wait()
    assert worker is not None
    try:
        wait_for(lambda: not alive(worker), 10.0)
    finally:
        if alive(worker):  # the test failed: do not leave the orphan behind
            os.killpg(worker, signal.SIGKILL)


def test_a_worker_that_cannot_read_its_config_says_why(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"scenario": "x", "rundir": "r", "colour": 1}')
    done = subprocess.run([sys.executable, "-m", "harness.worker", str(tmp_path / "config.json")],
                          cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 3  # the harness's failure, not the scenario's
    assert "unknown run config field 'colour'" in (tmp_path / TRACEBACK_FILE).read_text()


def test_a_budget_on_a_metric_the_run_never_records_is_refused_before_the_workload(
    no_leftovers: Path,
) -> None:
    began = time.monotonic()
    with pytest.raises(UsageError, match=r"publishes no metric 'rign'; known: .*ring"):
        run_fixture(no_leftovers, "HEALTHY", duration_s=60.0, budgets=("rign: <= 256",))
    assert time.monotonic() - began < 30  # refused at start, not after the 60 s run
    assert not (no_leftovers / SAMPLES_FILE).exists()  # no half run left behind
    assert list(no_leftovers.iterdir()) == []  # nor its empty log (RELIABILITY-3 case 8)
    made = no_leftovers / "new"
    with pytest.raises(UsageError, match=r"publishes no metric 'rign'"):
        run_fixture(made, "HEALTHY", duration_s=60.0, budgets=("rign: <= 256",))
    assert not made.exists()  # a folder the refused run made is gone again
    # The corrected command takes the same folder.
    assert run_fixture(no_leftovers, "HEALTHY", budgets=("ring: <= 256",)).verdict == "pass"


def test_a_target_that_cannot_be_imported_is_refused(no_leftovers: Path) -> None:
    with pytest.raises(UsageError, match=r"target 'no_such_module:make' cannot be loaded "
                                         r"\(ModuleNotFoundError"):
        run_fixture(no_leftovers, "HEALTHY", target="no_such_module:make")


def test_declared_budgets_a_users_target_does_not_publish_are_skipped_with_a_reason(
    no_leftovers: Path,
) -> None:
    outcome = run_fixture(
        no_leftovers, "HEALTHY", target=spec("wait_forever"),
        budgets=("rss: 2 GB/h", "detached_alive_nodes: <= 0"),
        skippable_budgets=("detached_alive_nodes: <= 0",),
    )
    assert outcome.verdict == "pass", outcome.reasons
    assert ("detached_alive_nodes: skipped: this cache publishes no 'detached_alive_nodes' "
            "(budget 'detached_alive_nodes: <= 0').") in outcome.reasons


def test_two_runs_on_one_folder_one_runs_and_the_other_is_refused(no_leftovers: Path) -> None:
    rundir = no_leftovers / "shared"
    command = [sys.executable, "-m", "leak_harness", "run", spec("HEALTHY"), "--duration", "3s",
               "--warmup", "0.2s", "--out", str(rundir)]
    clis = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(2)]
    results = []
    for cli in clis:
        with cli:
            out, err = cli.communicate(timeout=60)
            results.append((cli.returncode, out, err))
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, _, err in results if code == 2)
    assert refused.startswith("leak-harness: ") and str(rundir) in refused
    assert "another run is writing to" in refused or "already holds a run" in refused
    _, summary = load_run_files(rundir)
    assert summary.verdict == "pass" and not (rundir / "run.lock").exists()


def test_a_summary_that_cannot_be_written_is_one_sentence_and_report_recovers_it(
    no_leftovers: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    import errno

    from harness.runfiles import summary as summary_module
    from leak_harness.cli import main

    real = Path.write_text

    def full_disk(self: Path, *args: Any, **kwargs: Any) -> int:
        if self.name.startswith("summary.json"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(summary_module.Path, "write_text", full_disk)
    with pytest.raises(UsageError, match=r"cannot write .*summary.json: No space left on device "
                                         r"\(the disk is full\); the samples are kept") as raised:
        run_fixture(no_leftovers, "HEALTHY")
    assert raised.value.exit_code == 3  # the harness could not finish: not the user's input
    assert (no_leftovers / SAMPLES_FILE).stat().st_size > 0
    assert not (no_leftovers / "summary.json").exists()
    monkeypatch.setattr(summary_module.Path, "write_text", real)
    assert main(["report", str(no_leftovers)]) == 0
    assert "no summary; analysed the samples again: pass" in capsys.readouterr().out
    assert load_run_files(no_leftovers)[1].verdict == "pass"


def test_report_on_samples_of_a_killed_run_says_interrupted(no_leftovers: Path) -> None:
    from harness.parent.runner import reanalyse

    run_fixture(no_leftovers, "HEALTHY")
    lines = (no_leftovers / SAMPLES_FILE).read_text().splitlines()
    ended = next(i for i, line in enumerate(lines) if '"name":"loop_end"' in line)
    (no_leftovers / SAMPLES_FILE).write_text("\n".join(lines[:ended]) + "\n")
    (no_leftovers / "summary.json").unlink()
    outcome = reanalyse(no_leftovers)
    assert outcome.verdict == "interrupted"
    assert "before the worker's end (its parent was killed?)" in outcome.reasons[0]
    # A write the disk refused leaves half a line: said as what it likely was.
    (no_leftovers / SAMPLES_FILE).write_text("\n".join(lines[:ended]) + "\n" + lines[ended][:9])
    (no_leftovers / "summary.json").unlink()
    cut = reanalyse(no_leftovers)
    assert cut.verdict == "interrupted"
    assert "the worker could not finish writing them (a full disk?)" in cut.reasons[0]


def test_the_users_folder_is_importable_without_shadowing_installed_packages(
    no_leftovers: Path, tmp_path: Path
) -> None:
    (tmp_path / "psutil.py").write_text("raise ImportError('a local file shadowed psutil')\n")
    (tmp_path / "mine.py").write_text("def make(**options):\n    return None\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(  # -P: as the leak-harness script, which does not put cwd first
        [sys.executable, "-P", "-m", "leak_harness", "run", spec("HEALTHY"), "--duration", "2s",
         "--warmup", "0.2s", "--target", "mine:make", "--out", str(no_leftovers / "run")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "healthy: pass" in done.stdout


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A real 12 KB tmpfs (root only; skipped where the machine does not allow mounts)."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_disk_that_fills_during_the_run_is_called_a_full_disk(small_disk: Path) -> None:
    with pytest.raises(UsageError) as raised:
        run_fixture(small_disk / "run", "HEALTHY", duration_s=4.0)
    text = raised.value.message
    assert "No space left on device (the disk is full)" in text
    assert f"(the verdict was error: the disk holding {small_disk / 'run'} is full (" in text
    assert raised.value.exit_code == 3


def load_run_files(rundir: Path) -> tuple[RunData, Summary]:
    return load_samples(rundir / "samples.jsonl"), load_summary(rundir)


def test_a_run_and_its_report_parse_the_samples_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The parent hands the report what it parsed; a run that kept every record while it
    ran (a stop predicate) parses the file not at all."""
    import harness.runfiles.reader as reader
    from reports.run import write_run_report

    reads: list[Path] = []
    real = reader.load_samples

    def counting(path: Path) -> RunData:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(reader, "load_samples", counting)
    outcome = run_fixture(tmp_path / "plain", "HEALTHY", budgets=("ring: <= 256",))
    write_run_report(outcome.loaded)
    assert len(reads) == 1 and outcome.samples is not None
    watched = run(RunConfig(scenario=spec("HEALTHY"), rundir=str(tmp_path / "watched"),
                            duration_s=2.0, warmup_s=0.5, intervals=FAST),
                  stop_when=lambda data: False)
    write_run_report(watched.loaded)
    assert len(reads) == 1 and watched.samples is not None
    assert len(watched.samples.rss) == len(load_samples(tmp_path / "watched" / SAMPLES_FILE).rss)
