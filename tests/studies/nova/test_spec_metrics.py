"""The nova study without nova: the spec's bounds and errors, the run matrix's order and keys,
and the metrics (notifications in oslo.log lines, the join with the driver's records)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from juice.errors import UserError
from juice.studies.nova import metrics
from juice.studies.nova.points import expand
from juice.studies.nova.spec import parse

ROOT = Path(__file__).resolve().parents[3]


def spec(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"workload": "nova", "name": "n", "scenarios": ["boot_server"],
                            "computes": {"processes": 2, "nodes_per_process": 5}}
    data.update(over)
    return data


def test_the_example_parses_and_its_matrix_groups_deployments() -> None:
    s = parse(yaml.safe_load((ROOT / "examples/nova-boot.yaml").read_text()), "nova-boot.yaml")
    pts = expand(s)
    assert len(pts) == len(s.schedulers) * len(s.runner.concurrency)
    keys = [p.deployment_key for p in pts]
    assert keys == sorted(keys, key=keys.index)  # equal deployment keys are adjacent
    assert len({p.key for p in pts}) == len(pts)


def test_preload_grows_inside_a_deployment_and_keys_are_stable() -> None:
    s = parse(spec(preload=[20, 0], schedulers=[2, 1], runner={"times": 3, "concurrency": [1, 2]}), "n")
    pts = expand(s)
    for dep in {p.deployment_key for p in pts}:
        pre = [p.preload for p in pts if p.deployment_key == dep]
        assert pre == sorted(pre)
    same = spec(preload=[20, 0], schedulers=[2, 1], runner={"times": 3, "concurrency": [1, 2]})
    again = expand(parse(same, "n"))
    assert [p.key for p in pts] == [p.key for p in again]
    assert pts[0].params()["nodes"] == 10


@pytest.mark.parametrize("over,match", [
    ({"scenarios": ["boot_servers"]}, r"scenarios\.0: unknown nova scenario"),
    ({"scenarios": [{"name": "boot_and_delete_server", "args": {"sleep": 1}}]}, r"args: unknown argument"),
    ({"driver_site": 3}, r"driver_site: 3 is not a site"),
    ({"preload": [100]}, r"preload: 100 \+ runner.times 10 servers do not fit on 10 nodes x 8 per node"),
    ({"flavor": {"vcpus": 16}}, r"flavor: larger than a simulated node"),
    ({"schedulers": [1, 1]}, r"schedulers"),
    ({"computes": {"processes": 201}}, r"computes.processes"),
    ({"sites": 1}, r"sites"),
    ({"colour": "red"}, r"colour: unknown key"),
    ({"profiler": "jaeger"}, r"profiler"),
])
def test_bad_specs_name_the_field(over: dict[str, Any], match: str) -> None:
    with pytest.raises(UserError, match=match):
        parse(spec(**over), "n.yaml")


def test_capacity_is_the_smallest_resource_per_node() -> None:
    s = parse(spec(computes={"processes": 2, "nodes_per_process": 5, "vcpus": 4, "memory_mb": 1024},
                   flavor={"vcpus": 1, "ram_mb": 512}), "n")
    assert s.per_node() == 2 and s.capacity() == 20


def _line(event: str, uuid: str, ts: str, **data: Any) -> str:
    msg = {"message_id": "m", "publisher_id": "nova-compute:juice-c1", "event_type": event,
           "priority": "INFO", "timestamp": ts,
           "payload": {"nova_object.name": "InstanceCreatePayload",
                       "nova_object.data": {"uuid": uuid, "host": "juice-c1", **data}}}
    return (f"{ts[:23]} 21775 INFO oslo.messaging.notification.{event} [None req-1 u p - - default default] "
            + json.dumps(msg) + "\n")


def test_notifications_are_read_from_oslo_log_lines(tmp_path: Path) -> None:
    a, b = "ee0e3618-68b3-4e67-b428-9b190b90da2b", "11111111-2222-3333-4444-555555555555"
    fault = {"nova_object.data": {"exception": "BuildAbortException", "exception_message": "node 7 gone"}}
    log = tmp_path / "juice-c1.log"
    log.write_text("2026-11-22 21:07:00.000 1 DEBUG nova.compute.manager something {not json\n"
                   + _line("instance.create.start", a, "2026-11-22 21:07:01.014000")
                   + _line("instance.create.end", a, "2026-11-22 21:07:01.238755")
                   + _line("instance.create.error", b, "2026-11-22 21:07:02.5", fault=fault)
                   + _line("instance.create.end", "99999999-2222-3333-4444-555555555555",
                           "2020-01-01 00:00:00.0"))
    notes = metrics.notifications([log], since=1_700_000_000.0)
    assert set(notes) == {a, b}  # the 2020 one is before `since`
    assert round(notes[a]["end"] - notes[a]["start"], 6) == 0.224755
    assert notes[b]["fault"] == "BuildAbortException: node 7 gone" and notes[a]["host"] == "juice-c1"


def test_boots_join_the_driver_records_iterations_and_nova_times() -> None:
    t = 1_800_000_000.0
    lines = [{"driver": 1, "index": 0, "id": "A", "t_post": t, "t_accepted": t + 0.2, "status": "ACTIVE",
              "polls": 2},
             {"driver": 1, "index": 1, "id": "B", "t_post": t, "t_accepted": t + 0.3, "status": "ERROR",
              "fault": "No valid host was found. There are not enough hosts available."}]
    its = [{"site": 1, "index": 0, "error": [], "atomic_actions": [
               {"name": "nova.boot_server", "started_at": t, "finished_at": t + 3.5, "failed": False}]},
           {"site": 1, "index": 1, "error": ["NovaError", "went to ERROR"], "atomic_actions": [
               {"name": "nova.boot_server", "started_at": t, "finished_at": t + 1.5, "failed": True}]}]
    rows = metrics.boots(its, lines, {"A": {"end": t + 1.25, "start": t + 0.5}})
    a, b = rows
    assert a["ok"] and a["rally_boot_s"] == 3.5 and a["nova_boot_s"] == 1.25 and round(a["api_s"], 3) == 0.2
    assert not b["ok"] and b["rally_boot_s"] is None and b["error_class"].startswith("No valid host")
    s = metrics.summarize(rows, window_s=10.0)
    assert (s["boots"], s["active"], s["success_pct"]) == (2, 1, 50.0)
    assert s["rally_median"] == 3.5 and s["nova_median"] == 1.25 and s["active_per_s"] == 0.1
    assert s["faults"] == {"No valid host was found. There are not enough hosts available.": 1}


def test_error_classes_drop_ids_and_numbers() -> None:
    assert metrics.error_class("Build of instance 0b0c7e3e-1111-2222-3333-444455556666 aborted after 3 "
                               "attempts") == "Build of instance <uuid> aborted after <n> attempts"


def test_an_open_loop_makes_one_point_per_rate_bounded_by_max_in_flight() -> None:
    s = parse(spec(runner={"times": 30, "rate": [0.5, 2], "max_in_flight": 40, "arrival": "constant"}), "n")
    pts = expand(s)
    assert [(p.rate, p.concurrency, p.arrival) for p in pts] == [(0.5, 40, "constant"), (2.0, 40, "constant")]
    assert all(p.params()["rate"] == p.rate for p in pts) and "-r0.5-" in pts[0].dirname
    closed = expand(parse(spec(), "n"))[0]
    assert "rate" not in closed.params()  # closed-loop keys do not change


def test_galera_writers_apply_to_galera_only_and_spread_the_schedulers() -> None:
    from juice.studies.nova.study import _stack

    s = parse(spec(sites=3, db=["mariadb", "galera"], galera_writers=["single", "multi"],
                   schedulers=[3]), "n")
    pts = expand(s)
    want = [("mariadb", "single"), ("galera", "single"), ("galera", "multi")]
    assert [(p.db, p.writers) for p in pts] == want
    assert "galera_writers" not in pts[1].params() and pts[2].params()["galera_writers"] == "multi"
    multi, single = _stack(s, pts[2]).nova, _stack(s, pts[1]).nova
    assert (multi.db_writers, multi.scheduler_placement) == ("local", (1, 2, 3))
    assert (single.db_writers, single.scheduler_placement) == ("single", (1, 1, 1))
    assert len({p.deployment_key for p in pts}) == 3


def test_notifications_are_read_from_oslo_log_json_records_too(tmp_path: Path) -> None:
    uuid = "ee0e3618-68b3-4e67-b428-9b190b90da2b"
    text = _line("instance.create.end", uuid, "2026-11-22 21:07:01.238755")
    notification = text[text.index("{"):].strip()
    record = {"message": notification, "asctime": "2026-11-22 21:07:01,239", "levelname": "INFO",
              "name": "oslo.messaging.notification.instance.create.end", "context": {"request_id": "req-1"}}
    log = tmp_path / "juice-c1.log"
    log.write_text(json.dumps(record) + "\n")
    notes = metrics.notifications([log])
    assert notes[uuid]["host"] == "juice-c1" and notes[uuid]["end"] > 1_700_000_000


def test_faults_are_checked_against_the_sites_and_refused_with_a_target() -> None:
    with pytest.raises(UserError, match=r"faults"):
        parse(spec(faults=[{"at_s": 1, "partition": 5, "duration_s": 2}]), "n")
    s = parse(spec(faults=[{"at_s": 1, "partition": 2, "duration_s": 2}]), "n")
    assert expand(s)[0].fixed["faults"][0]["partition"] == 2
    target = {"workload": "nova", "name": "n", "scenarios": ["boot_server"], "target": {"cloud": "c"},
              "image": "0" * 32, "faults": [{"at_s": 1, "partition": 1, "duration_s": 2}]}
    with pytest.raises(UserError, match=r"faults: not with a target"):
        parse(target, "n")
    target.pop("faults")
    with pytest.raises(UserError, match=r"profiler: not with a target"):
        parse({**target, "profiler": "redis"}, "n")
    assert parse(spec(), "n").profiler == "off" and parse(spec(profiler="redis"), "n").profiler == "redis"


# ---- simulated waits and failures (issue 28) ------------------------------------------------

SIM = {"computes": {"processes": 2, "nodes_per_process": 5,
                    "spawn_time": {"dist": "lognormal", "median_s": 20, "sigma": 1.0, "cap_s": 300}},
       "image_service": "fake-glance",  # image_fetch simulates fake-glance's answers
       "fakes": {"image_fetch_s": {"dist": "table", "table": "seed004", "seed": 9}},
       "failures": {"spawn": 0.1, "image_fetch": 0.05}}


def test_simulated_waits_reach_the_driver_the_fakes_and_the_manifest_record() -> None:
    from juice.studies.nova.points import sim_record
    from juice.studies.nova.study import _stack

    s = parse(spec(**SIM), "n")
    st = _stack(s, expand(s)[0])
    assert st.computes.shape.spawn_time == SIM["computes"]["spawn_time"] and st.computes.spawn_failure == 0.1
    assert st.fakes_simulation == {"glance": {"wait": SIM["fakes"]["image_fetch_s"], "failure": 0.05,
                                              "seed": 9}}
    rec = sim_record(s)["stages"]
    assert set(rec) == {"spawn", "image_fetch"}
    assert rec["spawn"]["wait_s"]["seed"] == s.seed and rec["image_fetch"]["wait_s"]["seed"] == 9
    # the simulation is part of what is measured: another one is another run key
    plain = parse(spec(), "n")
    assert sim_record(plain) == {}
    assert expand(s)[0].key != expand(plain)[0].key


def test_runs_without_simulation_keep_their_keys() -> None:
    # what an earlier version stored for this spec: no simulation entry, no spawn_time in computes
    p = expand(parse(spec(), "n"))[0]
    assert "simulation" not in p.fixed and "spawn_time" not in p.fixed["computes"]


@pytest.mark.parametrize("over,match", [
    ({"computes": {"spawn_time": {"dist": "gamma"}}}, r"computes\.spawn_time\.dist: expected one of"),
    ({"computes": {"spawn_time": {"dist": "constant", "value_s": 1, "cap_s": 99999}}},
     r"computes\.spawn_time\.cap_s: expected seconds in"),
    ({"fakes": {"image_fetch_s": {"dist": "uniform", "low_s": 1}}},
     r"fakes\.image_fetch_s\.high_s: required"),
    ({"fakes": {"dns_s": {"dist": "constant", "value_s": 1}}}, r"fakes\.dns_s: unknown key"),
    ({"failures": {"spawn": 1.5}}, r"failures\.spawn: must be <= 1"),
    ({"failures": {"image_fetch": -0.1}}, r"failures\.image_fetch: must be >= 0"),
    # nova creates no port with networks: none (fake-neutron): a port creation wait would wait
    # nowhere; with the real neutron (the default) the ports are neutron's, not the stand-in's
    ({"network_service": "fake-neutron", "fakes": {"port_create_s": {"dist": "constant", "value_s": 1}}},
     r"fakes\.port_create_s: with fake-neutron the lab's boots use networks: none"),
    ({"failures": {"port_create": 0.5}}, r"failures\.port_create: simulates fake-neutron's answers"),
    ({"target": {"cloud": "c"}, "image": "0" * 32, "failures": {"spawn": 0.1}},
     r"failures: not with a target"),
])
def test_bad_simulations_name_the_field(over: dict[str, Any], match: str) -> None:
    data = spec(**over)
    if "target" in over:  # an existing cloud: no lab field at all
        del data["computes"]
    if "computes" in over:
        data["computes"] = {"processes": 2, "nodes_per_process": 5, **over["computes"]}
    with pytest.raises(UserError, match=match):
        parse(data, "n.yaml")


def test_the_report_states_simulated_waits_and_older_runs_have_none() -> None:
    import pandas as pd

    from juice.studies.nova.points import sim_record
    from juice.studies.nova.report import simulation_html

    rec = json.dumps(sim_record(parse(spec(**SIM), "n")), sort_keys=True)
    old = pd.DataFrame({"simulation": [json.dumps({})]})  # a run written before the field
    assert "No simulated waits" in simulation_html(old)
    assert "No simulated waits" in simulation_html(pd.DataFrame({"run": ["r"]}))
    html = simulation_html(pd.DataFrame({"simulation": [rec, rec, "{}"]}))
    assert "2 run(s): every time below is SIMULATED" in html and "1 run(s)" in html
    assert "spawn — SIMULATED: lognormal (median 20 s, sigma 1), cap 300 s, failure probability 0.1" in html
    assert "image_fetch — SIMULATED: table seed004, cap 600 s, failure probability 0.05" in html


def test_seed_verdicts_that_a_simulation_decides_are_no_verdict() -> None:
    import pandas as pd

    from juice.report.seeds import SAME, UNDECIDED, Match
    from juice.studies.nova.points import sim_record
    from juice.studies.nova.seeds import simulated

    found = [Match("s004.success", "99 %", SAME, "", "c"), Match("s004.dominant_phase", "spawn: 80 %", SAME),
             Match("s004.schedulers", "1 s → 2 s", SAME)]
    plain = pd.DataFrame({"simulation": ["{}"]})
    assert simulated(plain, found) == found  # no simulation: untouched
    sim = pd.DataFrame({"simulation": [json.dumps(sim_record(parse(spec(**SIM), "n")))]})
    out = {m.id: m for m in simulated(sim, found)}
    assert out["s004.success"].verdict == UNDECIDED and "failures.image_fetch, failures.spawn" in \
        out["s004.success"].reason
    assert out["s004.dominant_phase"].verdict == UNDECIDED and "computes.spawn_time" in \
        out["s004.dominant_phase"].reason
    assert out["s004.schedulers"].verdict == SAME and "SIMULATED" in out["s004.schedulers"].conditions


def test_fork_isolation_is_validated_recorded_and_keyed() -> None:
    shared = expand(parse(spec(), "n"))[0]
    # earlier runs (no isolation field) keep their keys: shared is left out of the key
    assert "isolation" not in shared.fixed["computes"] and "compute_isolation" not in shared.params()
    explicit = expand(parse(spec(computes={"processes": 2, "nodes_per_process": 5, "isolation": "shared"}),
                            "n"))[0]
    assert explicit.key == shared.key
    fork = expand(parse(spec(computes={"processes": 2, "nodes_per_process": 5, "isolation": "fork"}), "n"))[0]
    assert fork.params()["compute_isolation"] == "fork" and fork.fixed["computes"]["isolation"] == "fork"
    assert fork.key != shared.key
    with pytest.raises(UserError, match=r"computes\.isolation: .*'shared'.*'fork'"):
        parse(spec(computes={"processes": 2, "nodes_per_process": 5, "isolation": "threads"}), "n.yaml")
    # many forked nodes parse: each host's memory bounds them when the lab is up (sitemap.check)
    big = parse(spec(computes={"processes": 2, "nodes_per_process": 1500, "isolation": "fork"}), "n.yaml")
    assert big.computes.processes * big.computes.nodes_per_process == 3000


def test_failures_by_message_name_their_cause() -> None:
    """The report's table of failures by message template says what each message means (a
    load balancer's 504, the scheduler's "No valid host") and leaves unknown ones blank."""
    from juice.studies.nova.report import fault_table

    df = pd.DataFrame({"faults": [
        json.dumps({"POST /servers -> <n>: <html><body><h1><n> Gateway Time-out</h1>": 3,
                    "No valid host was found. There are not enough hosts available.": 1}),
        json.dumps({"POST /servers -> <n>: <html><body><h1><n> Gateway Time-out</h1>": 2,
                    "something nobody has seen": 1})]})
    t = fault_table(df)
    rows = {r["failure (message template)"][:14]: r for r in t.to_dict("records")}
    assert list(t["count"]) == [5, 1, 1]
    assert rows["POST /servers "]["cause"] == "upstream refused or timed out (load balancer or API)"
    assert "timeout server" in rows["POST /servers "]["what governs it"]
    assert rows["No valid host "]["cause"] == "no capacity for the request (scheduler)"
    assert rows["something nobo"]["cause"] == "" and rows["something nobo"]["what governs it"] == ""
    assert "haproxy's log" not in t.columns  # no run kept haproxy's log


def test_a_load_balancers_failures_say_what_its_own_log_saw(tmp_path: Path) -> None:
    from juice.studies.nova.report import fault_table

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "haproxy-s1.log").write_text(
        '10.210.1.1:41240 [27/Nov/2026:06:01:03.001] nova-api nova-api/nova-api-s1 0/0/0/-1/50001 504 194 '
        '- - sH-- 334/120/118/118/0 0/0 "POST /v2.1/servers HTTP/1.1"\n')
    df = pd.DataFrame({"dir": [str(tmp_path)], "faults": [json.dumps({
        "POST /servers -> <n>: <html><body><h1><n> Gateway Time-out</h1>": 1,
        "No valid host was found.": 2})]})
    t = fault_table(df).set_index("count")
    assert t.loc[1, "haproxy's log"].startswith("haproxy log: 1 x 504 sH (the server-side timeout struck")
    assert t.loc[2, "haproxy's log"] == ""  # not a load balancer's answer


def test_failed_runs_say_why_and_what_their_boots_failed_of(tmp_path: Path) -> None:
    """A run kept as .failed (its driver's cleanup got a 504 from a full haproxy) is left out of
    the tables, but the report says why it failed and what its boots failed of, with causes."""
    from juice.studies.nova.report import failed_runs_table, sections

    run = tmp_path / "study" / "boot_server-galera-s3-c40-r0-x.failed"
    run.mkdir(parents=True)
    (run / "error.txt").write_text("JuiceError: the driver failed: cleanup failed: NovaError: GET /servers "
                                   "-> 504: <html><body><h1>504 Gateway Time-out</h1>\n</body></html>\n")
    (run / "summary.json").write_text(json.dumps({"boots": 60, "faults": {
        "[Errno <n>] Connection reset by peer": 28, "No valid host was found. ": 3}}))
    (tmp_path / "study" / "older.failed").mkdir()  # an earlier version's failed run: no files
    t = failed_runs_table([tmp_path / "study"])
    assert t["run"].tolist() == [run.name] * 3 + ["older.failed"]
    assert t["failure"][0].startswith("the run: JuiceError: the driver failed: cleanup failed")
    assert t["cause"].tolist() == ["upstream refused or timed out (load balancer or API)",
                                   "connection refused or reset (load balancer or API not accepting)",
                                   "no capacity for the request (scheduler)", ""]
    assert t["count"].tolist()[1:3] == [28, 3]
    html = "".join(sections([tmp_path / "study"]))  # no complete run: the failed ones still shown
    assert "Failed runs: why" in html and "Connection reset by peer" in html
