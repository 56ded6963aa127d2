"""Which code a run measured: the git commit of the code under test and of the harness.

Read with ``git`` in that code's own folder; ``unknown (why)`` outside a repository.
Standard library only, so every layer may ask: the worker writes it into the samples'
header, ``check`` and ``report`` into the history's rows.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

# The folder holding the ``harness`` package: where its commit is read, and what a
# recorded program gets on its path to import ``harness`` (and nothing below it).
REPO_ROOT = Path(__file__).resolve().parents[1]


def git_commit(folder: Path = REPO_ROOT) -> str:
    """The commit of the repository holding ``folder`` (default: the harness's own),
    or ``unknown (why)`` outside a repository."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({type(exc).__name__})"
    if done.returncode != 0:
        return "unknown (no commit)"
    return done.stdout.strip()


def target_folder(target: str | None) -> Path | None:
    """Where a ``module:callable`` target's top-level package lives, without importing it."""
    if not target:
        return None
    top = target.partition(":")[0].split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin).parent if spec.origin else None


def commit_under_test(target: str | None = None) -> str:
    """The commit of the code under test: the target's repository when a target is
    given, else the harness's (whose reference cache is then what runs). Read in
    that code's own folder, never the caller's: run from inside another
    repository, the current directory would give that one's commit."""
    return git_commit(target_folder(target) or REPO_ROOT)


def short_commit(target: str | None = None) -> str | None:
    """:func:`commit_under_test`, abbreviated as history rows show it; None outside a
    repository."""
    commit = commit_under_test(target)
    return None if commit.startswith("unknown") else commit[:7]
