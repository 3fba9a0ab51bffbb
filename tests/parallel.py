"""How the suite runs on several pytest-xdist workers (``scripts/test.sh`` runs ``-n N
--dist loadgroup``): shared deployments stay on one worker, the longest tests start first.

- **Shared deployments.** A test that uses a fixture of ours wider than a function (a
  module's Keystone, a session's nova stack) is put in the ``xdist_group`` of that fixture,
  so the deployment is brought up once, on one worker, and driven by every test that uses
  it. A module can also name a group itself (``pytest.mark.xdist_group("ssh-hosts")``) for
  tests that share something outside pytest (the hosts' mount point).
- **Longest first.** The durations of the last full run are kept in
  ``$JUICE_CACHE/test-durations.json`` (outside the clone; ``tests/durations.json`` is the
  copy committed for a fresh machine). Work units (a group, or a single test) are ordered by
  their total duration, longest first, so that a three-minute nova run does not start last;
  tests never measured count as long when they are marked ``slow``. xdist then hands units
  to whichever worker is free. Ordering only: no test depends on it, and any test still runs
  alone (``pytest path::name``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

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
    """The group of the widest fixture of ours (defined under tests/) this test uses."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in sorted(item.fixturenames):  # type: ignore[attr-defined]
        for fdef in info.name2fixturedefs.get(name, ()):
            if fdef.scope == "function" or not fdef.baseid.startswith("tests"):
                continue
            where = item.nodeid.split("::")[0] if fdef.scope == "module" else fdef.baseid
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


# ---- the durations of this run, for the next one (the controller writes them) -------------
_RUN: dict[str, float] = {}   # node id -> setup + call + teardown of this run


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    nodeid = report.nodeid.split("@", 1)[0]  # loadgroup appends "@<group>"
    _RUN[nodeid] = _RUN.get(nodeid, 0.0) + float(report.duration)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Merge this run's durations into the cache file (controller or a plain run only; a
    run of a few tests updates just those)."""
    if hasattr(session.config, "workerinput") or not _RUN:
        return
    path = durations_file()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data.update({k: round(v, 2) for k, v in _RUN.items()})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dict(sorted(data.items())), indent=0))
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache only costs the ordering
