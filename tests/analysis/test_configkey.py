"""The configuration key: every recorded field that differs between runs, identity fields and
measurements left out, a field that follows from others adding nothing; runs that the key
pools although their manifests say they may differ are named."""

from __future__ import annotations

from typing import Any

import pandas as pd

from juice.analysis import configkey


def manifest(**over: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "juice": "0.2.0", "run_key": "k1", "workload": "nova",
        "params": {"db": "mariadb", "delay_ms": 0.0, "concurrency": 60, "repetition": 0, "seed": 1,
                   "study": "a", "run_id": "x", "compute_processes": 20},
        "deployment": {"computes": {"processes": 20, "nodes_per_process": 1, "isolation": "shared",
                                    "timings": {"registered_s": 3.2}, "memory": {"mb_per_node": 80.0}},
                       "ports": {"api": 8774}, "placement": {"url": "http://10.0.0.1:8778"}},
        "deviations": [{"server": "nova-conductor", "option": "[database] max_pool_size", "value": "10",
                        "default": "5", "reason": "r", "source": "juice"}],
        "host": {"hostname": "vm1", "cpus": 2}, "spec": {"name": "a", "computes": {"processes": 20}},
    }
    for k, v in over.items():
        m[k] = v
    return m


def test_fields_name_params_bare_and_leave_out_identity_and_measurements() -> None:
    f = configkey.fields(manifest())
    assert f["db"] == "mariadb" and f["compute_processes"] == 20
    assert f["deployment.computes.isolation"] == "shared"
    assert f["deviations.nova-conductor [database] max_pool_size"] == "10"
    assert f["host.cpus"] == 2
    for gone in ("repetition", "seed", "study", "run_id", "host.hostname", "deployment.ports.api",
                 "deployment.computes.timings.registered_s", "deployment.computes.memory.mb_per_node",
                 "deployment.placement.url"):
        assert gone not in f, gone


def test_a_field_joins_the_key_only_when_it_splits_runs_the_key_pools() -> None:
    rows = [{"db": "mariadb", "processes": 20, "npp": 1, "iso": "shared", "nodes": 20},
            {"db": "mariadb", "processes": 1, "npp": 20, "iso": "fork", "nodes": 20},
            {"db": "mariadb", "processes": 1, "npp": 20, "iso": "shared", "nodes": 20}]
    # npp follows from processes at 20 nodes; nodes never varies
    assert configkey.key_fields(rows, ["db"]) == ["processes", "iso"]
    assert configkey.key_fields(rows, ["db"], ["iso", "npp", "processes"]) == ["iso", "npp"]
    # 2 and 2.0, NaN and None are the same value
    assert configkey.key_fields([{"a": 2, "b": None}, {"a": 2.0, "b": float("nan")}]) == []


def test_runs_pooled_though_their_specs_differ_are_named() -> None:
    a = manifest(spec={"name": "a", "delay_ms": [0, 50], "computes": {"spawn_time": 1}})
    b = manifest(spec={"name": "b", "delay_ms": [0], "computes": {"spawn_time": 5}}, run_key="k2")
    rows = [configkey.fields(m) for m in (a, b)]
    assert configkey.key_fields(rows, ["db", "concurrency"]) == []
    notes = configkey.unrecorded([a, b], rows, ["db", "concurrency"], ["run-a", "run-b"])
    assert len(notes) == 1
    # the name and an axis both specs list (delay_ms, a parameter) are not a difference
    assert "computes.spawn_time (1 / 5)" in notes[0] and "run-a, run-b" in notes[0]
    assert "delay_ms" not in notes[0] and "name" not in notes[0]


def test_runs_with_the_same_records_but_other_run_keys_or_no_params_are_named() -> None:
    a, b = manifest(), manifest(run_key="k2")
    rows = [configkey.fields(m) for m in (a, b)]
    notes = configkey.unrecorded([a, b], rows, ["db", "concurrency"], ["run-a", "run-b"])
    assert len(notes) == 1 and "run keys differ" in notes[0]
    # other repetitions of one point have other keys: not a difference
    c = manifest(run_key="k3", params={**manifest()["params"], "repetition": 1})
    rows = [configkey.fields(m) for m in (a, c)]
    assert configkey.unrecorded([a, c], rows, ["db", "concurrency"], ["run-a", "run-c"]) == []
    # runs without params, and runs of other Juice versions in one configuration
    d = manifest(juice="0.1.0")
    d.pop("params")
    e = manifest(juice="0.1.0", run_key="k1")
    notes = configkey.unrecorded([a, d, e], [configkey.fields(m) for m in (a, d, e)], ["deployment.db"],
                                 ["run-a", "run-d", "run-e"])
    assert any("record no parameters (run-d)" in n for n in notes)
    assert any("different Juice versions (0.1.0, 0.2.0)" in n for n in notes)


def test_split_groups_what_findings_must_not_pool_and_keeps_one_group_whole() -> None:
    df = pd.DataFrame({"run": ["a", "b", "c", "d"], "concurrency": [5, 60, 5, 60],
                       "clients": [1, 30, 1, 30], "layout": ["20x1", "20x1", "1x20", "1x20"]})
    groups = configkey.split(df, ["clients", "layout"], ["concurrency"])
    # clients follow the concurrency: no split by them; the layout splits
    assert [lab for lab, _ in groups] == ["layout=1x20", "layout=20x1"]
    assert [list(g["run"]) for _, g in groups] == [["c", "d"], ["a", "b"]]
    whole = configkey.split(df[df["layout"] == "20x1"], ["clients", "layout"], ["concurrency"])
    assert len(whole) == 1 and whole[0][0] == "" and len(whole[0][1]) == 2
    seen = configkey.relabel(groups, lambda g: [len(g)], lambda x, lab: f"{lab}: {x}")
    assert seen == ["layout=1x20: 2", "layout=20x1: 2"]


def test_notes_html_names_the_added_fields_and_the_pooled_runs() -> None:
    html = configkey.notes_html(["deployment.computes.isolation"], ["Runs a, b share <all>."])
    assert "<code>deployment.computes.isolation</code>" in html
    assert "Pooled though they may differ" in html and "&lt;all&gt;" in html
    assert configkey.notes_html([], []) == ""
