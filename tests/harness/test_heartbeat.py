"""The heartbeat's keep-alive: beats while a slow phase runs, and only for so long."""

from __future__ import annotations

import os
import time
from pathlib import Path

from harness.control import Heartbeat


def test_keep_alive_beats_during_the_block_then_stops_at_its_limit(tmp_path: Path) -> None:
    heartbeat = Heartbeat(tmp_path)
    os.utime(heartbeat.path, (0, 0))  # long silent
    with heartbeat.keep_alive(limit_s=0.3):
        time.sleep(0.6)
        beaten = heartbeat.path.stat().st_mtime
        assert beaten > 0  # the thread beat for the phase
        time.sleep(0.5)
        # Past its limit the thread is gone: a phase that hangs goes silent.
        assert heartbeat.path.stat().st_mtime == beaten
    assert heartbeat.path.stat().st_mtime > beaten  # the phase's end is a beat
