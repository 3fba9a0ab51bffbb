"""CPU time of every process a test starts, daemons included.

Opt-in: ``PYTHONPATH=. pytest -p tests.cpuacct``.

By default the suite's CPU per test (``tests/parallel.py``: ``test-cpu.json`` and the summary at
the end) is what a worker used and reaped: a server that daemonises, or a test host's processes
in their own PID namespace, are not counted. With this plugin each pytest process moves itself
into a cgroup-v1 ``cpuacct`` group of its own (``/sys/fs/cgroup/cpuacct/juice-tests-<pid>``);
every process it starts stays there, so the group's ``cpuacct.usage`` (``usage()``) is what
``tests/parallel.py`` reads instead. Nothing happens where the machine has no writable cpuacct
hierarchy. The group is removed when the process ends (its processes moved back to the root
group first); a group left by a crashed run is removed at the next start (its owner pid is gone).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

ROOT = Path("/sys/fs/cgroup/cpuacct")
PREFIX = "juice-tests-"
_group: Path | None = None


def usage() -> float | None:
    """CPU seconds of this process's group so far (None: no group, the plugin is not in use)."""
    if _group is None:
        return None
    try:
        return int((_group / "cpuacct.usage").read_text()) / 1e9
    except (OSError, ValueError):
        return None


def _sweep() -> None:
    for d in ROOT.glob(PREFIX + "*"):
        pid = d.name[len(PREFIX):]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                for p in (d / "cgroup.procs").read_text().split():
                    (ROOT / "cgroup.procs").write_text(p)
                d.rmdir()


def pytest_configure(config: pytest.Config) -> None:
    global _group
    if not (ROOT / "cgroup.procs").exists():
        return
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None):
        return  # the xdist controller runs no test
    _sweep()
    group = ROOT / f"{PREFIX}{os.getpid()}"
    try:
        group.mkdir(exist_ok=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return
    _group = group


def pytest_unconfigure(config: pytest.Config) -> None:
    global _group
    if _group is None:
        return
    with contextlib.suppress(OSError):
        (ROOT / "cgroup.procs").write_text(str(os.getpid()))
        for p in (_group / "cgroup.procs").read_text().split():  # anything still running
            with contextlib.suppress(OSError):
                (ROOT / "cgroup.procs").write_text(p)
        _group.rmdir()
    _group = None
