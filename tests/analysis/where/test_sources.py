"""Which sources of "Where it grows" ran, the holder a site's line names, and the order
of an incidental cycle and a growing site."""

from __future__ import annotations

from typing import Any

from harness.analysis.verdict import Judgement
from harness.analysis.where import where_it_grows
from harness.runfiles.names import WINDOW_SKIPPED_EVENT
from harness.runfiles.sources import sources_sentence, where_sources
from tests.analysis.synth import MB, budgets
from tests.analysis.where.runs import heap_run, window

SAMPLERS = ["heap", "garbage", "allocations", "native", "owners"]
OFF = ("allocation windows are off: they must run on the program's main thread on "
       "Python 3.11.7 (python/cpython#128679), and the program handles signal 61 itself")


def recorded(windows: list[dict[str, Any]], *events: dict[str, Any]) -> Any:
    run = heap_run(200 * MB, windows)
    run.header["config"] = {"samplers": SAMPLERS}
    run.events += list(events)
    run.garbage_windows = [{"type": "garbage", "t": 10.0, "count": 2, "cycles": [
        {"type": "tuple", "path": ["_MainProcess.<ref>", "tuple[]"], "length": 2,
         "retained_bytes": 120, "retained_objects": 2}]}]
    run.owners = [{"type": "owners", "t": 19.0, "paths": []}]
    return run


def test_a_source_that_was_off_is_named_with_its_reason_and_never_among_the_sources() -> None:
    run = recorded([], {"type": "event", "t": 0.0, "name": "sampler_unavailable",
                        "sampler": "allocations", "reason": OFF},
                   {"type": "event", "t": 0.0, "name": "sampler_unavailable",
                    "sampler": "native", "reason": "memray is not installed"})
    text = sources_sentence(where_sources(run))
    ran, _, off = text.partition(" Did not run: ")
    assert ran == ("Sources: the C heap against Python allocations, owner paths, "
                   "explained cycles.")
    assert off == (f"tracemalloc's allocation windows: {OFF}; memray's native window: "
                   "memray is not installed.")


def test_skipped_windows_say_why_and_a_run_with_none_complete_lists_them_as_not_run() -> None:
    skipped = {"type": "event", "t": 9.0, "name": WINDOW_SKIPPED_EVENT,
               "reason": "the program ran 1 other thread(s) (pool-0)"}
    none_ran = {s.name: s for s in where_sources(recorded([], skipped, skipped))}
    assert not none_ran["tracemalloc's allocation windows"].ran
    assert none_ran["tracemalloc's allocation windows"].note == \
        "2 skipped: the program ran 1 other thread(s) (pool-0)"
    one_ran = {s.name: s for s in where_sources(recorded([window(2, 14.0, {"a.py:1": 9})],
                                                         skipped))}
    assert one_ran["tracemalloc's allocation windows"].ran
    assert one_ran["tracemalloc's allocation windows"].note.startswith("1 skipped: ")


def test_a_source_not_asked_for_and_one_that_failed_did_not_run() -> None:
    run = recorded([window(1, 6.0, {"a.py:1": 9})],
                   {"type": "event", "t": 19.0, "name": "sampler_failed", "sampler": "owners",
                    "error": "MemoryError: "})
    run.header["config"] = {"samplers": ["heap", "garbage", "allocations", "owners"]}
    found = {s.name: s for s in where_sources(run)}
    assert [n for n, s in found.items() if s.ran] == [
        "tracemalloc's allocation windows", "the C heap against Python allocations",
        "explained cycles"]
    assert found["owner paths"].note == "it failed: MemoryError: "
    assert found["memray's native window"].note.startswith("not asked for")


def held_window(index: int, t: float) -> dict[str, Any]:
    line = window(index, t, {"examples/leaky_service.py:45": 500_000})
    line["sites"][0]["held_by"] = {"name": "SEEN", "module": "examples/leaky_service.py",
                                   "type": "dict", "entries": 1000 * index}
    return line


def test_the_growing_site_names_its_holder_and_leads_an_incidental_cycle() -> None:
    run = recorded([held_window(1, 6.0), held_window(2, 14.0)])
    found = where_it_grows(run, budgets("heap: 10 MB/h", "py_blocks: 250000 /h"),
                           [Judgement("leak", "confirmed-growth", "heap"),
                            Judgement("leak", "confirmed-growth", "py_blocks")],
                           {"heap": 200 * MB})
    assert [f.kind for f in found][:2] == ["python", "cycles"]
    assert found[0].text.endswith("held by SEEN, a dict of 2,000 entries in "
                                  "examples/leaky_service.py")
    assert found[0].owner == "SEEN"


def test_a_cycle_stays_first_when_cyclic_garbage_itself_grows() -> None:
    run = recorded([held_window(1, 6.0), held_window(2, 14.0)])
    found = where_it_grows(run, budgets("heap: 10 MB/h", "cyclic_garbage: 0.5 /kop"),
                           [Judgement("leak", "confirmed-growth", "heap"),
                            Judgement("leak", "confirmed-growth", "cyclic_garbage")],
                           {"heap": 200 * MB})
    assert [f.kind for f in found][:2] == ["cycles", "python"]


def test_without_a_growing_site_an_incidental_cycle_comes_after_the_native_line() -> None:
    """A recorded program that keeps bytes and whose windows saw no site: the cycle no
    growing budget blames (the runtime's own objects) is the last line, not the first."""
    run = recorded([])
    found = where_it_grows(run, budgets("heap: 10 MB/h", "py_blocks: 250000 /h"),
                           [Judgement("leak", "confirmed-growth", "heap"),
                            Judgement("pass", "within", "py_blocks")],
                           {"heap": 200 * MB})
    kinds = [f.kind for f in found]
    assert "native" in kinds and kinds[-1] == "cycles", kinds
