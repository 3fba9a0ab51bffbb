"""The study spec: defaults, axes, ``only`` filtering, errors naming the field path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from juice.errors import UserError
from juice.studies.schedulerdb import STUDY, spec, study

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "scheduler-db.yaml"


def test_defaults_follow_the_seed() -> None:
    s = spec.parse({"workload": "scheduler-db"}, "x.yaml")
    assert s.node_counts() == list(range(1000, 19001, 1000))
    assert s.schedulers == [1, 3, 9] and s.stats_per_node == 10 and s.threshold_s == 60


def test_points_cross_axes_and_caches_use_kv_track() -> None:
    s = spec.parse({"workload": "scheduler-db", "backends": ["mariadb", "memcached"],
                    "tracks": ["historical-2013.1", "modern"], "nodes": [1000, 2000],
                    "schedulers": [1], "updates": [False]}, "x")
    pts = s.points()
    assert {p["track"] for p in pts if p["backend"] == "memcached"} == {"kv"}
    assert len(pts) == 2 * 2 + 2  # mariadb: 2 tracks x 2 N; memcached: 2 N
    keys = {study.point_key(s, p) for p in pts}
    assert len(keys) == len(pts)  # stable and distinct
    assert keys == {study.point_key(s, p) for p in s.points()}


def test_only_filters_and_overrides_repetitions() -> None:
    s = spec.parse({"workload": "scheduler-db", "nodes": [1000, 50000], "backends": ["mariadb"],
                    "repetitions": 4,
                    "only": [{"schedulers": 9, "updates": True, "nodes_max": 19000, "repetitions": 1}]}, "x")
    pts = s.points()
    assert pts and all(p["schedulers"] == 9 and p["updates"] and p["nodes"] == 1000 for p in pts)
    assert spec.reps_for(s, pts[0]) == 1


def test_clients_axis_on_mysql_backends_default_keeps_old_keys() -> None:
    base = {"workload": "scheduler-db", "backends": ["mariadb", "postgres", "memcached"],
            "tracks": ["historical-2013.1"], "nodes": [1000], "schedulers": [1], "updates": [False]}
    s1 = spec.parse(base, "x")
    assert s1.clients == ["pymysql"]
    assert [p.get("client") for p in s1.points()] == ["pymysql", None, None]
    s2 = spec.parse({**base, "clients": ["pymysql", "mysqlclient", "pymysql"]}, "x")
    pts = s2.points()
    assert [(p["backend"], p.get("client")) for p in pts] == [
        ("mariadb", "pymysql"), ("mariadb", "mysqlclient"), ("postgres", None), ("memcached", None)]
    # the default client is not part of the key or run name: points stored before the axis
    # existed (params without "client") are still recognised as complete
    old = {k: v for k, v in pts[0].items() if k != "client"}
    assert study.point_key(s2, pts[0]) == study.point_key(s2, old)
    assert study.run_name(pts[0]) == study.run_name(old) == "mariadb-historical-2013.1-n1000-s1-static"
    assert study.point_key(s2, pts[1]) != study.point_key(s2, pts[0])
    assert study.run_name(pts[1]).endswith("-mysqlclient")
    only = spec.parse({**base, "clients": ["pymysql", "mysqlclient"],
                       "only": [{"client": "mysqlclient"}]}, "x")
    assert [p.get("client") for p in only.points()] == ["mysqlclient"]


@pytest.mark.parametrize(("data", "where"), [
    ({"workload": "scheduler-db", "clients": ["mysql-connector"]}, "x.yaml: clients.0:"),
    ({"workload": "scheduler-db", "clients": []}, "x.yaml: clients:"),
    ({"workload": "scheduler-db", "backends": ["oracle"]}, "x.yaml: backends.0:"),
    ({"workload": "scheduler-db", "nodes": {"start": 5000, "stop": 1000}}, "x.yaml: nodes"),
    ({"workload": "scheduler-db", "lab": {"sites": 1}, "backends": ["galera"]}, "x.yaml: lab.sites"),
    ({"workload": "scheduler-db", "colour": "red"}, "x.yaml: colour:"),
    ({"workload": "rally"}, "x.yaml: workload:"),
    ({"workload": "scheduler-db", "schedulers": [0]}, "x.yaml: schedulers.0: must be >= 1, got 0"),
])
def test_errors_name_the_file_and_field(data: dict[str, object], where: str) -> None:
    with pytest.raises(UserError) as e:
        spec.parse(data, "x.yaml")
    assert str(e.value).startswith(where)
    assert e.value.exit_code == 2


def test_example_parses_and_plans_with_estimates() -> None:
    s = spec.parse(yaml.safe_load(EXAMPLE.read_text()), str(EXAMPLE))
    points = study.expand(s)
    assert points and all(STUDY.estimate_s(p) > 0 for p in points)
    rows = [p.params for p in points]
    assert max(r["nodes"] for r in rows if r["backend"] == "memcached") == 50000
    assert max(r["nodes"] for r in rows if r["backend"] == "mariadb") == 19000
    assert {r["schedulers"] for r in rows if r["track"] == "historical-2013.1"} == {1, 3, 9}
