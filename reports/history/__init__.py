"""The history drawn and said: one trend plot per scenario, a sentence per flag.

The rows and the regression rule are the harness's (:mod:`harness.history`);
this package only renders them.
"""

from __future__ import annotations

from reports.history.plots import write_trend_plots
from reports.history.words import flag_sentence

__all__ = ["flag_sentence", "write_trend_plots"]
