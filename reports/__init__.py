"""Report generators: read run folders through ``harness.results``, write PNG, HTML, JUnit, history.

Entry points (import the module you need; this package imports nothing, so
``import reports`` stays cheap and matplotlib loads only when a plot is drawn):

- :func:`reports.run_report.write_run_report`: plots and ``report.html`` of one run
- :func:`reports.suite.write_suite_report`: detection matrix, ``junit.xml``, text summary
- :func:`reports.compare.write_comparison`: two runs on shared axes, growth ratio
- :mod:`reports.history`: ``append_suite``, ``trends``, ``flag_regressions``,
  ``write_trend_plots`` over an SQLite history
"""
