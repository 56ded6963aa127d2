"""Leak tests through the pytest plugin: selected with ``-m leak`` (or ``--leak``).

Each runs a real scenario in a worker for its check duration (``--leak-duration``
overrides it); ``make test`` skips them and ``make leak-check`` covers the same
ground through the CLI.
"""

import pytest

from harness.parent.runner import RunOutcome

pytestmark = pytest.mark.integration  # each runs a real scenario in a worker once selected


@pytest.mark.leak(scenario="mamba-lru", budgets=["rss: 50 MB/h", "cyclic_garbage: 0.5 /kop"])
def test_mamba_cache_fixed_stays_within_budget(leak_result: RunOutcome) -> None:
    assert leak_result.verdict == "pass"


@pytest.mark.leak(scenario="mamba-lru", inject=["mamba-lru-unlink"], expect="fail")
def test_mamba_lru_unlink_is_caught(leak_result: RunOutcome) -> None:
    assert leak_result.verdict == "leak"


@pytest.mark.leak(scenario="hiradix-pp-sync", inject=["hiradix-pp-sync-no-drain"], expect="fail")
def test_pp_sync_pile_up_is_caught(leak_result: RunOutcome) -> None:
    assert leak_result.summary.metrics["work_list_max"].value > 4
