"""Native memory and shared memory (harness.analysis.where.native)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.analysis.summary import summarize
from harness.analysis.where.common import Site
from harness.analysis.where.native import native_finding
from harness.analysis.where.sites import growing_sites
from harness.runfiles.rundata import Series
from tests.analysis.synth import MB, budgets, linear
from tests.analysis.where.runs import LEAK_THEN_FILL, NONE, heap_run, where_of, window


def test_heap_growth_python_does_not_explain_is_called_native() -> None:
    large = [window(1, 6.0, {"cache.py:40": 50_000}, 4096),
             window(2, 14.0, {"cache.py:40": 60_000}, 4096)]  # malloc-sized: in the heap
    (native,) = native_finding(500 * MB, growing_sites(large))  # sites: 198 MB/h
    assert native.kind == "native" and "native memory grows ~302 MB/h" in native.text
    assert "memray" in native.text
    assert native_finding(300 * MB, growing_sites(large)) == []  # mostly explained
    # 100-byte objects live in pymalloc's arenas: they explain none of the C heap.
    (small,) = native_finding(300 * MB, growing_sites(LEAK_THEN_FILL))
    assert "native memory grows ~300 MB/h" in small.text
    (untraced,) = native_finding(500 * MB, [], traced=False)
    assert "no allocation windows" in untraced.text and "native memory" not in untraced.text


def test_native_growth_beside_a_healthy_caches_python_churn_is_still_named() -> None:
    churn = [Site("cache/keys.py:30", (), 18.7e6, None, 2, 2, 4096.0),
             Site("cache/tree.py:181", (), 17.1e6, None, 2, 2, 4096.0)]
    [finding] = native_finding(52.9e6, churn, budget_per_h=10e6)  # 17 MB/h unexplained
    assert finding.text.startswith("native memory grows ~17.1 MB/h")
    assert native_finding(40e6, churn, budget_per_h=10e6) == []  # 4 MB/h left: within budget


def test_native_growth_names_the_native_window_sites_or_says_how_to_get_them() -> None:
    native = [{"type": "native", "t": 12.0, "from_t": 10.0, "ops": 900, "sites": [
        {"native": "_PyObject_Malloc", "python": "cache.py:9 (put)", "bytes": 90_000, "count": 9},
        {"native": "c10::alloc_cpu", "python": "scenarios/workloads/traffic.py:95 (reply)",
         "bytes": 80_000, "count": 9},
        {"native": "c10::alloc_cpu", "python": "cache.py:47 (insert)", "bytes": 50_000,
         "count": 5}]}]
    (named,) = native_finding(500 * MB, [], native_windows=native)
    assert named.text.endswith("native sites still held after a 2.0 s window (memray): "
                               "c10::alloc_cpu from cache.py:47 (insert) (90 MB/h, "
                               "5 allocations)")
    (hint,) = native_finding(500 * MB, [])
    assert hint.text.endswith("native sites: pip install 'leak-harness[native]' (memray) and "
                              "run again")
    blind = [{**native[0], "sites": native[0]["sites"][:2]}]
    (unseen,) = native_finding(500 * MB, [], native_windows=blind)
    assert "bypasses its hooks" in unseen.text


def test_heap_growth_the_native_window_saw_through_pythons_allocator_is_not_native() -> None:
    python_kept = [{"type": "native", "t": 12.0, "from_t": 10.0, "ops": 900, "sites": [
        {"native": "PyObject_Malloc", "python": "service.py:45 (remember)", "bytes": 200_000,
         "count": 50}]}]
    assert native_finding(500 * MB, [], native_windows=python_kept) == []  # 360 MB/h seen
    (named,) = native_finding(900 * MB, [], native_windows=python_kept)  # most not seen
    assert "native memory grows ~900 MB/h" in named.text


def blocks_run(heap_per_h: float, blocks_per_h: float) -> Any:
    """A run whose heap and Python block count grow at the given rates, with sites
    that grow in both windows (as a healthy tree's turnover does)."""
    run = heap_run(heap_per_h, LEAK_THEN_FILL)
    t = run.memory["heap"].t
    run.memory["py_blocks"] = Series(t, linear(t, blocks_per_h, base=1e6), "")
    return run


HEAP_AND_BLOCKS = ("heap: 10 MB/h", "py_blocks: 250000 /h")


def test_window_sites_are_not_named_when_pythons_own_count_is_flat() -> None:
    native = summarize(blocks_run(200 * MB, 0.0), budgets(*HEAP_AND_BLOCKS), calibration=NONE)
    where = where_of(native)
    assert native.verdict == "leak"
    assert not any("cache.py:40" in w["text"] for w in where)  # turnover, not retention
    [claim] = [w for w in where if w["kind"] == "native"]
    assert claim["text"].startswith("native memory grows ~200 MB/h")
    assert "py_blocks" in claim["text"]


def test_no_native_claim_while_python_grows_without_the_native_windows_word() -> None:
    python = summarize(blocks_run(200 * MB, 50e6), budgets(*HEAP_AND_BLOCKS), calibration=NONE)
    kinds = [w["kind"] for w in where_of(python)]
    assert python.verdict == "leak"
    assert "native" not in kinds and "python" in kinds


def shmem_run(per_h: float) -> Any:
    run = heap_run(0.0, LEAK_THEN_FILL)  # the healthy churn the windows always see
    t = run.memory["heap"].t
    run.memory["shmem"] = Series(t, np.floor(linear(t, per_h) / 4096) * 4096, "B")
    run.owners = [{"paths": [{"type": "mmap", "grew": 40, "sampled": 8, "agree": 8,
                              "path": "Cache.mappings -> list[39] -> mmap"}]}]
    return run


def test_shared_memory_growth_names_the_mappings_owner_and_no_allocation_site() -> None:
    memory = budgets("heap: 10 MB/h", "shmem: 10 MB/h")
    leak = summarize(shmem_run(200 * MB), memory, calibration=NONE)
    texts = [w["text"] for w in where_of(leak)]
    assert leak.verdict == "leak"
    assert texts[0].startswith("shared memory grows ~200 MB/h")
    assert "mmap (+40, 8 of 8 sampled) is held by Cache.mappings -> list[39] -> mmap" in texts
    # The heap passed: tracemalloc's sites explain allocations, not shared pages.
    assert not any("cache.py:40" in text for text in texts)
    healthy = summarize(shmem_run(0.0), memory, calibration=NONE)
    assert healthy.verdict == "pass"
    assert [w["kind"] for w in where_of(healthy)] == ["none"]


def test_a_flat_shared_memory_series_states_a_resolution_of_a_page_per_window() -> None:
    result = summarize(shmem_run(0.0), budgets("shmem: 10 MB/h"), calibration=NONE)
    smallest = result.metrics["shmem_resolution"].value
    assert smallest == pytest.approx(4096 * 3600 / 18.0, rel=0.15)  # a page over the window
    assert any("shmem >= " in reason for reason in result.reasons)
