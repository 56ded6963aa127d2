"""What a recorded program's environment adds to its import path."""

from __future__ import annotations

import os
from pathlib import Path

import harness
from harness.config import RunConfig
from harness.parent.recording import recording_env


def test_the_program_imports_harness_from_the_folder_that_holds_the_package(
    tmp_path: Path,
) -> None:
    config = RunConfig(scenario="program", rundir=str(tmp_path))
    entries = recording_env(tmp_path, False, config)["PYTHONPATH"].split(os.pathsep)
    package = Path(harness.__file__).resolve().parent
    assert Path(entries[-1]) == package.parent
    # Not the package folder itself: that would make its subpackages top-level names.
    assert package not in [Path(e).resolve() for e in entries]
