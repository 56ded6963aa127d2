"""One run per folder: the lock is exclusive across processes and dies with its holder."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.parent import folder_lock
from harness.runfiles.names import LOCK_FILE

HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


def test_a_folder_locked_by_another_process_is_refused_until_that_process_dies(
    tmp_path: Path,
) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / LOCK_FILE)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(UsageError, match=r"another run is writing to .* right now"):
            folder_lock.claim(tmp_path)
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    time.sleep(0.05)
    folder_lock.claim(tmp_path)  # the dead run's lock is no lock
    folder_lock.claim(tmp_path)  # held already by this process: a no-op
    folder_lock.release(tmp_path)
    assert not (tmp_path / LOCK_FILE).exists()
