"""Which tests use real servers (``pytest --server-census=FILE``).

Every server Juice starts goes through ``juice.services.process.spawn``, which appends a line
to ``$JUICE_SPAWN_LOG`` when it is set (see ``_note_spawn``); ``juice`` subprocesses of a test
inherit it. This plugin gives each pytest process its own log, then writes FILE: one line per
test, ``<node id>\\t<servers>``, where the servers are those the test started itself plus
those of every fixture it uses (a deployment shared by several tests counts for each of
them: they all drive the real servers). Tests that use no server are listed with ``-``.

So the suite's real-server coverage can be compared before and after a change::

    bash scripts/test.sh            # writes .pytest-census.txt
    cut -f1 .pytest-census.txt | ...
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

_KEY = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--server-census", metavar="FILE", default=None,
                     help="write which tests start or use real servers to FILE")


def _state(config: pytest.Config) -> dict[str, Any] | None:
    return config.stash.get(_KEY, None)


def pytest_configure(config: pytest.Config) -> None:
    out = config.getoption("--server-census")
    if not out:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    parts = Path(str(out) + ".d")
    parts.mkdir(parents=True, exist_ok=True)
    log = parts / f"spawn-{worker}.jsonl"
    log.write_text("")
    os.environ["JUICE_SPAWN_LOG"] = str(log)
    config.stash[_KEY] = {"log": log, "out": Path(out), "parts": parts, "worker": worker,
                          "fixtures": {}, "claimed": set(), "tests": {}}


def _read(log: Path, start: int) -> list[tuple[int, str]]:
    """(offset, server) of the lines appended since ``start``."""
    rows = []
    with open(log, "rb") as f:
        f.seek(start)
        pos = start
        for line in f:
            try:
                rows.append((pos, str(json.loads(line)["server"])))
            except (ValueError, KeyError):
                pass
            pos += len(line)
    return rows


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any],
                         request: pytest.FixtureRequest) -> Generator[None, None, None]:
    st = _state(request.config)
    if st is None:
        yield
        return
    start = st["log"].stat().st_size
    yield
    rows = _read(st["log"], start)
    st["claimed"].update(off for off, _ in rows)
    st["fixtures"].setdefault(fixturedef.argname, set()).update(s for _, s in rows)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    st = _state(item.config)
    if st is None:
        yield
        return
    start = st["log"].stat().st_size
    yield
    own = {s for off, s in _read(st["log"], start) if off not in st["claimed"]}
    for name in getattr(item, "fixturenames", ()):
        own |= st["fixtures"].get(name, set())
    st["tests"][item.nodeid] = sorted(own)


def pytest_sessionfinish(session: pytest.Session) -> None:
    st = _state(session.config)
    if st is None:
        return
    part = st["parts"] / f"tests-{st['worker']}.json"
    part.write_text(json.dumps(st["tests"]))
    if st["worker"] != "main" or hasattr(session.config, "workerinput"):
        return
    merged: dict[str, list[str]] = {}
    for p in sorted(st["parts"].glob("tests-*.json")):
        merged.update(json.loads(p.read_text()))
    lines = [f"{k}\t{','.join(v) or '-'}" for k, v in sorted(merged.items())]
    tmp = st["out"].with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(st["out"])
    for p in st["parts"].iterdir():
        p.unlink()
    st["parts"].rmdir()
