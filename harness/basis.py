"""The slopes a series' growth can be judged on, and their names in metrics and sentences.

A module of its own so that reports can name a stored fitted line's basis
without importing the fitting code (:mod:`harness.analysis.trend`).
"""

from __future__ import annotations

from typing import Literal

Basis = Literal["all", "floor", "after_step", "tail"]

BASIS_SUFFIX = {
    "all": "growth",
    "floor": "floor_growth",
    "tail": "tail_growth",
    "after_step": "after_step_growth",
}
BASIS_WORDS = {
    "all": "growth",
    "floor": "growth of the floor under its drops",
    "tail": "growth in the last third",
    "after_step": "growth after the step",
}
