"""Two runs side by side: shared axes and the ratio of their growth rates.

- :mod:`~reports.compare.report`: ``write_comparison``, the sides and the honest ratio
- :mod:`~reports.compare.plot`: ``compare.png``
"""

from reports.compare.report import Comparison, Side, write_comparison

__all__ = ["Comparison", "Side", "write_comparison"]
