"""PPSync and the local gloo pipeline (127.0.0.1, free ports, spawned peers).

What is pinned down here: gloo's send Work reports ``is_completed() == False``
until ``wait()`` (so the non-blocking reap never reaps), the drain bounds the
list and lets a lagging peer throttle rank 0, and no peer outlives its
pipeline or its parent. Every gloo test runs under a hang guard.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import torch

from refcache.pp_sync import PAYLOAD_DTYPE, Pipeline, PPSync, start_pipeline

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 90  # a stuck gloo call dumps every stack and ends the session


@pytest.fixture
def no_hang() -> Iterator[None]:
    faulthandler.dump_traceback_later(HANG_GUARD_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def live_children() -> list[psutil.Process]:
    """Our live child processes, except multiprocessing's shared resource tracker
    (started by the first spawn; it exits when this process does)."""
    alive = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            if any("resource_tracker" in part for part in child.cmdline()):
                continue
        except psutil.NoSuchProcess:
            continue
        alive.append(child)
    return alive


def close_and_check(pipeline: Pipeline) -> None:
    pipeline.close()
    for proc in pipeline.peers:
        assert not proc.is_alive(), f"peer {proc.pid} survived close()"
    assert live_children() == []


def start(lag_s: float = 0.0, payload: int = 4) -> Pipeline:
    return start_pipeline(world_size=2, lag_s=lag_s, payload_elems=payload, timeout_s=20)


def test_single_rank_sync_is_local() -> None:
    pp = PPSync(0, 1)
    data = torch.arange(3, dtype=PAYLOAD_DTYPE)
    assert pp.sync(data) is data
    assert pp.work_list == []
    with pytest.raises(ValueError):
        PPSync(2, 2)


@pytest.mark.integration
@pytest.mark.usefixtures("no_hang")
def test_gloo_send_work_reports_incomplete_until_wait() -> None:
    pipeline = start()
    try:
        pipeline.pp.sync(torch.zeros(4, dtype=PAYLOAD_DTYPE))
        work = pipeline.pp.work_list[0]
        time.sleep(0.5)  # the peer (no lag) has long received it
        assert work.is_completed() is False
        pipeline.pp.reap_completed()
        assert len(pipeline.pp.work_list) == 1  # the broken reap takes nothing
        t0 = time.monotonic()
        pipeline.pp.drain_async_work()
        assert time.monotonic() - t0 < 0.25  # wait() had nothing left to wait for
        assert work.is_completed() is True
        assert pipeline.pp.work_list == []
    finally:
        close_and_check(pipeline)


@pytest.mark.integration
@pytest.mark.usefixtures("no_hang")
def test_reap_lets_the_list_grow_and_drain_bounds_it() -> None:
    pipeline = start(payload=1024)
    pp, data = pipeline.pp, torch.zeros(1024, dtype=PAYLOAD_DTYPE)
    try:
        for _ in range(100):  # broken rounds: two sends, reap at the end
            pp.sync(data)
            pp.sync(data)
            pp.reap_completed()
        assert len(pp.work_list) == 200
        for _ in range(100):  # fixed rounds: drain at the start, two sends
            pp.drain_async_work()
            pp.sync(data)
            pp.sync(data)
            assert len(pp.work_list) == 2
    finally:
        close_and_check(pipeline)


@pytest.mark.integration
@pytest.mark.usefixtures("no_hang")
def test_lagging_peer_throttles_the_draining_rank() -> None:
    lag, rounds = 0.02, 15
    pipeline = start(lag_s=lag)
    pp, data = pipeline.pp, torch.zeros(4, dtype=PAYLOAD_DTYPE)
    try:
        pp.sync(data)
        pp.drain_async_work()  # the peer is up and in its loop
        t0 = time.monotonic()
        for _ in range(rounds):
            pp.drain_async_work()
            pp.sync(data)
        pp.drain_async_work()
        # wait() returns once the peer has received: rank 0 runs at the peer's pace.
        assert time.monotonic() - t0 >= 0.7 * rounds * lag
    finally:
        close_and_check(pipeline)


PARENT = """
import time
from refcache.pp_sync import start_pipeline
p = start_pipeline(world_size=3, lag_s=0.0, payload_elems=1, timeout_s=20)
print(" ".join(str(proc.pid) for proc in p.peers), flush=True)
time.sleep(120)
"""


PARENT_EARLY = """
import time
from refcache.pp_sync import free_port, spawn_peers
init = f"tcp://127.0.0.1:{free_port()}"
print(" ".join(str(p.pid) for p in spawn_peers(2, init, 1, 0.0, 30)), flush=True)
time.sleep(120)
"""


def _gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


@pytest.mark.integration
@pytest.mark.usefixtures("no_hang")
@pytest.mark.parametrize("script", [PARENT, PARENT_EARLY], ids=["in-loop", "still-starting"])
def test_peers_exit_when_their_parent_dies(script: str) -> None:
    """Killed in the peers' loop, or while they still import torch (the rendezvous
    would hold them 30 s): either way they are gone within 10 s."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(  # leaving the block closes the pipe
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env
    ) as parent:
        try:
            assert parent.stdout is not None
            peers = [int(pid) for pid in parent.stdout.readline().split()]
            assert peers
            parent.send_signal(signal.SIGKILL)  # no close(), no atexit: the peers must notice
            parent.wait(10)
            deadline = time.monotonic() + 10
            while not all(_gone(pid) for pid in peers) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert all(_gone(pid) for pid in peers), "a peer outlived its parent"
        finally:
            parent.kill()
            parent.wait(10)
