"""Thin wrappers over iproute2 for network namespaces (the only place that shells out to ip)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from juice.util import proc

NETNS_DIR = Path("/run/netns")


def exists(ns: str) -> bool:
    return (NETNS_DIR / ns).exists()


def list_all() -> list[str]:
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir())


def add(ns: str) -> None:
    proc.run(["ip", "netns", "add", ns])
    ip(ns, "link", "set", "lo", "up")


def ip(ns: str, *args: str) -> None:
    proc.run(["ip", "-n", ns, *args])


def exec_argv(ns: str, argv: Sequence[str]) -> list[str]:
    """The argv that runs ``argv`` inside ``ns``."""
    return ["ip", "netns", "exec", ns, *argv]


def run_in(ns: str, argv: Sequence[str], *, check: bool = True,
           timeout: float = 60.0, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    return proc.run(exec_argv(ns, argv), check=check, timeout=timeout, input_text=input_text)


def sysctl(ns: str, settings: dict[str, str]) -> None:
    args = [f"{k}={v}" for k, v in settings.items()]
    run_in(ns, ["sysctl", "-q", "-w", *args])


def pids(ns: str) -> list[int]:
    """Processes whose network namespace is ``ns``."""
    if not exists(ns):
        return []
    cp = proc.run(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in cp.stdout.split() if x.isdigit()]


def delete(ns: str, grace_s: float = 5.0) -> None:
    """Kill every process inside ``ns`` (TERM, then KILL) and delete it. Idempotent."""
    if not exists(ns):
        return
    proc.terminate(pids(ns), grace_s=grace_s)
    proc.run(["ip", "netns", "delete", ns], check=False)
    if exists(ns):  # a stale mount point without a namespace behind it
        subprocess.run(["umount", "-l", str(NETNS_DIR / ns)], capture_output=True, check=False)
        (NETNS_DIR / ns).unlink(missing_ok=True)
