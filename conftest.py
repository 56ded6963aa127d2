"""Top-level pytest configuration for leak-harness's own tests.

The leak-harness pytest plugin (markers ``leak``, fixtures ``leak_run`` and
``leak_result``, options ``--leak-duration`` / ``--leak-results``) is loaded by
``addopts`` in pyproject.toml as ``-p leak_harness.pytest_plugin``, with its entry
point blocked (``-p no:leak_harness``): not with ``pytest_plugins`` here, which
pytest would refuse as a second registration of the module while the entry point
is installed. Here: a deterministic hypothesis profile, so every property test
replays the same examples in CI, and one torch thread in this process.

torch's intra-op pool (a thread per core) buys nothing on the reference
cache's tiny index tensors, and its OpenMP threads spin-wait after every
parallel region: on 2 cores an in-process scenario took 4x the CPU and 5x the
wall time with the default pool (hiradix-multiturn, 600 steps: 4.2 s CPU vs
1.1 s), and starved the test run's own worker processes. Only this process:
workers and recorded programs keep torch's defaults, as users run them.
"""

import sys

import pytest
from hypothesis import settings

settings.register_profile("leak-harness", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("leak-harness")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    torch = sys.modules.get("torch")  # never imported here: only once something has
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)
