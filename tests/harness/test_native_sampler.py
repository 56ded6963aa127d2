"""The native window: memray's hybrid stacks grouped into native function and Python caller."""

from __future__ import annotations

import copy
import importlib.util
from typing import Any

import pytest

from harness.worker.samplers.native import (
    INSTALL_HINT,
    NATIVE_WINDOW,
    NativeSampler,
    native_function,
    python_caller,
)
from tests.harness.test_samplers import FakeClock, Recorder

needs_memray = pytest.mark.skipif(importlib.util.find_spec("memray") is None,
                                  reason="the [native] extra (memray) is not installed")


def test_a_stack_is_named_by_its_allocator_function_and_first_caller_outside_the_library(
) -> None:
    stack = [("c10::alloc_cpu(unsigned long)", "<unknown>", 0),
             ("empty_cpu", "aten/src/empty.cpp", 40),
             ("deepcopy", copy.__file__, 128),
             ("insert", "refcache/radix.py", 125),
             ("step", "scenarios/workloads/scheduler.py", 40)]
    assert native_function(stack) == "c10::alloc_cpu"
    assert python_caller(stack) == "refcache/radix.py:125 (insert)"
    assert python_caller([("malloc", "<unknown>", 0)]) == "no Python frame (a native thread)"
    harness_own = [("malloc", "<unknown>", 0), ("write", "harness/runfiles/samples.py", 9)]
    assert python_caller(harness_own) is None  # the harness's own allocations are left out


@needs_memray
def test_the_window_names_what_a_c_allocator_kept_and_brackets_itself_in_events() -> None:
    import numpy as np

    clock, sink = FakeClock(), Recorder()
    sampler = NativeSampler(start_s=1.0, length_s=0.5)
    sampler.start(sink, clock)
    kept = []
    for now in (0.5, 1.0, 1.2):
        clock.now = now
        sampler.poll(now, ops=10)
        kept.append(np.ones(250_000))  # 2 MB each from numpy's C allocator
    clock.now = 1.6
    sampler.poll(1.6, ops=30)
    sampler.stop()
    (window,) = sink.of("native")
    phases = [(e["phase"], e["window"]) for e in sink.of("event") if e["name"] == "attribution"]
    assert phases == [("start", NATIVE_WINDOW), ("end", NATIVE_WINDOW)]
    assert window["from_t"] == 1.0 and window["ops"] == 20
    top = window["sites"][0]
    assert top["python"].startswith("tests/harness/test_native_sampler.py:")
    assert top["bytes"] >= 2 * 2_000_000 and top["count"] >= 2  # the two arrays in the window
    del kept


def test_without_memray_the_sampler_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    assert NativeSampler(1.0, 1.0).unavailable() == INSTALL_HINT


def test_a_capture_that_cannot_be_read_still_ends_the_window(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.worker.samplers import native
    from harness.worker.samplers.base import BaseSampler

    def broken(path: str) -> list[dict[str, Any]]:
        raise ValueError("truncated capture")

    monkeypatch.setattr(native, "read_sites", broken)
    clock, sink = FakeClock(), Recorder()
    sampler = NativeSampler(1.0, 0.5)
    BaseSampler.start(sampler, sink, clock)  # memray need not be installed to read nothing
    capture = tmp_path / "capture.bin"
    capture.write_bytes(b"")
    sampler._path, sampler._began = str(capture), (1.0, 3)
    sampler._read(1.5)
    (line,) = sink.of("native")
    assert line["sites"] == [] and line["error"] == "ValueError: truncated capture"
    ends = [e for e in sink.of("event") if e["name"] == "attribution"]
    assert [(e["phase"], e["window"]) for e in ends] == [("end", NATIVE_WINDOW)]
    assert not capture.exists()
