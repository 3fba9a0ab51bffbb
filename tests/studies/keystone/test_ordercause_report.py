"""The run-order block's server counters (``juice.studies.keystone.ordercause``), from stored
manifests alone: counters early vs late per deployment, and the counter that moves with the
run's time relative to its point, found by correlation with an interval; runs stored before
``server_counters`` existed are left out."""

from __future__ import annotations

from typing import Any

from juice.studies.keystone import ordercause, runorder
from tests.studies.keystone.test_runorder_report import iterations, manifest

# interleaved, 4 points x 2 repetitions: (delay, scenario-less point id) by position
PASSES = [(0.0, 0), (50.0, 0), (100.0, 0), (150.0, 0), (150.0, 1), (100.0, 1), (50.0, 1), (0.0, 1)]
HIT = [0.55, 0.95, 0.70, 0.90, 0.60, 0.85, 0.65, 0.97]  # not monotonic in position


def runs(time_of: Any) -> tuple[list[dict[str, Any]], dict[str, float]]:
    ms, means = [], {}
    for pos, ((delay, rep), hit) in enumerate(zip(PASSES, HIT, strict=True)):
        run = f"r{pos}"
        counters = {"derived": {"cache_hit_rate": hit, "rows.user": 1.0 + 4 * pos,
                                "innodb.buffer_pool_reads": 0.0}}
        ms.append(manifest(run, delay, rep, pos, pos, "interleaved", server_counters=counters))
        means[run] = time_of(0.1 + delay / 1000, hit, pos)
    return ms, means


def test_the_counter_that_drives_the_time_is_found_with_its_interval() -> None:
    # slower when the cache misses more: time = point's base x (1 + 2 x (0.9 - hit rate))
    ms, means = runs(lambda base, hit, pos: base * (1 + 2 * (0.9 - hit)))
    it = iterations(means)
    df = ordercause.frame(ms, it)
    assert len(df) == 8 and set(df["deployment"]) == {"mariadb, 1 sites"}
    mv = ordercause.moves(df)
    hit = mv[mv["counter"] == ordercause.SHOWN["cache_hit_rate"]].iloc[0]
    assert hit["verdict"] == "real" and hit["r"] < -0.9 and hit["hi"] < 0
    assert ordercause.SHOWN["innodb.buffer_pool_reads"] not in set(mv["counter"])  # no spread: no r
    (f,) = ordercause.findings(mv)
    assert f.verdict == "real" and "moves with cache hit rate (window): r = -" in f.text
    parts, found = ordercause.section(ms, it)
    html = "".join(parts)
    assert "What the servers did, early vs late" in html and "rows: user (start)" in html
    assert found == [f]


def test_early_and_late_means_split_by_position() -> None:
    ms, means = runs(lambda base, hit, pos: base)
    table = ordercause.early_late(ordercause.frame(ms, iterations(means)))
    users = table[table["counter"] == "rows: user (start)"].iloc[0]
    assert users["early"] == "7" and users["late"] == "23"  # positions 0-3: 1..13, 4-7: 17..29


def test_a_time_that_follows_nothing_gives_no_real_counter() -> None:
    ms, means = runs(lambda base, hit, pos: base)  # the iterations' noise only
    found = ordercause.findings(ordercause.moves(ordercause.frame(ms, iterations(means))))
    assert len(found) == 1 and found[0].verdict != "real" and "no server counter" in found[0].text


def test_runs_without_server_counters_are_left_out() -> None:
    ms, means = runs(lambda base, hit, pos: base)
    old = [{k: v for k, v in m.items() if k != "server_counters"} for m in ms]
    assert ordercause.section(old, iterations(means)) == ([], [])
    assert not runorder.effect(old, iterations(means))[0].empty  # the order block itself stays
