"""Small programs to record: run as ``python tests/record/programs.py KIND``.

- ``forks``: a parent that keeps memory flat and one multiprocessing fork
  child that appends 4 KB bytes to a list (a leak) until SIGINT; with
  ``PROGRAM_CHDIR`` set, the parent changes to that folder first;
- ``hooks``: counts ops, registers a gauge and an idle gauge that reads 3 lost
  slots, and marks idle moments;
- ``quick``: exits at once with the code given as the second argument;
- ``segfault``: reads address 0 through ctypes after the seconds given, while a
  second thread sleeps.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import sys
import threading
import time

from harness import record

KEPT: list[bytes] = []


def grow_until_stopped() -> None:
    try:
        while True:
            KEPT.append(os.urandom(4096))
            time.sleep(0.002)
    except KeyboardInterrupt:
        pass


def forks() -> None:
    if os.environ.get("PROGRAM_CHDIR"):  # as a daemon does before its workers start
        os.chdir(os.environ["PROGRAM_CHDIR"])
    child = multiprocessing.get_context("fork").Process(target=grow_until_stopped)
    child.start()
    try:
        while True:
            time.sleep(0.05)
    except KeyboardInterrupt:
        pass
    child.join(20)


def hooks() -> None:
    record.gauge("queue", lambda: 4.0)
    record.gauge("lost_slots", lambda: 3.0, at_idle=True)
    try:
        while True:
            record.ops(10)
            record.idle()
            time.sleep(0.01)
    except KeyboardInterrupt:
        pass


def read_address_zero() -> None:
    ctypes.string_at(0)  # SIGSEGV: what a bug in native code does


def segfault(after_s: float) -> None:
    threading.Thread(target=time.sleep, args=(60,), daemon=True, name="sleeper").start()
    time.sleep(after_s)
    read_address_zero()


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "quick":
        raise SystemExit(int(sys.argv[2]))
    if kind == "segfault":
        segfault(float(sys.argv[2]))
    {"forks": forks, "hooks": hooks}[kind]()
