"""Run a step of the recorder on the recorded program's main thread.

Python runs signal handlers on the main thread, between two bytecodes: a
real-time signal sent to that thread (``signal.pthread_kill``) makes it run a
queued step soon, and wakes it from a wait that can be interrupted (sleep,
select, a lock). The recorder's thread parks on an event while the step runs.

Why: on CPython before 3.12.9 and 3.13.2, ``tracemalloc.stop()`` crashes a thread
that is inside tracemalloc's raw-allocator hook, waiting for the GIL
(python/cpython#128679; ``os.getcwd`` allocates that way). The main thread
cannot be there while it runs the stop itself, and the recorder's thread, parked
on an event, allocates nothing.

The handler is installed with ``siginterrupt(False)``: a system call of the
program's C code that the signal interrupts restarts instead of failing with
EINTR, so a C extension that does not retry is not hurt. Waits that never
restart (sleep, select, a lock) still wake and run the step.
"""

from __future__ import annotations

import collections
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

# A real-time signal: its default would end the process, so it is sent only while
# our handler is installed. Few programs use the top of the range; one that does
# (its handler installed first) leaves the windows off, with the reason.
SIGNAL = signal.SIGRTMAX - 3
TAKEN_S = 1.0  # how long the main thread may take to begin a step before it is withdrawn
DONE_S = 60.0  # at most this long for a begun step to end (a census of a large heap)


@dataclass
class Request:
    step: Callable[[], None]
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class MainThread:
    """Steps run on the main thread from a signal handler, one at a time."""

    def __init__(self, signum: int = SIGNAL) -> None:
        self.signum = signum
        # deque.append, popleft and remove are atomic under the GIL: no lock, which a
        # handler run inside another handler on the same thread would deadlock on.
        self._queue: collections.deque[Request] = collections.deque()
        self._ident: int | None = None

    def install(self) -> str | None:
        """Take the signal, from the main thread; why not, or None when taken."""
        if threading.current_thread() is not threading.main_thread():
            return "the recorder did not start on the program's main thread"
        current = signal.getsignal(self.signum)
        if current not in (signal.SIG_DFL, None) and not is_ours(current):
            return f"the program handles signal {self.signum} itself"
        signal.signal(self.signum, self._handle)
        self._ident = threading.main_thread().ident
        return None

    def installed(self) -> bool:
        """Whether the signal still runs our handler (a program may have taken it since)."""
        return self._ident is not None and signal.getsignal(self.signum) == self._handle

    def run(self, step: Callable[[], None], taken_s: float = TAKEN_S) -> bool:
        """Run ``step`` on the main thread and wait for it; False if the main thread did
        not begin it within ``taken_s`` (then it never runs) or the signal is no longer
        ours. Called from the main thread, the step runs at once. A step's exception is
        raised here."""
        if threading.current_thread() is threading.main_thread():
            step()
            return True
        if not self.installed() or self._ident is None:
            return False
        request = Request(step)
        self._queue.append(request)
        signal.pthread_kill(self._ident, self.signum)
        if not request.done.wait(taken_s):
            try:
                self._queue.remove(request)
                return False  # withdrawn before the main thread took it
            except ValueError:
                request.done.wait(DONE_S)  # taken: it is running now
        if request.error is not None:
            raise request.error
        return request.done.is_set()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        while True:
            try:
                request = self._queue.popleft()
            except IndexError:
                return
            try:
                request.step()
            except Exception as exc:  # the program must not see the recorder's failure
                request.error = exc
            finally:
                request.done.set()


def is_ours(handler: object) -> bool:
    """A handler of a :class:`MainThread` (a forked child inherits its parent's)."""
    return isinstance(getattr(handler, "__self__", None), MainThread)
