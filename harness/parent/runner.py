"""``run(config) -> RunOutcome``: one scenario run in a fresh worker, analysed.

The library face of the engine: the CLI, ``check`` and pytest call this, never
argparse. The parent starts the worker in its own session, watches it
(``harness.parent.supervisor``), kills its whole process group whatever happened, then
loads the samples, analyses them and writes ``summary.json``. A run the worker
refused before its workload started (see ``harness.worker.main``) is no run: its
files are removed and the sentence is raised as a UsageError.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from threading import Event

from harness.analysis.summary import Analysis, summarize
from harness.config import RunConfig, reproduce_command
from harness.control import PARENT_ENV, USER_DIR_ENV
from harness.errors import UsageError
from harness.parent import folder_lock
from harness.parent.supervisor import REFUSED, Ending, Snapshot, Supervisor
from harness.parent.watchdog import ProcessTree, default_ceiling
from harness.runfiles.names import (
    CONFIG_FILE,
    HEARTBEAT_FILE,
    REFUSED_FILE,
    SAMPLES_FILE,
    STACKS_FILE,
    STOP_FILE,
    WORKER_LOG,
)
from harness.runfiles.reader import LoadedRun, load_samples, open_samples
from harness.runfiles.rundata import RunData
from harness.runfiles.summary import RunFacts, Summary, write_summary
from harness.verdicts import ENDING_VERDICTS, FAILING, INTERRUPTED


@dataclass(frozen=True)
class RunOutcome:
    verdict: str
    rundir: Path
    analysis: Analysis | None
    summary: Summary
    samples: RunData | None = None  # as the parent parsed them, for the report
    why_no_samples: str | None = None

    @property
    def loaded(self) -> LoadedRun:
        """The run as reports read it, without reading its files again."""
        return LoadedRun(self.rundir, self.summary, self.samples, self.why_no_samples)

    @property
    def reasons(self) -> list[str]:
        return self.summary.reasons


def run(
    config: RunConfig,
    stop_when: Callable[[RunData], bool] | None = None,
    on_progress: Callable[[Snapshot], None] | None = None,
    cancel: Event | None = None,
) -> RunOutcome:
    """Run one scenario in a worker process and return its analysed outcome.

    ``stop_when`` is called about once a second with the samples so far; when
    it returns True the worker is asked to stop cleanly (a later ``check`` stops
    as soon as its verdict is certain). ``on_progress`` gets a ``Snapshot``
    twice a second for a live display. Setting ``cancel`` stops the run as
    Ctrl-C does (for runs on other threads, which never see the signal).
    """
    made_here = not config.path.exists()
    prepare_rundir(config)
    refused = False
    try:
        process = spawn_worker(config)
        tree = ProcessTree(process.pid)
        try:
            ceiling = config.rss_ceiling or default_ceiling()
            supervisor = Supervisor(config, process, tree, ceiling, stop_when, on_progress,
                                    cancel)
            ending = supervisor.watch()
        finally:
            tree.kill_all()  # peers included, whatever happened above
            process.wait()
        if ending.status == REFUSED:
            forget_run(config.path)
            refused = True
            raise UsageError(ending.reasons[0])
        # A run with a stop predicate kept every record while it ran: no second parse.
        kept = supervisor.tail.finish() if supervisor.tail.keep_all else None
        return conclude(config, ending, samples=kept)
    finally:
        folder_lock.release(config.path)
        if refused and made_here:
            _remove_if_empty(config.path)


def prepare_rundir(config: RunConfig) -> None:
    """Create and lock the run folder (see ``folder_lock``); refuse one that holds a run."""
    rundir = config.path
    if (rundir / SAMPLES_FILE).exists():
        raise UsageError(f"{rundir} already holds a run; choose another output folder.")
    folder_lock.claim(rundir)  # creates it too
    if (rundir / SAMPLES_FILE).exists():  # started while we waited for the lock
        folder_lock.release(rundir)
        raise UsageError(f"{rundir} already holds a run; choose another output folder.")
    try:
        config.dump(rundir / CONFIG_FILE)
        (rundir / STOP_FILE).unlink(missing_ok=True)
        (rundir / HEARTBEAT_FILE).touch()  # the heartbeat clock starts at spawn
    except OSError as exc:
        folder_lock.release(rundir)
        raise UsageError(f"cannot write to the output folder {rundir}: {exc.strerror}.") from None


def forget_run(rundir: Path) -> None:
    """Undo a refused run's files, so the same folder takes the corrected command."""
    for name in (SAMPLES_FILE, CONFIG_FILE, HEARTBEAT_FILE, STOP_FILE, STACKS_FILE, REFUSED_FILE):
        (rundir / name).unlink(missing_ok=True)
    log = rundir / WORKER_LOG
    if log.exists() and log.stat().st_size == 0:  # a log with words in it is kept
        log.unlink()


def _remove_if_empty(rundir: Path) -> None:
    """A refused run's folder that this run made, once it holds nothing again: no run
    folder for a run never run (a folder the user made stays)."""
    with contextlib.suppress(OSError):  # not empty (a worker log with words): kept
        rundir.rmdir()


def spawn_worker(config: RunConfig) -> subprocess.Popen[bytes]:
    """Start ``python -m harness.worker`` in a new session (its own process group)."""
    env = dict(os.environ)
    # Specs like ``tests.harness.fixtures.x:SCENARIO`` or ``--target mine:make`` resolve
    # from the user's folder as they do here, but after the installed packages: a
    # ``tabulate.py`` there must not replace the one torch imports (``-P`` keeps Python
    # from putting the folder first; the worker appends it).
    env[USER_DIR_ENV] = os.getcwd()
    env[PARENT_ENV] = str(os.getpid())
    with (config.path / WORKER_LOG).open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-P", "-m", "harness.worker", str(config.path / CONFIG_FILE)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )


def reanalyse(rundir: Path) -> RunOutcome:
    """Analyse a run folder that has samples but no summary, and write the summary.

    Its parent was killed or could not write (a full disk). A run whose samples
    do not end with the worker's ``end`` event was cut short and is
    ``interrupted``; one that recorded a crash is ``crashed``.
    """
    data = load_samples(rundir / SAMPLES_FILE)
    try:
        config = RunConfig.from_dict({**data.header.get("config", {}), "rundir": str(rundir)})
    except (UsageError, TypeError) as exc:
        raise UsageError(f"{rundir}: the samples header holds no usable run config ({exc}).") \
            from None
    folder_lock.claim(rundir)
    try:
        return conclude(config, ending_from_samples(data, ends_mid_line(rundir / SAMPLES_FILE)),
                        samples=data)
    finally:
        folder_lock.release(rundir)


def ending_from_samples(data: RunData, cut_mid_line: bool = False) -> Ending:
    crash = data.event("crash")
    if crash is not None:
        return Ending("crashed", [f"the scenario raised: {crash.get('error', 'an error')}."],
                      None, 0.0)
    if data.event("end") is None:
        why = ("its samples end in the middle of a line: the worker could not finish writing "
               "them (a full disk?)" if cut_mid_line else "its parent was killed?")
        return Ending(INTERRUPTED, [f"the run ended without its summary and before the "
                                   f"worker's end ({why}); the samples were analysed afresh."],
                      None, 0.0)
    return Ending("finished", [], None, 0.0)


def ends_mid_line(path: Path) -> bool:
    """Whether the file's last line lacks its newline (a write the disk refused)."""
    try:
        with path.open("rb") as samples:
            samples.seek(-1, os.SEEK_END)
            return samples.read(1) != b"\n"
    except OSError:
        return False


def cut_short(verdict: str, reasons: list[str]) -> str:
    """A cut-short run never passes, whatever its data showed; a failure its partial
    data already confirmed (a leak, a crash) stands, as more samples could not undo it."""
    if verdict in FAILING:
        reasons.insert(1, f"the partial data already confirmed: {verdict}.")
        return verdict
    reasons.insert(1, f"the partial data showed: {verdict}.")
    return INTERRUPTED


def conclude(
    config: RunConfig, ending: Ending, command: str | None = None, *,
    samples: RunData | None = None,
) -> RunOutcome:
    """Analyse whatever was sampled and write ``summary.json``; ``command`` repeats the
    run (default: the ``leak-harness run`` line of ``config``); ``samples``: the ones
    already parsed (else the file is read)."""
    reasons = list(ending.reasons)
    data, why = (samples, None) if samples is not None else \
        open_samples(config.path / SAMPLES_FILE)
    if why is not None:
        reasons.append(f"no samples to analyse: {why}")
    analysis = analyse(data, config, ending, reasons)
    if analysis is not None:
        verdict = analysis.verdict
        # With a process verdict the analysis repeats our first reason first.
        reasons += analysis.reasons[1:] if ending.status in ENDING_VERDICTS else analysis.reasons
    else:
        verdict = ending.status if ending.status in ENDING_VERDICTS else "error"
    if ending.status == INTERRUPTED:
        verdict = cut_short(verdict, reasons)
    summary = Summary(
        scenario=config.scenario,
        injected=list(config.inject),
        verdict=verdict,
        reasons=reasons,
        metrics=dict(analysis.metrics) if analysis else {},
        time_to_detect_s=detected_at(data, verdict, analysis),
        duration_s=run_length(data, ending),
        ops=run_ops(data),
        command=command or reproduce_command(config),
        run=run_facts(config, ending, analysis, data),
        analysis=analysis.details if analysis else None,
    )
    write_summary(config.path, summary)
    tidy(config.path)
    return RunOutcome(verdict, config.path, analysis, summary, data, why)


def analyse(
    data: RunData | None, config: RunConfig, ending: Ending, reasons: list[str]
) -> Analysis | None:
    if data is None:
        return None
    process = ending.status if ending.status in ENDING_VERDICTS else None
    try:
        return summarize(
            data, config.budgets, config.warmup_s,
            outcome=process, outcome_reason=ending.reasons[0] if process else None,
            skippable=config.skippable_budgets, until_s=ending.judged_until_s,
        )
    except Exception as exc:  # verdict "error" with the sentence beats a traceback
        reasons.append(f"the analysis failed: {exc}")
        return None


def detected_at(data: RunData | None, verdict: str, analysis: Analysis | None) -> float | None:
    """Seconds to the verdict: a crash is detected when it happens."""
    crash = data.event("crash") if data is not None else None
    if verdict == "crashed" and crash is not None:
        return float(crash["t"])
    return analysis.time_to_detect_s if analysis else None


def run_facts(config: RunConfig, ending: Ending, analysis: Analysis | None,
              data: RunData | None = None) -> RunFacts:
    """The run's own facts beside its verdict, for reports and for people."""
    start = data.event("start") if data is not None else None
    code = start.get("target") if start is not None else None
    return RunFacts(
        rundir=str(config.path), ending=ending.status, exit_code=ending.exit_code,
        budgets=tuple(config.budget_texts),  # what was judged, after the overrides
        window_s=analysis.window_s if analysis else None,
        target=config.target, target_code=str(code) if code else None,
    )


def run_length(data: RunData | None, ending: Ending) -> float:
    """Seconds of workload the samples cover (the wall time if none were taken)."""
    if data is None:
        return round(ending.wall_s, 3)
    # A crash ends the workload: the header's "crashed after" and the plot's marker agree.
    end = data.event("loop_end") or data.event("end") or data.event("crash")
    if end is not None:
        return float(end["t"])
    return float(data.rss.t[-1]) if len(data.rss) else 0.0


def run_ops(data: RunData | None) -> int:
    if data is None:
        return 0
    end = data.event("end")
    if end is not None:
        return int(end["ops"])
    return int(data.ops.v[-1]) if len(data.ops) else 0


def tidy(rundir: Path) -> None:
    """Remove the control files; keep stacks.txt only if something was dumped into it."""
    for name in (HEARTBEAT_FILE, STOP_FILE):
        (rundir / name).unlink(missing_ok=True)
    stacks = rundir / STACKS_FILE  # opened up front by the worker for faulthandler
    if stacks.exists() and stacks.stat().st_size == 0:
        stacks.unlink()
