"""The names of the files in a run folder: the only place they are written out.

A run folder holds what the parent hands the worker (``config.json``), what the
worker streams (``samples.jsonl``), the control files both sides touch
(``heartbeat``, ``stop``), what a refusal or a failure leaves (``refused.txt``,
``traceback.txt``, ``stacks.txt``, ``worker.log``), the verdict (``summary.json``) and the report
(``report.html`` with its plots, ``rss.png``, ``gc.png``, ``garbage.png`` and
``gauges.png``).
"""

from __future__ import annotations

CONFIG_FILE = "config.json"
SAMPLES_FILE = "samples.jsonl"
HEARTBEAT_FILE = "heartbeat"
LOCK_FILE = "run.lock"  # held (flock) by the parent for the run's whole life
STOP_FILE = "stop"
STACKS_FILE = "stacks.txt"
TRACEBACK_FILE = "traceback.txt"
REFUSED_FILE = "refused.txt"
WORKER_LOG = "worker.log"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"
JUDGED_PLOT = "judged.png"  # the failing budgets' series, drawn first
RSS_PLOT = "rss.png"
GC_PLOT = "gc.png"
GARBAGE_PLOT = "garbage.png"
GAUGES_PLOT = "gauges.png"
CLOSED_EVENT = "closed"  # the worker's last event: its end-of-run check passed too
THREAD_DIED_EVENT = "thread_died"  # a thread ended by an uncaught exception (worker.watch_threads)
# An allocation window a recorder did not take, with its reason (harness.record.windows).
WINDOW_SKIPPED_EVENT = "attribution_skipped"
SUITE_INDEX = "index.html"  # a suite's page, two folders above each of its cells
# A recording (``leak-harness record``): one folder per recorded process inside it.
PROGRAM_LOG = "program.log"  # the program's own output, as it printed it
PROCESS_PREFIX = "proc-"  # proc-<pid>/: a run folder as above
RECORD_SUMMARY = "record.json"  # every process's verdict and the overall one
RECORD_INDEX = "record.html"
