"""The report of one run: ``report.html`` and its plots, written into the run folder.

- :mod:`~reports.run.report`: ``write_run_report`` (renders a loaded run: plots and page)
- :mod:`~reports.run.model`: the page's content from the loaded run (pure)
- :mod:`~reports.run.page`: the HTML
- :mod:`~reports.run.plots`: memory, gc and garbage plots; :mod:`~reports.run.gauge_plots`
- :mod:`~reports.run.plotdata`: arrays the gc and garbage plots draw (pure)
- :mod:`~reports.run.judged_plot`: what convicted the run, drawn first (from
  :mod:`reports.render.judged`)
"""

from reports.run.report import write_run_report

__all__ = ["write_run_report"]
