"""Top-level pytest configuration for leak-harness's own tests.

The leak-harness pytest plugin (markers ``leak``, fixtures ``leak_run`` and
``leak_result``, options ``--leak-duration`` / ``--leak-results``) is loaded
through its entry point once the project is installed. Here: a deterministic
hypothesis profile, so every property test replays the same examples in CI.
"""

from hypothesis import settings

settings.register_profile("leak-harness", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("leak-harness")
