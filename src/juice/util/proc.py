"""Process helpers: run commands with clear errors, check liveness without pid reuse."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence

from juice.errors import LabError
from juice.onhost import procfs


def run(argv: Sequence[str], *, check: bool = True, timeout: float = 60.0,
        input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv``; on failure raise LabError quoting the command and its stderr."""
    try:
        cp = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                            input=input_text, check=False)
    except FileNotFoundError as e:
        raise LabError(f"command not found: {argv[0]} (run scripts/setup.sh)") from e
    except subprocess.TimeoutExpired as e:
        raise LabError(f"command timed out after {timeout:.0f}s: {' '.join(argv)}") from e
    if check and cp.returncode != 0:
        err = (cp.stderr or cp.stdout).strip().splitlines()
        last = err[-1] if err else f"exit code {cp.returncode}"
        raise LabError(f"`{' '.join(argv)}` failed: {last}")
    return cp


def start_time(pid: int) -> int | None:
    """Kernel start time of ``pid`` (clock ticks since boot), or None if it is gone (a zombie
    is: it has exited). Read by the one /proc reader, ``juice.onhost.procfs``."""
    st = procfs.read_stat(pid)
    return None if st is None or st.state == "Z" else st.start


def alive(pid: int, started: int | None = None) -> bool:
    """True when ``pid`` runs and (if given) is the same process that started at ``started``."""
    st = start_time(pid)
    if st is None:
        return False
    return started is None or st == started


def terminate(pids: Sequence[int], grace_s: float = 5.0, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` to ``pids``, wait up to ``grace_s`` (bounded), then SIGKILL the survivors."""
    live = [p for p in pids if alive(p)]
    for p in live:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while live and time.monotonic() < deadline:
        _reap(live)
        live = [p for p in live if alive(p)]
        if live:
            time.sleep(0.05)
    for p in live:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5.0
    while live and time.monotonic() < deadline:
        _reap(live)
        live = [p for p in live if alive(p)]
        if live:
            time.sleep(0.02)


def _reap(pids: Sequence[int]) -> None:
    """Collect our own exited children so they do not linger as zombies."""
    for p in pids:
        try:
            os.waitpid(p, os.WNOHANG)
        except ChildProcessError:
            pass
