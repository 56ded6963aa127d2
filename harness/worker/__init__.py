"""The worker process: everything that runs inside the process being measured.

The parent starts ``python -m harness.worker <rundir>/config.json`` once per
run. :mod:`~harness.worker.main` builds the workload, :mod:`~harness.worker.gcmode`
shapes the GC, :mod:`~harness.worker.loop` drives ``step()`` and polls the
:mod:`~harness.worker.samplers`, which stream every sample through
:mod:`harness.runfiles.samples`. Nothing here imports the parent, the CLI,
the analysis or the reports: the import rule is tested
(``tests/harness/test_layers.py``), so the measured process carries no weight
the parent needs.
"""
