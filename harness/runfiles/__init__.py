"""The run-folder format, in one place.

- :mod:`~harness.runfiles.names`: the file names of a run folder.
- :mod:`~harness.runfiles.samples`: the ``samples.jsonl`` writer, schema, version
  and header (the worker writes it).
- :mod:`~harness.runfiles.rundata`: the line kinds and their in-memory form.
- :mod:`~harness.runfiles.reader`: ``load_samples``, and ``open_run``: a run folder read
  once, as the faces hand it to reports.
- :mod:`~harness.runfiles.summary`: ``summary.json``, its schema and versions (every
  readable version decoded into the current one by moving data);
  :mod:`~harness.runfiles.summary_records`: the typed records it is made of.
- :mod:`~harness.runfiles.facts`: what suites, history and comparisons quote from a summary.

This package imports nothing on purpose: the worker loads the writer only.
"""
