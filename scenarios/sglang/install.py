"""Install an SGLang release beside the harness, leaving the environment's torch alone.

``python -m scenarios.sglang.install 0.5.23`` puts the release in
``.sglang/0.5.23/site`` with ``pip install --no-deps --target``, plus the few
light modules its cache code really executes (:data:`EXTRAS`, measured), also
with ``--no-deps``. Nothing is installed into the virtualenv, so pip never
resolves torch. Idempotent: a folder that already holds the release and its
extras is left as it is. Then point the target at it with
``LEAK_HARNESS_SGLANG=0.5.23`` (or the folder's path); with one release installed
the target finds it without the variable.
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scenarios.sglang.install",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="+", help="SGLang releases, e.g. 0.5.23")
    parser.add_argument("--root", type=Path, default=ROOT, help=f"default: {ROOT}")
    args = parser.parse_args(argv)
    for version in args.versions:
        started = time.monotonic()
        site = install(version, args.root)
        print(f"SGLang {version} in {site} ({time.monotonic() - started:.0f} s); "
              f"use it with {ENV_VAR}={version}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
