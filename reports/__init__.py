"""Report generators: read run folders through ``harness.runfiles``, write PNG, HTML, JUnit.

One package per thing rendered; import the one you need. This package imports
nothing, so ``import reports`` stays cheap, and matplotlib loads only when a
plot is drawn (:mod:`reports.render.figure`).

- :mod:`reports.run`: ``write_run_report``, the plots and ``report.html`` of one run
- :mod:`reports.suite`: ``write_suite_report``, the detection matrix, ``junit.xml``, text,
  of a suite :mod:`harness.suite` judged
- :mod:`reports.compare`: ``write_comparison``, two runs on shared axes, growth ratio
- :mod:`reports.history`: ``write_trend_plots`` and ``flag_sentence`` over the history
- :mod:`reports.render`: what they share: HTML pieces, number formats, figures,
  downsampling, the fitted line as ``summary.json`` stores it

Reports draw what the summary judged: numbers and fitted lines come from
``summary.json``; the samples only add the curves to draw them over. Which
cell of a suite is right, and every exit code, is decided below them, in the harness.
"""
