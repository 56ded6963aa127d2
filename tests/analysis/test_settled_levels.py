"""Levels read once what they count had time to go: one reading convicts."""

from __future__ import annotations

import numpy as np

from harness.analysis.summary import summarize
from harness.runfiles.rundata import Series
from tests.analysis.synth import MB, budgets, run_data, times


def test_slots_held_after_the_last_quiet_stretch_convict_where_a_spike_does_not() -> None:
    t = times(20, 10.0)
    run = run_data((t, np.full(t.size, 300 * MB)), warmup_end_s=2.0, loop_end_s=20.0)
    last = np.where(t >= t[-1], 129.0, 0.0)  # a stretch ended just before the run did
    run.gauges["held_in_transfer"] = Series(t, last, "")
    run.gauges["locked_while_idle"] = Series(t, last, "")  # a reading mid-operation
    analysis = summarize(run, budgets("held_in_transfer: <= 0", "locked_while_idle: <= 0"))
    assert analysis.verdict == "leak", analysis.reasons
    assert analysis.reasons[0] == ("held_in_transfer read 129 after what it counts had time "
                                   "to go, over 'held_in_transfer: <= 0'.")
    assert "locked_while_idle peaked at 129 over 'locked_while_idle: <= 0' but did not stay " \
           "there." in analysis.reasons
