"""Steps on the main thread, and allocation windows taken there (CPython < 3.12.9)."""

from __future__ import annotations

import signal
import sys
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.record.mainthread import SIGNAL, MainThread
from harness.record.windows import MainThreadWindows
from harness.runfiles.names import WINDOW_SKIPPED_EVENT


@pytest.fixture
def main() -> Iterator[MainThread]:
    """A MainThread on this process's main thread (pytest's), its signal restored after."""
    assert threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(SIGNAL)
    taken = MainThread()
    assert taken.install() is None
    yield taken
    signal.signal(SIGNAL, previous)


def from_another_thread(call: Callable[[], Any]) -> Any:
    """``call()`` on a new thread, while this (main) thread waits, interruptibly, for it."""
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(call()))
    worker.start()
    worker.join()
    return result[0]


def test_a_step_asked_for_from_another_thread_runs_on_the_main_thread(main: MainThread) -> None:
    ran_on: list[threading.Thread] = []
    assert from_another_thread(lambda: main.run(lambda: ran_on.append(
        threading.current_thread()))) is True
    assert ran_on == [threading.main_thread()]


def test_a_step_the_main_thread_did_not_take_in_time_is_withdrawn_and_never_runs(
    main: MainThread,
) -> None:
    ran: list[int] = []
    signal.pthread_sigmask(signal.SIG_BLOCK, [SIGNAL])  # the main thread cannot take it
    try:
        taken = from_another_thread(lambda: main.run(lambda: ran.append(1), taken_s=0.2))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [SIGNAL])  # the pending signal runs now
    assert taken is False and ran == []


def test_a_steps_error_reaches_the_caller_and_the_main_thread_goes_on(main: MainThread) -> None:
    def fails() -> None:
        raise ValueError("no snapshot")

    def call() -> str:
        try:
            main.run(fails)
        except ValueError as exc:
            return str(exc)
        return "no error"

    assert from_another_thread(call) == "no snapshot"


def test_a_program_that_handles_the_signal_keeps_it() -> None:
    previous = signal.signal(SIGNAL, lambda signum, frame: None)
    try:
        assert MainThread().install() == f"the program handles signal {SIGNAL} itself"
    finally:
        signal.signal(SIGNAL, previous)


class Lines:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.lines: list[dict[str, Any]] = []

    def line(self, record: Any) -> None:
        self.lines.append(dict(record))

    def sample(self, kind: str, t: float, **fields: Any) -> None:
        self.lines.append({"type": kind, "t": t, **fields})

    def event(self, name: str, t: float, **fields: Any) -> None:
        self.events.append({"name": name, "t": t, **fields})


def threads_now() -> set[int]:
    """This process's threads but the main one (a test runner's own, as a recorder's)."""
    running = {t.ident for t in threading.enumerate()} | set(sys._current_frames())
    return {i for i in running if i is not None and i != threading.main_thread().ident}


def polled(main: MainThread, clock: list[float], until: float, ours: set[int]) -> Lines:
    """A window at 1 s (2 s long) polled every 0.5 s of a fake clock from another thread."""
    out = Lines()
    windows = MainThreadWindows([1.0], 2.0, main)
    windows.ours = ours
    windows.start(out, lambda: clock[0])

    def drive() -> None:
        while clock[0] < until:
            clock[0] += 0.5
            windows.poll(clock[0], ops=10)
        windows.stop()

    from_another_thread(drive)
    return out


def test_a_window_taken_on_the_main_thread_writes_its_sites_from_the_recorders(
    main: MainThread,
) -> None:
    out = polled(main, [0.0], 4.0, threads_now())
    assert [e["phase"] for e in out.events if e["name"] == "attribution"] == ["start", "end"]
    assert [line["type"] for line in out.lines] == ["alloc"]
    assert not tracemalloc.is_tracing()


def test_a_window_is_skipped_with_its_reason_while_another_thread_runs(
    main: MainThread,
) -> None:
    ours = threads_now()
    release = threading.Event()
    other = threading.Thread(target=release.wait, name="pool-0")
    other.start()
    try:
        out = polled(main, [0.0], 4.0, ours)
    finally:
        release.set()
        other.join()
    skipped = [e for e in out.events if e["name"] == WINDOW_SKIPPED_EVENT]
    assert [e["reason"].split(": on Python")[0] for e in skipped] == [
        "the program ran 1 other thread(s) (pool-0)"]
    assert out.lines == [] and not tracemalloc.is_tracing()


def test_a_window_the_main_thread_cannot_take_is_skipped_and_the_next_one_runs(
    main: MainThread,
) -> None:
    out, clock = Lines(), [0.0]
    windows = MainThreadWindows([1.0, 3.0], 1.0, main)
    windows.ours = threads_now()
    windows.start(out, lambda: clock[0])

    def drive(until: float) -> None:
        while clock[0] < until:
            clock[0] += 0.5
            windows.poll(clock[0], ops=10)

    signal.pthread_sigmask(signal.SIG_BLOCK, [SIGNAL])  # busy in C code, as it were
    try:
        from_another_thread(lambda: drive(1.0))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [SIGNAL])
    from_another_thread(lambda: drive(5.0))
    skipped = [e["reason"] for e in out.events if e["name"] == WINDOW_SKIPPED_EVENT]
    assert skipped == ["the program's main thread did not take it within 1 s (a long call "
                       "in C code)"]
    assert [line["window"] for line in out.lines] == [1]  # the second window, numbered 1
