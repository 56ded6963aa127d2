"""What faulthandler wrote when a process died of a fatal signal, in one sentence.

The worker, and a recorded program, enable faulthandler on their stderr (the
worker's ``worker.log``, the program's ``program.log``). A segfault then leaves
``Fatal Python error: Segmentation fault`` and every thread's Python stack, the
one that crashed marked ``Current thread``. Its first frame is where to look; the
sentence names it, and the other threads' innermost frames (a race shows as two
threads in related code), so a crash is never just "exit code -11".
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

from harness.worker.frames import is_library, short

FATAL = "Fatal Python error: "
THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+ .*\(most recent call first\):$")
FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<name>\S+)$')
MAX_OTHERS = 3  # other threads named; the log holds them all
TAIL_BYTES = 64 << 10  # faulthandler's block ends the log; a chatty one is not read whole


def died_from(signum: int, who: str, log: Path, after_s: float | None = None) -> str:
    """``<who> died from SIGSEGV: Fatal Python error: ...`` (what faulthandler wrote in
    ``log``, when it wrote anything); a SIGKILL suggests the out-of-memory killer."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    hint = " (the kernel's out-of-memory killer?)" if signum == signal.SIGKILL else ""
    when = "" if after_s is None else f" after {after_s:.1f} s"
    fatal = fatal_error(log)
    return f"{who} died from {name}{when}{hint}" + (f": {fatal}." if fatal else
                                                    f" (its output: {log.name}).")


def fatal_error(log: Path) -> str | None:
    """``Fatal Python error: X; the crashing thread was in f (file:line); other threads
    were in ...`` from ``log``'s last faulthandler block, or None without one."""
    lines = tail_lines(log)
    starts = [i for i, text in enumerate(lines) if text.startswith(FATAL)]
    if not starts:
        return None
    block = lines[starts[-1]:]
    sentence = block[0].strip()
    crashing, others = innermost_frames(block)
    if crashing:
        sentence += f"; the crashing thread was in {crashing}"
    if others:
        shown = ", ".join(others[:MAX_OTHERS])
        more = f" and {len(others) - MAX_OTHERS} more" if len(others) > MAX_OTHERS else ""
        sentence += f"; other threads were in {shown}{more}"
    return f"{sentence} ({log.name} has every stack)"


def tail_lines(log: Path) -> list[str]:
    try:
        with log.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(size - TAIL_BYTES, 0))
            return handle.read().decode(errors="replace").splitlines()
    except OSError:
        return []


def innermost_frames(block: list[str]) -> tuple[str | None, list[str]]:
    """Where the crashing thread was and where each other thread was (see :func:`where`)."""
    crashing: str | None = None
    others: list[str] = []
    for current, frames in thread_stacks(block):
        if current:
            crashing = where(frames)
        else:
            others.append(where(frames))
    return crashing, others


def thread_stacks(block: list[str]) -> list[tuple[bool, list[tuple[str, str, str]]]]:
    """Each thread's frames (name, file, line), innermost first; True for the crashing one."""
    stacks: list[tuple[bool, list[tuple[str, str, str]]]] = []
    for text in block:
        header = THREAD.match(text)
        if header:
            stacks.append((header.group(1) == "Current thread", []))
            continue
        frame = FRAME.match(text)
        if frame and stacks:
            stacks[-1][1].append((frame["name"], frame["file"], frame["line"]))
    return [(current, frames) for current, frames in stacks if frames]


def where(frames: list[tuple[str, str, str]]) -> str:
    """``f (file:line)`` for the innermost frame, and the program's own innermost frame
    after it when the first is in the standard library or a package (ctypes, threading)."""
    def shown(frame: tuple[str, str, str]) -> str:
        return f"{frame[0]} ({short(frame[1])}:{frame[2]})"

    own = next((f for f in frames if not is_library(f[1])), None)
    if own is None or own == frames[0]:
        return shown(frames[0])
    return f"{shown(frames[0])} called from {shown(own)}"
