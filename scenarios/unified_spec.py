"""unified-spec: UnifiedRadixCache (full and SWA) under EAGLE speculative decoding (incident 14).

SGLang routes every hybrid SWA model to ``UnifiedRadixCache``, whose tree takes
bigram keys under EAGLE unless it has a Mamba component, so this cache has full
and SWA components only. The load, page and window are swa-spec's
(``scenarios.swa_spec``). With ``unified-eagle-frontier`` the SWA component's
out-of-window frontier is measured from the token count at SGLang's own site
(``UnifiedRadixCache``'s unfinished path, SGLang #34870): the leaf the insert makes
keeps less than a window, the re-match stops short and the next insert frees KV
the tree still owns (``idle_pool_mismatch``).
"""

from scenarios.swa_spec import SPEC_LOAD
from scenarios.workloads.common import DEFAULT_BUDGETS, cache_scenario, run_standalone

SCENARIO = cache_scenario(
    name="unified-spec",
    description="UnifiedRadixCache with SWA (page 8, window 30) under EAGLE speculative "
                "decoding (incident 14: the SWA frontier measured in tokens, not bigrams)",
    factory="refcache.factories:unified_cache",
    cache_options={"kv_size": 32768, "swa_size": 8192, "sliding_window": 30, "page_size": 8,
                   "eagle": True, "free_out_of_window": True},
    regressions=("unified-eagle-frontier",),
    load=SPEC_LOAD,
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
