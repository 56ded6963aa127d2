"""radix-long-context: the plain radix cache under long multi-turn chats (incident 4).

SGLang #17191: long conversations over long shared system prompts, so every
turn's node is a short slice of a long request, and chats that diverge from a
shared prefix split nodes. Fixed, a node keeps a copy of its slice of the KV
indices. With ``radix-split-views`` (as SGLang ran before PR #17191) a new
leaf keeps its slice of the request's index tensor and a split keeps both
halves as slices, so each node pins the whole request it came from: a turn of
56 tokens at the end of a 3,000-token chat holds the storage of all 3,000.
That memory sits at a level the tree's size bounds, so no growth rate sees it
once the tree is full; the tensor census does (``tensor_pinned``: storage kept
alive only by views at most a quarter its size).
"""

from scenarios.workloads.common import DEFAULT_BUDGETS, cache_scenario, run_standalone
from scenarios.workloads.traffic import TrafficShape

SCENARIO = cache_scenario(
    name="radix-long-context",
    description="plain RadixCache under long multi-turn chats over long system prompts "
                "(incident 4: nodes keep views of whole requests' indices)",
    factory="refcache.factories:radix_cache",
    cache_options={"kv_size": 32768},
    regressions=("radix-split-views",),
    shape=TrafficShape(system_prompts=4, system_len=512, turn_len=32, output_len=24,
                       conversations=32, max_context=4096, mix=(0.2, 0.5, 0.0, 0.3)),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
