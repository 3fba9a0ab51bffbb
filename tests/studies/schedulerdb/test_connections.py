"""The scheduler-database study keeps its database's shipped max_connections unless its own
workers may open more (then the sum, with how it was counted)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from juice.studies.schedulerdb.backends import HEADROOM, BackendSession


def session(backend: str, readers: int, workers: int, sites: int = 3) -> BackendSession:
    lab: Any = SimpleNamespace(sites=range(1, sites + 1))
    return BackendSession(lab, backend, print, readers=readers, update_workers=workers)


def test_small_studies_keep_the_shipped_default() -> None:
    assert session("mariadb", readers=9, workers=8).connection_limit() == {}
    assert session("postgres", readers=9, workers=8).connection_limit() == {}


def test_many_readers_and_updaters_raise_it_with_the_count() -> None:
    got = session("galera", readers=64, workers=64, sites=3).connection_limit()
    assert got["max_connections"] == 64 + 2 * 64 + HEADROOM  # updaters in sites 2 and 3
    assert "64 scheduler readers + 2 updater process(es) x 64" in got["max_connections_reason"]
    pg = session("postgres", readers=64, workers=30).connection_limit()
    assert pg["max_connections"] == 64 + 30 + HEADROOM and "shipped 100" in pg["max_connections_reason"]
    assert session("memcached", readers=64, workers=64).connection_limit() == {}  # no such limit
