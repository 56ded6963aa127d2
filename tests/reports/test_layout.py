"""How reports are put together: no fitting code, no eager matplotlib, one home for file names."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from harness.runfiles import names

ROOT = Path(__file__).resolve().parents[2]
# Reports draw the line the summary stores; they must not be able to fit their own.
FITTING = ("harness.analysis.trend", "harness.analysis.shapes", "harness.analysis.slope",
           "harness.analysis.fitline", "harness.analysis.summary")
# Names with an extension: "stop" and "heartbeat" are also plain words elsewhere.
RUN_FOLDER_NAMES = {value for key, value in vars(names).items()
                    if key.isupper() and isinstance(value, str) and "." in value}


def test_importing_every_report_module_loads_no_fitting_code_and_no_matplotlib() -> None:
    code = ("import importlib, pkgutil, sys, reports\n"
            "for m in pkgutil.walk_packages(reports.__path__, 'reports.'):\n"
            "    importlib.import_module(m.name)\n"
            "print('\\n'.join(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    loaded = done.stdout.split()
    assert "reports.run.report" in loaded and "reports.history.plots" in loaded
    banned = (*FITTING, "matplotlib")
    assert [m for m in loaded if m.startswith(banned)] == []


def test_run_folder_file_names_are_spelled_only_in_runfiles_names() -> None:
    spelled = []
    for package in ("harness", "reports"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "harness" / "runfiles" / "names.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in RUN_FOLDER_NAMES:
                    spelled.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert spelled == []
