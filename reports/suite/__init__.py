"""A suite of runs: the detection matrix as ``index.html``, ``junit.xml`` and a text summary.

The suite comes judged (:class:`harness.suite.Suite`); these modules render it.

- :mod:`~reports.suite.model`: the paths written, and the phrases quoted from each cell's summary
- :mod:`~reports.suite.report`: ``write_suite_report``, the three files of a judged suite
- :mod:`~reports.suite.outputs`: the three outputs, rendered from the judged cells
"""

from reports.suite.model import SuitePaths
from reports.suite.report import write_suite_report

__all__ = ["SuitePaths", "write_suite_report"]
