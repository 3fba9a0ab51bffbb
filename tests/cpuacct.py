"""CPU time per test, every process a test starts included (opt-in: ``pytest -p tests.cpuacct``).

The suite is CPU-bound on 2 cores (its servers and drivers share them), so its wall time follows
the CPU its tests use, not their wall durations (which are inflated by the tests running beside
them). Each pytest process moves itself into a cgroup-v1 ``cpuacct`` group of its own
(``/sys/fs/cgroup/cpuacct/juice-tests-<pid>``); every process it starts stays there (servers
that daemonise too: they never leave the group), and pytest-xdist runs one test at a time per
worker, so the group's ``cpuacct.usage`` before and after a test is that test's CPU time.

Written to ``$JUICE_TEST_CPU_DIR/cpu-<pid>.json`` ({nodeid: cpu seconds}); nothing when the
variable is unset or the machine has no writable cpuacct hierarchy. The group is removed when
the process ends (its processes moved back to the root group first); a group left by a crashed
run is removed at the next start (its owner pid is gone).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Generator
from pathlib import Path

import pytest

ROOT = Path("/sys/fs/cgroup/cpuacct")
PREFIX = "juice-tests-"
_group: Path | None = None
_cpu: dict[str, float] = {}


def _usage(group: Path) -> float:
    return int((group / "cpuacct.usage").read_text()) / 1e9


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
    if not os.environ.get("JUICE_TEST_CPU_DIR") or not (ROOT / "cgroup.procs").exists():
        return
    if hasattr(config, "workerinput") is False and config.getoption("numprocesses", None):
        return  # the xdist controller runs no test
    _sweep()
    group = ROOT / f"{PREFIX}{os.getpid()}"
    try:
        group.mkdir(exist_ok=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return
    _group = group


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    if _group is None:
        yield
        return
    t0 = _usage(_group)
    yield
    _cpu[item.nodeid] = round(_usage(_group) - t0, 2)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _group
    if _group is None:
        return
    out = Path(os.environ["JUICE_TEST_CPU_DIR"])
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".cpu-{os.getpid()}.json"
    tmp.write_text(json.dumps(_cpu, indent=0, sort_keys=True))
    tmp.replace(out / f"cpu-{os.getpid()}.json")
    with contextlib.suppress(OSError):
        (ROOT / "cgroup.procs").write_text(str(os.getpid()))
        for p in (_group / "cgroup.procs").read_text().split():  # anything still running
            with contextlib.suppress(OSError):
                (ROOT / "cgroup.procs").write_text(p)
        _group.rmdir()
    _group = None
