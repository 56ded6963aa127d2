"""The names of the worker's samplers, as a run config lists them.

A stdlib-only leaf so that the config (and the faces) can name and check
samplers without loading the sampler modules; ``tests/harness/test_sampler_names.py``
checks these tuples against the registry in :mod:`harness.worker.samplers`.
"""

from __future__ import annotations

# In the registry's order (``REGISTRY``): the order samplers start, poll and stop.
SAMPLER_NAMES = (
    "gc", "heap", "tensors", "gauges", "objects", "garbage", "allocations", "native", "owners",
    "malloc_trim", "rss",
)
# The samplers that only say where growth comes from (``--no-attribution`` drops them).
ATTRIBUTION_SAMPLERS = ("allocations", "native", "owners")

__all__ = ["ATTRIBUTION_SAMPLERS", "SAMPLER_NAMES"]
