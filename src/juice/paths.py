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
