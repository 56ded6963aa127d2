"""radix-dllm: a paged radix cache serving a diffusion LLM (incident 6, SGLang #35270).

A dLLM decodes a block of ``page_size`` tokens at a time (SGLang pins the page
size to the block size): the block gets its slots, then every denoise step
rewrites all of its ids in place and caches the request's progress through
``cache_unfinished_req``. The fix caches only the settled tokens. With
``radix-dllm-inflight-block`` each draft of the block is inserted as its own
node over the same slots: ``evictable_size()`` counts them twice, and once the
load goes idle the pool's books hold more than the pool (``idle_pool_mismatch``
> 0, SGLang's "pool memory leak detected!"); evicting one draft's node then
frees slots another still holds (a double free). Idle gaps let the idle check
run hundreds of times a minute.
"""

from scenarios.workloads.common import DEFAULT_BUDGETS, cache_scenario, run_standalone
from scenarios.workloads.scheduler import Load

PAGE = 8

SCENARIO = cache_scenario(
    name="radix-dllm",
    description="paged RadixCache (page 8) serving a diffusion LLM in blocks, idle gaps "
                "(incident 6: in-flight block cached, pages counted twice)",
    factory="refcache.factories:radix_cache",
    cache_options={"kv_size": 32768, "page_size": PAGE},
    regressions=("radix-dllm-inflight-block",),
    load=Load(pattern="idle-gaps", dllm_block=PAGE, denoise_steps=3),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
