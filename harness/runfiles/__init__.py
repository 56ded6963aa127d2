"""The run-folder format, in one place.

- :mod:`~harness.runfiles.names`: the file names of a run folder.
- :mod:`~harness.runfiles.samples`: the ``samples.jsonl`` writer, schema, version
  and header (the worker writes it).
- :mod:`~harness.runfiles.rundata`: the line kinds and their in-memory form.
- :mod:`~harness.runfiles.reader`: ``load_samples`` (the parent and reports read it).
- :mod:`~harness.runfiles.summary`: ``summary.json``, its schema and versions (loaded and
  validated; the analysis upgrades older ones, :mod:`harness.analysis.upgrade`).
- :mod:`~harness.runfiles.facts`: what suites, history and comparisons quote from a summary.

This package imports nothing on purpose: the worker loads the writer only.
"""
