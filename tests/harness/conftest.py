"""Shared helpers for the harness tests: fixture specs, leftover checks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]  # on sys.path through pytest's ``pythonpath``

FIXTURES = "tests.harness.fixtures.scenarios"


def spec(name: str) -> str:
    return f"{FIXTURES}:{name}"


def processes_mentioning(text: str) -> list[psutil.Process]:
    """Live processes whose command line mentions ``text`` (a run folder)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(text in part for part in process.info["cmdline"] or []):
                found.append(process)
        except psutil.Error:
            continue
    return found


def zombie(process: psutil.Process) -> bool:
    # A zombie holds no memory and runs nothing: it only waits to be reaped.
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def resource_tracker(process: psutil.Process) -> bool:
    """multiprocessing's resource tracker: the first spawn in the session (the
    gloo peers in tests/refcache) starts it as our child, and it lives until
    pytest exits. It is no test's leftover, whichever test ran first."""
    try:
        return any("multiprocessing.resource_tracker" in part for part in process.cmdline())
    except psutil.Error:
        return False


@pytest.fixture
def no_leftovers(tmp_path: Path) -> Iterator[Path]:
    """A run folder; after the test no process of ours may survive.

    Children of this process are checked, and so is every process whose
    command line names the run folder: a killed worker's children are
    re-parented to init and are no longer our children.
    """
    yield tmp_path
    children = [
        p for p in psutil.Process().children(recursive=True)
        if not (zombie(p) or resource_tracker(p))
    ]
    named = processes_mentioning(str(tmp_path))
    assert not children, f"processes left behind: {children}"
    assert not named, f"processes left behind: {named}"
