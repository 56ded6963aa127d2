"""Install an SGLang release beside the harness, leaving the environment's torch alone.

``python -m scenarios.sglang.install 0.5.23`` puts the release in
``.sglang/0.5.23/site`` with ``pip install --no-deps --target``, plus the few
light modules its cache code really executes (:data:`EXTRAS`, measured), also
with ``--no-deps``. Nothing is installed into the virtualenv, so pip never
resolves torch. Idempotent: a folder that already holds the release and its
extras is left as it is. Releases that compile their page hash on first use (0.5.17
on: a torch C++ extension, ~20 s of g++) build it here, once, not inside the first
host-tier run (where, on a loaded machine, build and start together came within a
second of the 30 s heartbeat limit). Then point the target at it with
``LEAK_HARNESS_SGLANG=0.5.23`` (or the folder's path); with one release installed
the target finds it without the variable.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from scenarios.sglang.glue import ENV_VAR, ROOT

# Pure-Python or small wheels that the cache path executes at import or call time.
EXTRAS = (
    "msgspec",  # typed records of the runtime context and the cache's messages (0.5.17+)
    "dill",  # pickling helpers imported by the utils the pools use (0.5.17+)
    "regex",  # patterns built at import by the parsers schedule_batch imports (0.5.23)
)


def site_of(version: str, root: Path = ROOT) -> Path:
    return root / version / "site"


def installed(site: Path, version: str) -> list[str]:
    """What is still missing from ``site`` (empty when the install is complete)."""
    missing = [] if (site / f"sglang-{version}.dist-info").is_dir() else [f"sglang=={version}"]
    for extra in EXTRAS:
        if not any(site.glob(f"{extra}-*.dist-info")):
            missing.append(extra)
    return missing


def install(version: str, root: Path = ROOT, quiet: bool = True) -> Path:
    """Install ``version`` (and the extras) under ``root``; return the site folder."""
    site = site_of(version, root)
    missing = installed(site, version)
    if not missing:
        return site
    site.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--upgrade",
               "--target", str(site), *missing]
    if quiet:
        command.append("--quiet")
    subprocess.run(command, check=True)
    return site


def prebuild_page_hash(version: str, root: Path = ROOT) -> str | None:
    """Compile the release's native page hash into its own extensions folder (a few
    seconds when already built); None when done or not needed, else why it failed."""
    site = site_of(version, root)
    if not (site / "sglang/srt/mem_cache/cpp_utils/native_hash.py").is_file():
        return None  # 0.5.11 hashes pages in Python
    if any((site.parent / "torch_extensions").glob("*/*.so")):
        return None  # built (hostglue.warm_page_hash builds into this folder)
    env = {**os.environ, ENV_VAR: str(site.parent)}
    done = subprocess.run(
        [sys.executable, "-c", "from scenarios.sglang import hostglue; hostglue.warm_page_hash()"],
        env=env, capture_output=True, text=True, cwd=Path(__file__).parents[2],
    )
    if done.returncode == 0:
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit code {done.returncode}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scenarios.sglang.install",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="+", help="SGLang releases, e.g. 0.5.23")
    parser.add_argument("--root", type=Path, default=ROOT, help=f"default: {ROOT}")
    args = parser.parse_args(argv)
    for version in args.versions:
        started = time.monotonic()
        site = install(version, args.root)
        failed = prebuild_page_hash(version, args.root)
        if failed is not None:
            print(f"SGLang {version}: its page hash did not compile ({failed}); the host-tier "
                  "scenarios will try again in their first run.", file=sys.stderr)
        print(f"SGLang {version} in {site} ({time.monotonic() - started:.0f} s); "
              f"use it with {ENV_VAR}={version}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
