"""An asynchronous cache controller for the host tier (SGLang's HiCacheController).

``write`` (device -> host) and ``load`` (host -> device) enqueue copies that
finish later, as DMA on a copy stream would. Completion is driven by ``tick``:
the cache calls it once per event round (``check_hicache_events``), and a
transfer issued at tick ``t`` completes at tick ``t + latency_ticks``. Ticks
instead of a worker thread keep every run reproducible from its seed while
still leaving transfers in flight across scheduler operations, which is where
the cache's locking has to be right.

A completed transfer really copies rows between the device KV buffer and
``HostPool.buffer`` (and, when given, Mamba states between a device and a host
``StatePool``), then puts its node id on ``ack_write_queue`` or
``ack_load_queue`` for the cache's ``writing_check`` / ``loading_check``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import torch

from refcache.pools import HostPool, StatePool


@dataclass
class Transfer:
    kind: str  # "write" (device -> host) or "load" (host -> device)
    node_id: int
    src: torch.Tensor
    dst: torch.Tensor
    due: int
    state: tuple[torch.Tensor, torch.Tensor] | None = None  # (src slot, dst slot)


class CacheController:
    def __init__(
        self,
        device_kv: torch.Tensor,
        host_pool: HostPool,
        latency_ticks: int = 2,
        device_states: StatePool | None = None,
        host_states: StatePool | None = None,
    ) -> None:
        if device_kv.shape[1:] != host_pool.buffer.shape[1:]:
            raise ValueError("device KV rows and host buffer rows must have the same shape")
        if latency_ticks < 0:
            raise ValueError("latency_ticks must be >= 0")
        self.device_kv = device_kv
        self.host_pool = host_pool
        self.device_states = device_states
        self.host_states = host_states
        self.latency_ticks = latency_ticks
        self.clock = 0
        self.pending: deque[Transfer] = deque()
        self.ack_write_queue: deque[int] = deque()
        self.ack_load_queue: deque[int] = deque()

    # ------------------------------------------------------------------ enqueue
    def write(
        self,
        device_indices: torch.Tensor,
        host_indices: torch.Tensor,
        node_id: int,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        """Back up device rows (and a device state slot) into host rows (and slot)."""
        self._enqueue("write", node_id, device_indices, host_indices, state)

    def load(
        self,
        host_indices: torch.Tensor,
        device_indices: torch.Tensor,
        node_id: int,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        """Bring host rows (and a host state slot) back into device rows (and slot)."""
        self._enqueue("load", node_id, host_indices, device_indices, state)

    def _enqueue(
        self,
        kind: str,
        node_id: int,
        src: torch.Tensor,
        dst: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> None:
        if len(src) != len(dst):
            raise ValueError(f"{kind} of node {node_id}: {len(src)} rows into {len(dst)}")
        if state is not None and (self.device_states is None or self.host_states is None):
            raise ValueError("state transfer without state pools")
        # Indices are cloned: the cache may split the node's tensors while in flight.
        due = self.clock + self.latency_ticks
        self.pending.append(Transfer(kind, node_id, src.clone(), dst.clone(), due, state))
        if self.latency_ticks == 0:
            self._complete_due()

    # ------------------------------------------------------------------ progress
    def tick(self) -> None:
        """Advance one round and complete the transfers that are due (FIFO)."""
        self.clock += 1
        self._complete_due()

    def flush(self) -> None:
        """Complete everything in flight, in order: what a forward pass that must
        read loaded rows waits for (SGLang synchronises on the load's event)."""
        while self.pending:
            self._finish(self.pending.popleft())

    def _complete_due(self) -> None:
        while self.pending and self.pending[0].due <= self.clock:
            self._finish(self.pending.popleft())

    def _finish(self, t: Transfer) -> None:
        if t.kind == "write":
            self.host_pool.buffer[t.dst] = self.device_kv[t.src]
            self._copy_state(t.state, self.device_states, self.host_states)
            self.ack_write_queue.append(t.node_id)
        else:
            self.device_kv[t.dst] = self.host_pool.buffer[t.src]
            self._copy_state(t.state, self.host_states, self.device_states)
            self.ack_load_queue.append(t.node_id)

    @staticmethod
    def _copy_state(
        state: tuple[torch.Tensor, torch.Tensor] | None,
        src_pool: StatePool | None,
        dst_pool: StatePool | None,
    ) -> None:
        if state is None or src_pool is None or dst_pool is None:
            return
        src, dst = state
        dst_pool.conv[dst] = src_pool.conv[src]
        dst_pool.ssm[dst] = src_pool.ssm[src]

    def in_flight(self) -> int:
        return len(self.pending)
