"""mamba-sessions: MambaRadixCache with streaming sessions, idle gaps (incident 11, SGLang #23496).

Some arrivals are turns of streaming sessions (``scenarios.workloads.sessions``):
a session's turns continue from the KV and the Mamba state its previous turn
left (``refcache.sessions``), sessions open, close some steps after their last
turn and have turns aborted mid-stream throughout, and half of every load cycle
is idle with sessions still open, so SGLang's idle check runs hundreds of times
a minute over the memory they hold (``session_held`` in the books: held, not lost).

With ``mamba-session-close-state`` closing a session frees its KV and unlocks
its prefix but not its Mamba state slot and ping-pong track buffers: the Mamba
pool's idle books come up ``1 + 2`` slots short per close (``idle_pool_mismatch``)
and the slot ledger names the turns' allocations as left by ``session-close``.
"""

from scenarios.workloads.common import DEFAULT_BUDGETS, cache_scenario, run_standalone
from scenarios.workloads.scheduler import Load
from scenarios.workloads.sessions import Sessions

SESSION_LOAD = Load(pattern="idle-gaps",
                    sessions=Sessions(share=0.1, max_open=8, turns=(3, 8), abort_turn=0.1))

SCENARIO = cache_scenario(
    name="mamba-sessions",
    description="MambaRadixCache with streaming sessions opening, closing and aborting turns, "
                "idle gaps (SGLang #23496: Mamba state and ping-pong buffers of a closed "
                "session)",
    factory="refcache.factories:mamba_cache",
    cache_options={"kv_size": 8192, "mamba_size": 512, "streaming_sessions": True},
    load=SESSION_LOAD,
    regressions=("mamba-session-close-state",),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
