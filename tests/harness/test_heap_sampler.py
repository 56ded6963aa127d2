"""The exact byte signals: the C heap sees malloc'd bytes, the block count sees objects."""

from __future__ import annotations

import ctypes
import gc
import mmap
import sys
import threading
from typing import Any

import pytest

from harness.worker import glibc
from harness.worker.frames import short
from harness.worker.glibc import TCACHE_COUNT, TCACHE_SIZES, fill_thread_cache, load_heap_reader
from harness.worker.samplers.heap import (
    HeapSampler,
    count_fds,
    cuda_unavailable,
    read_status,
)
from tests.harness.test_samplers import FakeClock, Recorder

MB = 1_000_000
glibc_only = pytest.mark.skipif(load_heap_reader()[0] is None, reason="needs glibc mallinfo2")


@glibc_only
def test_heap_sees_native_malloc_to_the_byte() -> None:
    read, _ = load_heap_reader()
    assert read is not None
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = read()
    chunks = [libc.malloc(64_000) for _ in range(50)]  # arena chunks, not mmapped
    grown = read() - before
    for chunk in chunks:
        libc.free(chunk)
    assert 50 * 64_000 <= grown < 50 * 64_000 + 64_000  # chunk headers only


@glibc_only
def test_heap_sampler_writes_heap_and_blocks_and_stops_with_a_last_reading() -> None:
    clock, sink = FakeClock(), Recorder()
    sampler = HeapSampler(interval_s=0.1)
    sampler.start(sink, clock)
    kept = [bytearray(10_000) for _ in range(200)]  # 2 MB through malloc
    clock.now = 0.1
    sampler.poll(0.1, ops=7)
    sampler.stop()
    lines = sink.of("heap")
    assert [line["t"] for line in lines] == [0.0, 0.1, 0.1]
    assert lines[1]["heap"] - lines[0]["heap"] >= 2 * MB and lines[1]["ops"] == 7
    assert all(line["py_blocks"] > 0 for line in lines)
    del kept


def test_python_blocks_count_small_objects_that_bypass_malloc() -> None:
    # Garbage that earlier tests left would otherwise be freed by the collections
    # these 20,000 lists trigger, and take its blocks off the count.
    gc.collect()
    clock, sink = FakeClock(), Recorder()
    sampler = HeapSampler(interval_s=0.1)
    sampler.start(sink, clock)
    kept = [[i] for i in range(20_000)]  # small objects: pymalloc arenas
    sampler.stop()
    first, last = sink.of("heap")[0], sink.of("heap")[-1]
    assert last["py_blocks"] - first["py_blocks"] >= 20_000
    del kept


def test_cuda_is_unavailable_with_a_reason_on_this_cpu_build() -> None:
    clock, sink = FakeClock(), Recorder()
    sampler = HeapSampler()
    sampler.start(sink, clock)
    sampler.stop()
    unavailable = [e for e in sink.of("event") if e["name"] == "signal_unavailable"]
    reasons = {e["signal"]: e["reason"] for e in unavailable}
    assert "cuda" in reasons and "cuda_allocated" not in sink.of("heap")[0]
    if "torch" not in sys.modules:
        assert reasons["cuda"] == "the workload does not use torch"


def test_cuda_reason_when_torch_sees_no_device(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoDevice:
        class cuda:
            @staticmethod
            def is_available() -> bool:
                return False

    monkeypatch.setitem(sys.modules, "torch", NoDevice)
    assert cuda_unavailable() == "torch sees no CUDA device"


def test_cuda_allocator_bytes_are_sampled_when_torch_sees_a_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class WithDevice:
        class cuda:
            allocated = 1_000

            @staticmethod
            def is_available() -> bool:
                return True

            @classmethod
            def memory_allocated(cls) -> int:
                cls.allocated += 4_096
                return cls.allocated

            @staticmethod
            def memory_reserved() -> int:
                return 2 * MB

    monkeypatch.setitem(sys.modules, "torch", WithDevice)
    clock, sink = FakeClock(), Recorder()
    sampler = HeapSampler()
    sampler.start(sink, clock)
    sampler.stop()
    first, last = sink.of("heap")[0], sink.of("heap")[-1]
    assert last["cuda_allocated"] - first["cuda_allocated"] == 4_096
    assert last["cuda_reserved"] == 2 * MB
    assert not [e for e in sink.of("event") if e.get("signal") == "cuda"]


@pytest.mark.skipif(read_status() is None, reason="needs Linux's /proc/self/status")
def test_shared_memory_sees_anonymous_mappings_that_both_allocators_miss() -> None:
    clock, sink = FakeClock(), Recorder()
    sampler = HeapSampler(interval_s=0.1)
    sampler.start(sink, clock)
    mapping = mmap.mmap(-1, 64 * mmap.PAGESIZE)  # MAP_SHARED: shmem pages, not malloc's
    for offset in range(0, len(mapping), mmap.PAGESIZE):
        mapping[offset] = 1  # resident only once touched
    clock.now = 0.1
    sampler.poll(0.1, ops=1)
    sampler.stop()
    first, grown = sink.of("heap")[0], sink.of("heap")[1]
    assert grown["shmem"] - first["shmem"] == 64 * mmap.PAGESIZE
    assert abs(grown["heap"] - first["heap"]) < 64 * mmap.PAGESIZE  # malloc saw none of it
    mapping.close()


@pytest.mark.skipif(count_fds() is None, reason="needs Linux's /proc/self/fd")
def test_threads_and_descriptors_are_counted_and_named_at_stop(tmp_path: Any) -> None:
    clock, sink = FakeClock(), Recorder()
    sampler = HeapSampler(interval_s=0.1)
    sampler.start(sink, clock)
    done = threading.Event()
    parked = [threading.Thread(target=done.wait, daemon=True) for _ in range(3)]
    for thread in parked:
        thread.start()
    files = [open(tmp_path / f"f{i}", "wb") for i in range(4)]  # noqa: SIM115 (kept open)
    clock.now = 0.1
    sampler.poll(0.1, ops=1)
    sampler.stop()
    first, grown = sink.of("heap")[0], sink.of("heap")[1]
    assert grown["threads"] - first["threads"] == 3 and grown["fds"] - first["fds"] == 4
    (census,) = [e for e in sink.of("event") if e["name"] == "resources"]
    wait = threading.Event.wait.__code__
    origin = f"Event.wait ({short(wait.co_filename)}:{wait.co_firstlineno})"
    assert {"what": origin, "count": 3} in census["threads"]
    assert {"what": f"file in {tmp_path}", "count": 4} in census["fds"]
    done.set()
    for thread in parked:
        thread.join()
    for file in files:
        file.close()


def test_status_and_descriptors_without_proc_are_unavailable_with_a_reason(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmRSS:\t  1000 kB\n", encoding="utf-8")
    assert read_status(str(status)) is None and read_status(str(tmp_path / "none")) is None
    status.write_text("Threads:\t3\nRssShmem:\t      12 kB\n", encoding="utf-8")
    assert read_status(str(status)) == {"shmem": 12 * 1024, "threads": 3}
    assert count_fds(str(tmp_path / "none")) is None
    monkeypatch.setattr("harness.worker.samplers.heap.read_status", lambda path="": None)
    monkeypatch.setattr("harness.worker.samplers.heap.count_fds", lambda path="": None)
    clock, sink = FakeClock(), Recorder()
    sampler = HeapSampler()
    sampler.start(sink, clock)
    sampler.stop()
    reasons = {e["signal"]: e["reason"] for e in sink.of("event")
               if e["name"] == "signal_unavailable"}
    assert "RssShmem" in reasons["shmem"] and "Threads" in reasons["threads"]
    assert "/proc/self/fd" in reasons["fds"]
    assert not {"shmem", "threads", "fds"} & set(sink.of("heap")[0])


@glibc_only
def test_a_filled_thread_cache_holds_its_chunks_once_and_no_more() -> None:
    read, _ = load_heap_reader()
    assert read is not None
    levels: list[int] = []

    def in_a_new_thread() -> None:  # a fresh thread starts with an empty cache
        levels.append(read())
        fill_thread_cache()
        levels.append(read())
        fill_thread_cache()  # full already: every chunk goes back to the arena
        levels.append(read())

    thread = threading.Thread(target=in_a_new_thread)
    thread.start()
    thread.join()
    first, filled, again = levels
    cache_bytes = TCACHE_COUNT * sum(size + 8 for size in TCACHE_SIZES)
    assert 0.8 * cache_bytes <= filled - first <= 1.2 * cache_bytes
    assert abs(again - filled) < 0.1 * cache_bytes


@glibc_only
def test_loading_glibc_starts_no_process_a_forked_child_could_hold_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # find_library ran ldconfig and read its pipes to the end; a child forked meanwhile
    # kept them open, and the recorder's polling thread waited for that child to exit.
    import subprocess

    def no_process(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"started a process: {args[:1]}")

    monkeypatch.setattr(subprocess.Popen, "__init__", no_process)
    glibc._glibc.cache_clear()
    malloc, why = glibc.glibc_function("malloc")
    assert malloc is not None and why is None
    fill_thread_cache()
    assert load_heap_reader()[0] is not None
