"""How the suite runs on several pytest-xdist workers (``scripts/test.sh`` runs ``-n N
--dist loadgroup``): shared deployments stay on one worker, the longest tests start first.

- **Shared deployments.** A test that uses a fixture of ours wider than a function (a
  module's Keystone, a session's nova stack) is put in the ``xdist_group`` of that fixture,
  so the deployment is brought up once, on one worker, and driven by every test that uses
  it. A module can also name a group itself (``pytest.mark.xdist_group("name")``) for tests
  that share something outside pytest.
- **Longest first.** The durations of the last full run are kept in
  ``$JUICE_CACHE/test-durations.json`` (outside the clone; ``tests/durations.json`` is the
  copy committed for a fresh machine). Work units (a group, or a single test) are ordered by
  their total duration, longest first, so that a three-minute nova run does not start last;
  tests never measured count as long when they are marked ``slow``. xdist then hands units
  to whichever worker is free. Ordering only: no test depends on it, and any test still runs
  alone (``pytest path::name``).
- **The test hosts' prepared layer** (tests/testhosts.py: built once per set-up inputs, several
  minutes; always on a fresh CI machine). When this run has tests that need it (their source,
  or a fixture's, says ``prepared=True``) and it is not made yet, one process (the worker
  gw0, or a run without workers) starts its build in the background as collection ends
  (``testhosts.start_build``), so the build overlaps the other tests, and those tests are
  ordered so that no worker should reach one before the build is expected to be done
  (``BUILD_ESTIMATE_S``): a worker does not sit idle on the build lock while other tests wait.
  They still wait for it (the build lock) if it is late, and build it themselves if no build
  was started. The process that started the build waits for it at its end (other workers'
  tests may need it) or stops it (by its pid) when the run was interrupted.
"""

from __future__ import annotations

import heapq
import inspect
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

COMMITTED = Path(__file__).parent / "durations.json"
UNKNOWN_SLOW_S = 30.0   # a slow test never measured yet
UNKNOWN_S = 0.5


def durations_file() -> Path:
    return Path(os.environ.get("JUICE_CACHE", "/var/cache/juice")) / "test-durations.json"


def _known() -> dict[str, float]:
    for path in (durations_file(), COMMITTED):
        try:
            data = json.loads(path.read_text())
            return {str(k): float(v) for k, v in data.items()}
        except (OSError, ValueError, AttributeError):
            continue
    return {}


def _shared_fixture(item: pytest.Item) -> str | None:
    """The group of a fixture of ours (defined under tests/) wider than a function that this
    test uses: one per module for module fixtures, one per name for session fixtures."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in sorted(item.fixturenames):  # type: ignore[attr-defined]
        for fdef in info.name2fixturedefs.get(name, ()):
            if fdef.scope == "function" or not getattr(fdef.func, "__module__", "").startswith("tests"):
                continue
            where = item.nodeid.split("::")[0] if fdef.scope == "module" else ""
            return f"{fdef.scope}:{where}:{name}"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = _shared_fixture(item)
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))
    known = _known()

    def unit(item: pytest.Item) -> str:
        mark = item.get_closest_marker("xdist_group")
        return str(mark.args[0]) if mark is not None and mark.args else item.nodeid

    def cost(item: pytest.Item) -> float:
        default = UNKNOWN_SLOW_S if item.get_closest_marker("slow") else UNKNOWN_S
        return known.get(item.nodeid, default)

    weight: dict[str, float] = {}
    for item in items:
        weight[unit(item)] = weight.get(unit(item), 0.0) + cost(item)
    first_seen = {u: i for i, u in reversed(list(enumerate(unit(it) for it in items)))}
    # stable: a unit's tests keep their order; units longest first, ties in collection order
    items.sort(key=lambda it: (-weight[unit(it)], first_seen[unit(it)]))
    if os.environ.get(LAYER_READY_ENV) == "0":
        late = {unit(it) for it in items if needs_layer(it)}
        if late:
            order = after_build(list(dict.fromkeys(unit(it) for it in items)), weight, late,
                                workers(config), BUILD_ESTIMATE_S)
            rank = {u: i for i, u in enumerate(order)}
            items.sort(key=lambda it: rank[unit(it)])


# ---- the test hosts' prepared layer: built in the background, waited for late -----------------
LAYER_READY_ENV = "JUICE_TEST_LAYER_READY"  # "1"/"0": decided once, by the controller
BUILD_ESTIMATE_S = 480.0  # the prepared layer's build on a fresh machine under the suite's load
_SOURCE_SAYS: dict[Any, bool] = {}


def _says_prepared(func: Callable[..., Any]) -> bool:
    if func not in _SOURCE_SAYS:
        try:
            _SOURCE_SAYS[func] = "prepared=True" in inspect.getsource(func)
        except (OSError, TypeError):
            _SOURCE_SAYS[func] = False
    return _SOURCE_SAYS[func]


def needs_layer(item: pytest.Item) -> bool:
    """The test makes prepared test hosts: its function, or a fixture of ours it uses, says
    ``prepared=True`` (``testhosts.test_hosts(..., prepared=True)``), or it is marked
    ``prepared_hosts``."""
    if item.get_closest_marker("prepared_hosts") is not None:
        return True
    func = getattr(item, "function", None)
    if func is not None and _says_prepared(func):
        return True
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        for fdef in (info.name2fixturedefs.get(name, ()) if info is not None else ()):
            if getattr(fdef.func, "__module__", "").startswith("tests") and _says_prepared(fdef.func):
                return True
    return False


def workers(config: pytest.Config) -> int:
    n = os.environ.get("PYTEST_XDIST_WORKER_COUNT") or getattr(config.option, "numprocesses", None)
    try:
        return max(1, int(n or 1))
    except (TypeError, ValueError):
        return 1


def after_build(units: list[str], weight: dict[str, float], late: set[str], n: int,
                build_s: float) -> list[str]:
    """``units`` (in their order) reordered so that, on ``n`` workers each taking the next unit
    when free, no unit of ``late`` starts before ``build_s``: the others fill the time until
    then (the late ones keep their order; one still starts early when nothing else is left)."""
    early = [u for u in units if u not in late]
    wait = [u for u in units if u in late]
    free = [0.0] * n
    out: list[str] = []
    while early or wait:
        t = heapq.heappop(free)
        u = wait.pop(0) if wait and (t >= build_s or not early) else early.pop(0)
        out.append(u)
        heapq.heappush(free, t + weight.get(u, UNKNOWN_S))
    return out


_BUILD: list[subprocess.Popen[bytes]] = []


def _testhosts() -> Any:
    here = str(Path(__file__).resolve().parents[1])
    if here not in sys.path:
        sys.path.insert(0, here)
    from tests import testhosts

    return testhosts


def pytest_configure(config: pytest.Config) -> None:
    """The controller (or a run without workers) decides once whether the layer is made; the
    workers inherit the answer (their collection orders must be the same)."""
    config.addinivalue_line("markers", "prepared_hosts: needs the test hosts' prepared layer "
                                       "(tests/testhosts.py; found by itself for prepared=True)")
    if hasattr(config, "workerinput") or LAYER_READY_ENV in os.environ:
        return
    th = _testhosts()
    ready = th.available() is not None or th.prepared_ready()
    os.environ[LAYER_READY_ENV] = "1" if ready else "0"


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the layer's build in the background (one process: gw0, or a run without workers)
    when a selected test needs it and it is not made."""
    config = session.config
    wid = getattr(config, "workerinput", {}).get("workerid")
    if (wid not in (None, "gw0") or os.environ.get(LAYER_READY_ENV) != "0" or config.option.collectonly
            or not any(needs_layer(it) for it in session.items)):
        return
    th = _testhosts()
    if th.available() is not None or th.prepared_ready():
        return
    _BUILD.append(th.start_build())
    config.get_terminal_writer().line(
        f"test hosts: building the prepared layer in the background (pid {_BUILD[0].pid}, "
        f"log {th.BUILD_LOG})")


def _end_build(session: pytest.Session, exitstatus: int) -> None:
    if not _BUILD:
        return
    p = _BUILD.pop()
    th = _testhosts()
    if exitstatus == pytest.ExitCode.INTERRUPTED or session.shouldstop:
        th.stop_build(p)
    else:  # a test on another worker may still need it: wait (bounded by the build's own)
        try:
            p.wait(timeout=th.PREPARE_TIMEOUT_MIN * 60 + 600)
        except subprocess.TimeoutExpired:
            th.stop_build(p)


# ---- the durations of this run, for the next one (the controller writes them) -------------
_RUN: dict[str, float] = {}   # node id -> setup + call + teardown of this run (s)
_CPU: dict[str, float] = {}   # node id -> CPU of its worker and of the processes it reaped (s)
_mark = [0.0]


def _cpu_s() -> float:
    """This worker's CPU and what it reaped; with ``-p tests.cpuacct``, its cgroup's (every process
    it started, daemons and test hosts included)."""
    from tests import cpuacct

    group = cpuacct.usage()
    if group is not None:
        return group
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    _mark[0] = _cpu_s()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Each phase's report carries the CPU spent since the last one (servers count once they
    are stopped and reaped: a shared deployment's CPU goes to the test that tears it down)."""
    outcome = yield
    now = _cpu_s()
    outcome.get_result().user_properties.append(("cpu_s", now - _mark[0]))
    _mark[0] = now


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    nodeid = report.nodeid.split("@", 1)[0]  # loadgroup appends "@<group>"
    _RUN[nodeid] = _RUN.get(nodeid, 0.0) + float(report.duration)
    cpu = sum(float(v) for k, v in report.user_properties if k == "cpu_s")
    _CPU[nodeid] = _CPU.get(nodeid, 0.0) + cpu


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Merge this run's durations into the cache file (controller or a plain run only; a
    run of a few tests updates just those). The background build, if this process started
    it, is waited for or stopped first."""
    _end_build(session, exitstatus)
    if hasattr(session.config, "workerinput") or not _RUN:
        return
    path = durations_file()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data.update({k: round(v, 2) for k, v in _RUN.items()})
    cpu_path = path.with_name("test-cpu.json")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for dest, values in ((path, data), (cpu_path, {k: round(v, 2) for k, v in _CPU.items()})):
            tmp = dest.with_suffix(".tmp")
            tmp.write_text(json.dumps(dict(sorted(values.items())), indent=0))
            tmp.replace(dest)
    except OSError:
        return  # a read-only cache only costs the ordering
    top = sorted(_CPU.items(), key=lambda kv: -kv[1])[:12]
    if top and len(_CPU) > 50:
        tw = session.config.get_terminal_writer()
        tw.line(f"CPU of this run's tests (the worker and what it reaped): {sum(_CPU.values()):.0f} s; "
                f"the most ({cpu_path}):")
        for k, v in top:
            tw.line(f"{v:8.1f} s  {_RUN.get(k, 0):6.1f} s wall  {k}")
