"""The nightly workflow as GitHub will read it: valid against its schema, on live runtimes."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.harness.conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
# The first major of each action that runs on node24: GitHub deprecated node20 and
# scheduled its removal from the runners for 2026-09-23 (actionlint 1.17's action data,
# which flagged the majors this workflow had).
NODE24_FROM = {"actions/checkout": 5, "actions/setup-python": 6, "actions/upload-artifact": 6,
               "actions/download-artifact": 7, "actions/deploy-pages": 5}
USES = re.compile(r"uses:\s*([\w.-]+/[\w.-]+)@v(\d+)")


def test_the_workflows_match_githubs_schema() -> None:
    assert WORKFLOWS
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema",
                           "vendor.github-workflows", *map(str, WORKFLOWS)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_action_is_a_major_that_still_runs() -> None:
    old = [f"{path.name}: {action}@v{major}" for path in WORKFLOWS
           for action, major in USES.findall(path.read_text())
           if int(major) < NODE24_FROM.get(action, 0)]
    assert not old, old
