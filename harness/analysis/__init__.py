"""Analysis: pure functions from a run's raw samples to growth, verdicts and reasons.

Post-hoc only: nothing here touches a live process (the cycle explainer that
runs in the worker is :mod:`harness.worker.heapgraph.cycles`).
Import the module you need; this package imports nothing on purpose. Budgets,
units and the slopes' names are the contract's (:mod:`harness.budgets`,
:mod:`harness.units`, :mod:`harness.basis`).

- :mod:`~harness.analysis.slope`: Theil–Sen slope, autocorrelation-honest interval
- :mod:`~harness.analysis.shapes`: warm-up, sawtooth, step, sustained level
- :mod:`~harness.analysis.trend`: ``growth`` -> ``Trend`` (per-hour growth of a series)
- :mod:`~harness.analysis.calibration`: the growth of healthy runs, judged against
- :mod:`~harness.analysis.fitline`: the judged line of a series, as summaries store it
- :mod:`~harness.analysis.garbage_rate`: cyclic garbage per kop (young collections included)
- :mod:`~harness.analysis.garbage`: garbage and live objects by type, collections per minute
- :mod:`~harness.analysis.cycle_shapes`: ``aggregate_cycles`` over windows
- :mod:`~harness.analysis.verdict`: named rules, ``combine``, time to detect
- :mod:`~harness.analysis.metrics`, :mod:`~harness.analysis.runview`: metric names, prefixes
- :mod:`~harness.analysis.describe`: the closing sentences: shapes, a short run, resolution
- :mod:`~harness.analysis.summary`: ``summarize(run, budgets) -> Analysis``
"""
