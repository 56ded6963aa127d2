"""The parent process: starts a worker per run, watches it, and analyses what it wrote.

:mod:`~harness.parent.runner` prepares the run folder, spawns the worker and
concludes (analysis, ``summary.json``); :mod:`~harness.parent.supervisor` polls
the worker through :mod:`~harness.parent.watchdog` (wall clock, heartbeat, RSS
ceiling) and :mod:`~harness.parent.tail` (samples as they land);
:mod:`~harness.parent.progress` draws the live line; :mod:`~harness.parent.matrix`
runs the detection matrix (every scenario fixed and injected). The parent never
measures inside itself.
"""
