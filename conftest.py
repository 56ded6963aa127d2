"""Top-level pytest configuration for leak-harness's own tests.

The leak-harness pytest plugin (markers ``leak``, fixtures ``leak_run`` and
``leak_result``, options ``--leak-duration`` / ``--leak-results``) is loaded by
``addopts`` in pyproject.toml as ``-p harness.pytest_plugin``, with its entry
point blocked (``-p no:leak_harness``): not with ``pytest_plugins`` here, which
pytest would refuse as a second registration of the module while the entry point
is installed. Here: a deterministic hypothesis profile, so every property test
replays the same examples in CI.
"""

from hypothesis import settings

settings.register_profile("leak-harness", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("leak-harness")
