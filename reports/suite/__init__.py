"""A suite of runs: the detection matrix as ``index.html``, ``junit.xml`` and a text summary.

- :mod:`~reports.suite.model`: ``Cell``, one run's place and whether it is right
- :mod:`~reports.suite.report`: ``write_suite_report``, the cells of a suite of run folders
- :mod:`~reports.suite.outputs`: the three outputs, rendered from the judged cells
"""

from reports.suite.model import Cell
from reports.suite.report import SuiteReport, build_cells, write_suite_report

__all__ = ["Cell", "SuiteReport", "build_cells", "write_suite_report"]
