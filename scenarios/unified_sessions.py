"""unified-sessions: UnifiedRadixCache (full and Mamba) with streaming sessions, idle gaps.

The load of ``mamba-sessions`` on the unified tree, where SGLang 0.5.23 keeps its
streaming sessions (``UnifiedRadixCache.session``): turns continue from the KV
and Mamba state their session kept, sessions open, close and have turns
aborted throughout, and the idle check runs in the gaps with sessions open.

With ``mamba-session-close-state`` (SGLang #23496) a closed session's Mamba state
slot and ping-pong buffers stay allocated: the Mamba component's idle books come
up 3 slots short per close.
"""

from scenarios.mamba_sessions import SESSION_LOAD
from scenarios.workloads.common import DEFAULT_BUDGETS, cache_scenario, run_standalone

SCENARIO = cache_scenario(
    name="unified-sessions",
    description="UnifiedRadixCache with a Mamba component and streaming sessions opening, "
                "closing and aborting turns, idle gaps (SGLang #23496: Mamba state and "
                "ping-pong buffers of a closed session)",
    factory="refcache.factories:unified_cache",
    cache_options={"kv_size": 8192, "mamba_size": 512, "streaming_sessions": True},
    load=SESSION_LOAD,
    regressions=("mamba-session-close-state",),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
