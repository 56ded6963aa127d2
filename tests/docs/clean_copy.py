"""A clean copy of the repository with a .venv of its own, and commands run in it.

Why not the shared .venv (a symlink, as a user's checkout has its own): its
editable install maps ``harness`` to the checkout ``make install`` ran in, so
``.venv/bin/leak-harness`` in a copy would run that checkout's code, not the
copy's. And why not ``PYTHONPATH=<copy>``: it makes every top-level folder of
the copy (``examples``, ``bench``) importable from anywhere, which hides the
bug class this test is for (a command that works only while the current folder
is on ``sys.path``, as pytest's ``pythonpath = ["."]`` has it).

So the copy gets the venv ``make install`` would give it, built without the
network: the base interpreter's venv (no pip), the installed dependencies
through a ``.pth`` line naming the shared site-packages (the ``.pth`` files
there are not run, so its editable finder is not installed), the copy's own
editable finder (``copy_finder``), the shared console scripts with their
interpreter line pointed at the copy's python, and ``.venv/.installed`` touched
so that make's ``install`` prerequisite holds.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tomllib
from dataclasses import dataclass
from pathlib import Path

FINDER_SOURCE = Path(__file__).with_name("copy_finder.py")
FINDER_MODULE = "leak_harness_copy_finder"
# Variables of the test run that a user's shell would not have: the import path
# (the point of the test), pytest's, make's (when run by `make docs-check`), a
# recording's, and the CI summary `check` would append to.
DROPPED_PREFIXES = ("PYTEST_", "MAKE", "MFLAGS", "LEAK_HARNESS_")
DROPPED = frozenset({"PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONSTARTUP",
                     "GITHUB_STEP_SUMMARY", "VIRTUAL_ENV"})
# Time a stopped command gets between SIGTERM and SIGKILL.
KILL_GRACE_S = 10.0


def listed_files(root: Path) -> list[str]:
    """The files git sees in the checkout (tracked and new), none it ignores."""
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True, capture_output=True,
    ).stdout.decode()
    return sorted({name for name in out.split("\0") if name})


def copy_files(root: Path, dest: Path) -> int:
    """Copy the listed files (a deleted one is skipped); how many were copied."""
    copied = 0
    for name in listed_files(root):
        source = root / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the checkout, not yet in git
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
        copied += 1
    return copied


def packages(root: Path) -> list[str]:
    """Top-level packages the install maps, from [tool.setuptools.packages.find]."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({pattern.rstrip("*").rstrip(".") for pattern in include})


def site_packages(venv: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return venv / "lib" / version / "site-packages"


def copy_scripts(shared_bin: Path, venv: Path) -> None:
    """The shared console scripts, run by the copy's python; binaries linked."""
    python = venv / "bin" / "python"
    for script in sorted(shared_bin.iterdir()):
        target = venv / "bin" / script.name
        if target.exists() or target.is_symlink() or not script.is_file():
            continue  # the new venv's own python and activate scripts
        head = script.read_bytes()[:256]
        first = head.split(b"\n", 1)[0]
        if first.startswith(b"#!") and b"python" in first.rsplit(b"/", 1)[-1]:
            body = script.read_text(encoding="utf-8").split("\n", 1)[1]
            target.write_text(f"#!{python}\n{body}", encoding="utf-8")
            target.chmod(0o755)
        else:
            target.symlink_to(script.resolve())


def make_venv(copy: Path) -> Path:
    """The copy's .venv, as described in the module docstring; its path."""
    venv = copy / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = site_packages(venv)
    shutil.copy2(FINDER_SOURCE, site / f"{FINDER_MODULE}.py")
    shared_site = Path(sysconfig.get_path("purelib")).resolve()
    finder_args = f"{str(copy)!r}, {','.join(packages(copy))!r}"
    (site / "leak_harness_copy.pth").write_text(
        f"{shared_site}\nimport {FINDER_MODULE}; {FINDER_MODULE}.install({finder_args})\n",
        encoding="utf-8",
    )
    copy_scripts(Path(sys.executable).parent, venv)
    (venv / ".installed").touch()  # newer than pyproject.toml: make installs nothing
    return venv


def command_env(venv: Path) -> dict[str, str]:
    """The test's environment as a user's shell in the copy would have it."""
    env = {
        key: value for key, value in os.environ.items()
        if key not in DROPPED and not key.startswith(DROPPED_PREFIXES)
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


@dataclass(frozen=True)
class Outcome:
    code: int | None  # None: stopped at the timeout
    output: str  # stdout and stderr, interleaved


def run_bounded(command: str, cwd: Path, env: dict[str, str], timeout_s: float) -> Outcome:
    """``bash -c command`` in its own session, killed with all it started at the timeout."""
    process = subprocess.Popen(
        ["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout_s)
        return Outcome(process.returncode, output.decode(errors="replace"))
    except subprocess.TimeoutExpired:
        # A make or harness run has children: stop the whole session, gently first.
        os.killpg(process.pid, signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
        return Outcome(None, output.decode(errors="replace"))
