"""A suite of runs: the detection matrix as ``index.html``, ``junit.xml`` and a text summary.

- :mod:`~reports.suite.report`: ``write_suite_report``, cells and whether each is right
- :mod:`~reports.suite.outputs`: the three outputs, rendered from the judged cells
"""

from reports.suite.report import Cell, SuiteReport, build_cells, write_suite_report

__all__ = ["Cell", "SuiteReport", "build_cells", "write_suite_report"]
