"""The CI recipes under examples/ci as their CI will read them: the GitLab pipeline against
GitLab's schema (check-jsonschema's vendored copy, offline), the Kubernetes CronJob's
structure and its night script run for every shard with a stand-in leak-harness, and
the image recipe against the Makefile's torch pin and the packages pyproject installs."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.harness.conftest import ROOT

yaml = pytest.importorskip("ruamel.yaml")  # check-jsonschema's YAML reader ([dev])

CI = ROOT / "examples" / "ci"
GITLAB = CI / "gitlab-ci.yml"
KUBERNETES = CI / "kubernetes-nightly.yaml"
DOCKERFILE = CI / "Dockerfile"


def load_all(path: Path) -> list[Any]:
    return [doc for doc in yaml.YAML(typ="safe").load_all(path.read_text()) if doc]


def test_the_gitlab_pipeline_matches_gitlabs_schema() -> None:
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema",
                           "vendor.gitlab-ci", str(GITLAB)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_gitlab_shards_run_in_parallel_and_the_merge_runs_whatever_they_found() -> None:
    (pipeline,) = load_all(GITLAB)
    shard, merge, pages = pipeline["shard"], pipeline["merge"], pipeline["pages"]
    assert shard["parallel"] >= 2
    script = " ".join(shard["script"])
    # CI_NODE_INDEX counts from 1: --shard auto reads it; each shard has its own folder.
    assert "--shard auto" in script and "shard-$CI_NODE_INDEX-of-$CI_NODE_TOTAL" in script
    assert "--no-history" in script and "--history results/history.sqlite" in script
    assert shard["artifacts"]["when"] == "always"
    # A shard that found a leak failed its job: the merge and the site come anyway.
    for job in (merge, pages):
        rules = pipeline[job["extends"]]["rules"]
        assert [rule["when"] for rule in rules] == ["always"]
    assert all("rules" in pipeline[job["extends"]] for job in (pipeline["history"], shard))
    assert "workflow" not in pipeline  # an include must not change the rest of a pipeline
    assert {n["job"] for n in merge["needs"]} == {"history", "shard"}
    assert merge["resource_group"]  # one writer of the history at a time
    merged = "\n".join(merge["script"])
    # The history is stored even when the merge fails; the merge's exit comes last.
    assert merged.index("|| status=$?") < merged.index("--upload-file") \
        < merged.index("exit $status")
    assert merge["artifacts"]["reports"]["junit"] == "results/nightly/junit.xml"
    assert pages["artifacts"]["paths"] == ["public"]


def kubernetes() -> tuple[dict[str, Any], dict[str, Any]]:
    docs = {doc["kind"]: doc for doc in load_all(KUBERNETES)}
    return docs["CronJob"], docs["ConfigMap"]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_the_kubernetes_cronjob_runs_every_shard_at_once() -> None:
    cronjob, _ = kubernetes()
    assert cronjob["spec"]["schedule"] and cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    job = cronjob["spec"]["jobTemplate"]["spec"]
    assert job["completionMode"] == "Indexed"
    assert job["completions"] == job["parallelism"] >= 2
    assert job["backoffLimit"] == 0 and job["activeDeadlineSeconds"] > 0
    (container,) = job["template"]["spec"]["containers"]
    env = env_of(container)
    # JOB_COMPLETION_INDEX (from 0) with the count --shard auto pairs it with.
    assert int(env["LEAK_HARNESS_SHARD_COUNT"]) == job["completions"]
    assert "job-name" in env["NIGHT_ID"]["fieldRef"]["fieldPath"]
    assert container["command"] == ["sh", "/night/night.sh"]


def stand_in(bin_dir: Path, log: Path) -> None:
    """A leak-harness that logs its arguments; shard index 1 finds a leak (exit 1)."""
    script = bin_dir / "leak-harness"
    script.write_text(f"""#!/bin/sh
echo "$*" >> {log}
case "$*" in
  *"check "*) mkdir -p "$(echo "$*" | sed 's/.*--out //')";
              [ "$JOB_COMPLETION_INDEX" = 1 ] && exit 1; exit 0;;
  *"report "*) exit 1;;
esac
exit 0
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_the_night_script_merges_once_after_every_shard_even_one_that_found_a_leak(
    tmp_path: Path,
) -> None:
    cronjob, configmap = kubernetes()
    job = cronjob["spec"]["jobTemplate"]["spec"]
    (container,) = job["template"]["spec"]["containers"]
    night = tmp_path / "night.sh"
    night.write_text(configmap["data"]["night.sh"])
    bin_dir, log, results = tmp_path / "bin", tmp_path / "calls.log", tmp_path / "results"
    bin_dir.mkdir()
    stand_in(bin_dir, log)
    env = {**os.environ, **{k: v for k, v in env_of(container).items() if isinstance(v, str)},
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "RESULTS": str(results),
           "NIGHT_ID": "leak-harness-nightly-29000000"}
    codes = []
    for index in range(job["completions"]):  # one pod after another, as the last ends last
        done = subprocess.run(["sh", str(night)], env={**env, "JOB_COMPLETION_INDEX": str(index)},
                              capture_output=True, text=True, timeout=30)
        codes.append(done.returncode)
        assert "Traceback" not in done.stderr
    calls = log.read_text().splitlines()
    checks = [c for c in calls if c.startswith("check ")]
    assert len(checks) == job["completions"]
    assert all("--shard auto" in c and "--no-history" in c for c in checks)
    # Every pod but the last exits 0 (a failed pod would end the others); the last
    # merges once, after all of them, and exits with the night's status (report's 1).
    assert codes == [0] * (job["completions"] - 1) + [1]
    merges = [c for c in calls if c.startswith(("report ", "history "))]
    assert calls[-2:] == merges and len(merges) == 2
    folder = results / "nights" / "leak-harness-nightly-29000000"
    assert merges[0] == f"report {folder} --out {folder} --history {results}/history.sqlite"
    assert merges[1].startswith(f"history --db {results}/history.sqlite --plots {folder}")
    assert (results / "latest").resolve() == folder.resolve()


def test_the_image_pins_the_makefiles_cpu_torch_and_installs_every_package() -> None:
    text = DOCKERFILE.read_text()
    pin = re.search(r'"torch==([\d.]+)"', (ROOT / "Makefile").read_text())
    assert pin is not None
    assert re.search(r"^FROM python:3\.11", text, re.M)
    assert f"ARG TORCH_VERSION={pin.group(1)}" in text
    assert "download.pytorch.org/whl/cpu" in text
    assert text.index('"torch==${TORCH_VERSION}"') < text.index('pip install ".[native]"')
    include = re.search(r"include = \[(.*?)\]", (ROOT / "pyproject.toml").read_text())
    assert include is not None
    for package in re.findall(r'"(\w+)\*"', include.group(1)):
        assert re.search(rf"^COPY {package} {package}$", text, re.M), package
