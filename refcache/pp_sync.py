"""Pipeline-parallel forwarding of HiCache event counts, and a local pipeline.

Every HiCache event round reduces small count tensors and forwards them down
the pipeline so each stage applies the same update to its radix tree: rank > 0
first receives from rank - 1, then every rank but the last ``isend``s a clone
to rank + 1 and keeps the returned ``Work`` in ``work_list``. Each Work pins
its cloned tensor until it is reaped, which is incident 3: reaped only
non-blocking, a lagging next rank lets the list (and host memory) grow
without bound. ``drain_async_work`` is the fix.

``start_pipeline`` builds a real gloo pipeline on 127.0.0.1: rank 0 in this
process, ranks 1..N-1 in spawned daemon processes that receive (and forward)
with a lag per round, the lagging next rank of the incident.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from typing import Any, Protocol

import torch
import torch.distributed as dist

Work = Any  # torch.distributed Work (its Python type is not public API)
PAYLOAD_DTYPE = torch.int32  # what HiCache's count tensors use; peers must agree


class PPSync:
    """The ``_pp_sync`` step of one pipeline rank and its list of pending sends."""

    def __init__(self, rank: int, world_size: int, group: Any = None) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside a pipeline of {world_size}")
        self.rank, self.world_size, self.group = rank, world_size, group
        self.work_list: list[Work] = []

    def sync(self, data: torch.Tensor) -> torch.Tensor:
        """Receive the previous stage's data (rank > 0) and forward it (not the last)."""
        if self.rank > 0:
            received = torch.empty_like(data)
            dist.recv(received, src=self.rank - 1, group=self.group)
            data = received
        if self.rank < self.world_size - 1:
            # The clone is what the Work keeps alive until it is reaped.
            work = dist.isend(data.clone(), dst=self.rank + 1, group=self.group)
            self.work_list.append(work)
        return data

    def drain_async_work(self) -> None:
        """The fix: wait for every pending send, then forget them.

        Bounds the list by one round's sends, and a slow next rank throttles this
        one. Risk: ``wait()`` on a dead peer blocks until the process group's
        timeout, so the harness must watch for hangs.
        """
        for work in self.work_list:
            work.wait()
        self.work_list.clear()

    def reap_completed(self) -> None:
        """The broken reap: pop only the leading run of completed Works.

        On gloo a send Work reports ``is_completed() == False`` until ``wait()``
        is called, even after the peer has received the data (verified in
        tests/refcache/test_pp_sync.py), so on gloo this never reaps anything and
        ``work_list`` grows by one Work per sync, forever.
        """
        while self.work_list and self.work_list[0].is_completed():
            self.work_list.pop(0)


class PPSyncLike(Protocol):
    """What the caches use of ``PPSync`` (tests pass a fake)."""

    work_list: list[Any]

    def sync(self, data: torch.Tensor) -> torch.Tensor: ...

    def drain_async_work(self) -> None: ...

    def reap_completed(self) -> None: ...


# ---------------------------------------------------------------------- local pipeline
def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (the OS picks it; we release it at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _exit_when_orphaned(parent_pid: int, poll_s: float = 0.2) -> None:
    """Peer-side watchdog: a peer blocked in recv must still die with its parent.

    ``parent_pid`` comes from the parent, not from ``os.getppid()`` here: a
    parent killed while the peer was still importing torch has already been
    replaced by init, and the peer would wait out the whole rendezvous timeout.
    """
    while os.getppid() == parent_pid:
        time.sleep(poll_s)
    os._exit(0)


def _peer_main(
    rank: int,
    world_size: int,
    init_method: str,
    payload_elems: int,
    lag_s: float,
    timeout_s: float,
    parent_pid: int,
) -> None:
    """A lagging downstream stage: receive each round (and forward unless last)."""
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    dist.init_process_group(
        "gloo",
        init_method=init_method,
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    buf = torch.empty(payload_elems, dtype=PAYLOAD_DTYPE)
    try:
        while True:
            time.sleep(lag_s)
            dist.recv(buf, src=rank - 1)
            if rank < world_size - 1:
                dist.send(buf, dst=rank + 1)
    except RuntimeError:
        pass  # rank 0 went away or timed out: the pipeline is over
    finally:
        os._exit(0)  # skip gloo teardown, which can block on a dead peer


@dataclass
class Pipeline:
    """Rank 0's handle on a local pipeline: its ``PPSync`` and the peer processes."""

    pp: PPSync
    peers: list[BaseProcess]
    init_method: str
    join_timeout_s: float = 5.0
    closed: bool = field(default=False, init=False)

    def close(self) -> None:
        """Stop the peers (terminate, join with a timeout, kill) and destroy the group."""
        if self.closed:
            return
        self.closed = True
        for proc in self.peers:
            if proc.is_alive():
                proc.terminate()
        for proc in self.peers:
            proc.join(self.join_timeout_s)
            if proc.is_alive():
                proc.kill()
                proc.join(self.join_timeout_s)
        # Pending sends would wait for peers that are gone: drop them before teardown.
        self.pp.work_list.clear()
        if dist.is_initialized():
            dist.destroy_process_group()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _init_method() -> str:
    host = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = os.environ.get("MASTER_PORT") or str(free_port(host))
    return f"tcp://{host}:{port}"


def spawn_peers(
    world_size: int, init_method: str, payload_elems: int, lag_s: float, timeout_s: float
) -> list[BaseProcess]:
    """Ranks 1..world_size-1 as fresh processes; each dies when this process does."""
    ctx = multiprocessing.get_context("spawn")
    peers: list[BaseProcess] = []
    for rank in range(1, world_size):
        args = (rank, world_size, init_method, payload_elems, lag_s, timeout_s, os.getpid())
        proc = ctx.Process(target=_peer_main, args=args, daemon=True, name=f"pp-rank-{rank}")
        proc.start()
        peers.append(proc)
    return peers


def start_pipeline(
    world_size: int = 2,
    lag_s: float = 0.05,
    payload_elems: int = 1,
    timeout_s: float = 60.0,
) -> Pipeline:
    """Start a gloo pipeline on one machine; this process becomes rank 0.

    ``lag_s`` is how long each peer sleeps before every receive (the lagging
    next rank); ``payload_elems`` must match the tensors rank 0 syncs
    (``PAYLOAD_DTYPE``); ``timeout_s`` bounds the rendezvous and every gloo
    operation. Only one pipeline per process: it owns the default group.
    """
    if world_size < 2:
        raise ValueError("a pipeline needs at least two ranks")
    if dist.is_initialized():
        raise RuntimeError("the default process group is already initialised")
    init_method = _init_method()
    peers = spawn_peers(world_size, init_method, payload_elems, lag_s, timeout_s)
    pipeline = Pipeline(PPSync(0, world_size), peers, init_method)
    try:
        dist.init_process_group(
            "gloo",
            init_method=init_method,
            rank=0,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    except BaseException:
        pipeline.close()
        raise
    return pipeline
