"""Where Juice keeps its state, work files and caches (all overridable by environment)."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """Lab state files (tmpfs: a reboot clears them together with the namespaces)."""
    return Path(os.environ.get("JUICE_STATE_DIR", "/run/juice"))


def work_dir() -> Path:
    """Per-lab work files: server data dirs, logs, sockets. Removed by ``lab down``."""
    return Path(os.environ.get("JUICE_WORK_DIR", "/var/tmp/juice"))


def cache_dir() -> Path:
    """Venv and native builds, outside the clone, reused across runs."""
    return Path(os.environ.get("JUICE_CACHE", "/var/cache/juice"))


def native_bin(name: str) -> Path:
    """Path of a native helper built by ``native/build.sh``."""
    return cache_dir() / "bin" / name


def private_tmp(kind: str) -> Path:
    """A new private temp dir ``juice-<kind>-<pid>-*`` (mode 0700): swept by
    ``sweep_private_tmp`` once its process is gone (a crash leaves nothing for long)."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix=f"juice-{kind}-{os.getpid()}-"))


PRIVATE_TMP_KINDS = ("target", "remote")  # every kind private_tmp is called with


def sweep_private_tmp() -> list[Path]:
    """Remove the ``private_tmp`` dirs of processes that no longer run; the removed paths."""
    import re
    import shutil
    import tempfile

    pattern = re.compile(rf"^juice-(?:{'|'.join(PRIVATE_TMP_KINDS)})-(\d+)-[A-Za-z0-9_]{{8}}$")
    gone = []
    for d in Path(tempfile.gettempdir()).glob("juice-*"):
        m = pattern.match(d.name)
        if m and d.is_dir() and not Path(f"/proc/{m.group(1)}").exists():
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
    return gone
