"""The report of one run: ``report.html`` and its plots, written into the run folder.

- :mod:`~reports.run.report`: ``write_run_report`` (reads the files, writes plots and page)
- :mod:`~reports.run.model`: the page's content from the result files (pure)
- :mod:`~reports.run.page`: the HTML
- :mod:`~reports.run.plots`: memory, gc and garbage plots; :mod:`~reports.run.gauge_plots`
- :mod:`~reports.run.plotdata`: arrays the gc and garbage plots draw (pure)
- :mod:`~reports.run.facts`: growth in words, as other reports quote it
"""

from reports.run.report import load_run_model, write_run_report

__all__ = ["load_run_model", "write_run_report"]
