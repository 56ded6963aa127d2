"""swa-spec: SWARadixCache under EAGLE speculative decoding (incident 14, SGLang #34870).

Each decode step verifies a few draft tokens and gives the rejected drafts'
slots back (``scenarios.workloads.speculative``); the tree is keyed by EAGLE's
bigrams (``eagle``) and an unfinished request's SWA that slid out of its window
is freed before its insert (``free_out_of_window``, SGLang's default since
#34653). Prompts past a short chunk go through ``cache_unfinished_req``; the
page (8) and the window (30, not a page multiple, as gpt-oss's 127 with page 64)
make the frontier keep ``ceil_align(30, 8) = 32`` tokens of live SWA below the
insert's end. With ``swa-eagle-frontier`` the frontier is measured from the token
count: for a prompt of a whole number of pages the bigram key ends a page lower,
the leaf keeps 24 live tokens for a window of 30, the re-match stops short and
the request frees, at its next insert, KV the tree still owns: the idle books
count more than the pool (``idle_pool_mismatch``, SGLang's "pool memory leak
detected"). Idle gaps let the idle check run often.
"""

from scenarios.workloads.common import DEFAULT_BUDGETS, cache_scenario, run_standalone
from scenarios.workloads.scheduler import Load
from scenarios.workloads.speculative import Speculation

SPEC_LOAD = Load(pattern="idle-gaps", chunk_size=16, speculation=Speculation(draft_tokens=4))

SCENARIO = cache_scenario(
    name="swa-spec",
    description="SWARadixCache (page 8, window 30) under EAGLE speculative decoding: bigram "
                "keys, rejected drafts freed, out-of-window SWA freed (incident 14: the "
                "frontier measured in tokens, not bigrams)",
    factory="refcache.factories:swa_cache",
    cache_options={"kv_size": 32768, "swa_size": 8192, "sliding_window": 30, "page_size": 8,
                   "eagle": True, "free_out_of_window": True},
    regressions=("swa-eagle-frontier",),
    load=SPEC_LOAD,
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
