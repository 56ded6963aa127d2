"""Two runs side by side: shared axes and the ratio of their growth rates.

- :mod:`~reports.compare.model`: ``Side``, one run folder as compared
- :mod:`~reports.compare.report`: ``write_comparison``, the page and the honest ratio
- :mod:`~reports.compare.plot`: ``compare.png``
"""

from reports.compare.model import Side
from reports.compare.report import Comparison, write_comparison

__all__ = ["Comparison", "Side", "write_comparison"]
