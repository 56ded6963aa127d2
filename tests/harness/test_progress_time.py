"""Time as a user meets it: a run says at its start how long it is expected to take (the
duration plus the measured cost of its start and end), and off a terminal it says once
that it is finishing and what that is, instead of once every ten seconds."""

from __future__ import annotations

import io

from harness.config import RunConfig
from harness.parent.progress import FINISHING, OVERHEAD_S, ProgressLine, expected
from harness.parent.supervisor import Snapshot


def test_off_a_terminal_finishing_is_said_once_with_what_it_does() -> None:
    stream = io.StringIO()
    line = ProgressLine(stream, "x", live=False)
    for tenth in range(0, 600):  # 20 s of workload, then 40 s of finishing
        line.update(Snapshot(tenth / 10, 20.0, tenth, 10.0, "measure", None))
    lines = stream.getvalue().splitlines()
    said = [ln for ln in lines if "finishing" in ln]
    assert said == [f"x  20/20 s  {FINISHING}"]
    assert "last windows" in FINISHING and "analysed" in FINISHING
    assert [ln.split("  ")[1] for ln in lines if ln not in said] == ["10.0/20 s", "20.0/20 s"]


def test_on_a_terminal_the_finishing_line_is_short_enough_not_to_wrap() -> None:
    stream = io.StringIO()
    line = ProgressLine(stream, "mamba-lru", live=True)
    line.update(Snapshot(24.0, 20.0, 5, 0.0, "measure", None))
    assert len(stream.getvalue().replace("\r\x1b[K", "")) <= 80


def test_a_run_says_its_expected_wall_time_at_the_start() -> None:
    config = RunConfig(scenario="x", rundir="r", duration_s=20.0, warmup_s=2.0)
    stream = io.StringIO()
    ProgressLine(stream, "x", live=True).begin(config)
    extra = OVERHEAD_S["default"]
    assert stream.getvalue() == (
        f"running x for 20 s in r; expected wall time about {20 + extra:g}s (the duration + "
        f"about {extra:g} s to start, take the last windows, analyse and report)\n")
    server = RunConfig(scenario="x", rundir="r", duration_s=600.0, warmup_s=2.0,
                       gc_mode="server")
    assert f"about {OVERHEAD_S['server']:g} s" in expected(server)
    assert "about 10m27s" in expected(server)
    assert expected(RunConfig(scenario="x", rundir="r", duration_s=None, max_ops=10,
                              warmup_s=0.0)) == ""
