"""The report of one run: ``report.html`` and its plots, written into the run folder.

- :mod:`~reports.run.report`: ``write_run_report`` (renders a loaded run: plots and page)
- :mod:`~reports.run.model`: the page's content from the result files (pure)
- :mod:`~reports.run.page`: the HTML
- :mod:`~reports.run.plots`: memory, gc and garbage plots; :mod:`~reports.run.gauge_plots`
- :mod:`~reports.run.plotdata`: arrays the gc and garbage plots draw (pure)
- :mod:`~reports.run.facts`: growth in words, as other reports quote it
"""

from reports.run.report import write_run_report

__all__ = ["write_run_report"]
