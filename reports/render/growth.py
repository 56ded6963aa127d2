"""Growth in words, as suite, history and compare reports quote it.

The lookups these words are made from (which growth metric to quote, the
column of a run) live with the summary, :mod:`harness.runfiles.facts`.
"""

from __future__ import annotations

from harness.runfiles.facts import Growth
from reports.render.numbers import format_growth


def describe_growth(growth: Growth | None) -> str:
    """``grows +3.7 GB/h [3.5, 3.9]`` or ``no growth (...)``: never a bare tiny slope."""
    if growth is None:
        return "growth unknown (no samples of it)"
    shown = format_growth(growth.per_h, growth.ci, growth.unit)
    if growth.status == "leak":
        return f"grows {shown}, over its budget"
    if growth.confirmed:
        # The budget judged what is left after the run's allowances (the fixed cache's own
        # growth, a tree still filling): the raw slope shown may exceed the budget's limit.
        judged = {"pass": ", within its budget after the run's allowances",
                  "suspicious": ", not confirmed over its budget"}.get(growth.status or "", "")
        return f"grows {shown}{judged}"
    if growth.per_h > 0:
        return f"no growth ({shown}, interval includes zero)"
    return f"no growth ({shown})"
