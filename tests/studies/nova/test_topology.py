"""The nova study's production shape (docs/topology.md): haproxy's maxconn axis, control sites,
N Keystones, a RabbitMQ cluster — spec validation, the run matrix and the NovaStack it maps to
(pure: nothing is started)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from juice.errors import UserError
from juice.services.openstack.nova_deploy import NovaDeployment, NovaStack
from juice.studies.nova.points import expand
from juice.studies.nova.spec import parse
from juice.studies.nova.study import _stack, roles
from tests.services.conftest import FakeSites

ROOT = Path(__file__).resolve().parents[3]


def _spec(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"workload": "nova", "name": "topo", "sites": 3, "scenarios": ["boot_server"],
                            "computes": {"processes": 1, "nodes_per_process": 6}}
    data.update(over)
    return data


def test_maxconn_is_an_axis_and_a_deployment_key() -> None:
    spec = parse(_spec(haproxy={"maxconn": [4000, 16000]}), "t.yaml")
    pts = expand(spec)
    assert [p.haproxy_maxconn for p in pts] == [4000, 16000]
    assert pts[0].params()["haproxy_maxconn"] == 4000
    assert pts[0].deployment_key != pts[1].deployment_key and pts[0].key != pts[1].key
    st = _stack(spec, pts[1])
    assert (st.haproxy, st.haproxy_maxconn, st.haproxy_site) == (True, 16000, 1)


def test_haproxy_without_maxconn_is_haproxys_default() -> None:
    spec = parse(_spec(haproxy={}), "t.yaml")
    (p,) = expand(spec)
    assert p.haproxy_maxconn is None and "haproxy_maxconn" not in p.params()
    assert _stack(spec, p).haproxy and _stack(spec, p).haproxy_maxconn is None


def test_earlier_specs_keep_their_keys_and_shape() -> None:
    """No haproxy, no topology: the run key, deployment key and stack are the seed shape's."""
    spec = parse(_spec(), "t.yaml")
    (p,) = expand(spec)
    assert len(p.deployment_key) == 6 and "haproxy" not in p.fixed and "topology" not in p.fixed
    st = _stack(spec, p)
    assert (st.haproxy, st.bus_sites, st.keystone().sites, st.placement_site) == (False, (1,), (1,), 1)


def test_production_shape_spreads_roles_and_clusters_rabbitmq() -> None:
    spec = parse(_spec(db=["galera"], galera_writers=["multi"], schedulers=[3],
                       haproxy={"maxconn": 4000},
                       topology={"control_sites": [1, 2, 3], "keystones": 3, "rabbitmq_nodes": 3}),
                 "t.yaml")
    (p,) = expand(spec)
    assert p.fixed["topology"] == {"control_sites": [1, 2, 3], "keystones": 3, "rabbitmq_nodes": 3}
    st = _stack(spec, p)
    assert st.keystone_sites == (1, 2, 3) and st.bus_sites == (1, 2, 3)
    assert (st.nova.api, st.nova.conductor, st.placement_site) == (1, 2, 3)
    assert st.nova.scheduler_placement == (1, 2, 3) and st.nova.db_writers == "local"
    plan = {k: [x.split(" (~")[0] for x in v] for k, v in roles(spec, p).items()}  # labels
    assert "haproxy" in plan[1] and "nova-conductor" in plan[2] and "placement" in plan[3]
    assert all("keystone" in plan[k] and "rabbitmq" in plan[k] for k in (1, 2, 3))


def test_the_deployment_puts_haproxy_in_front_of_every_instance() -> None:
    stack = NovaStack(keystone_sites=(1, 2), bus_sites=(1, 1, 2), haproxy=True, haproxy_maxconn=8)
    dep = NovaDeployment(FakeSites(), stack=stack)  # type: ignore[arg-type]
    assert dep.lb is not None and dep.services()[0][0] == "haproxy"
    assert [b.host for b in dep.lb.frontends["keystone"].servers] == ["10.210.1.2", "10.210.2.2"]
    assert dep.ks.auth_url(2) == "http://10.210.1.2:15000/v3"          # clients: through haproxy
    assert dep.ks.server_url(2) == "http://10.210.2.2:5000/v3"         # health: the server itself
    assert dep.nova.api_url() == "http://10.210.1.2:18774/v2.1"
    assert dep.placement.url() == "http://10.210.1.2:18778"
    # nova's transport_url lists every RabbitMQ node (two share site 1: the next port)
    url = dep.nova.transport_url()
    assert url.count("@") == 3 and "10.210.1.2:5673" in url and "10.210.2.2:5672" in url
    assert dep.needs()["keystone"] == ("database", "haproxy")
    assert [d.option for d in dep.deviations() if d.server == "haproxy"] == ["global maxconn"]


class ThreeSites(FakeSites):
    sites = range(1, 4)


def test_several_placements_each_behind_haproxy_writing_through_their_own_node() -> None:
    spec = parse(_spec(db=["galera"], galera_writers=["multi", "single"], haproxy={},
                       topology={"control_sites": [1, 2, 3], "placements": 3}), "t.yaml")
    multi, single = expand(spec)
    assert multi.fixed["topology"] == {"control_sites": [1, 2, 3], "placements": 3}
    st = _stack(spec, multi)
    assert st.placement_servers() == [3, 1, 2]  # placement's site first, then cycling
    dep = NovaDeployment(ThreeSites(), stack=st)  # type: ignore[arg-type]
    assert dep.lb is not None
    hosts = [b.host for b in dep.lb.frontends["placement"].servers]
    assert hosts == ["10.210.3.2", "10.210.1.2", "10.210.2.2"]
    members = dep.placements.members
    assert [m.site for m in members] == [3, 1, 2] and [m.db_site for m in members] == [3, 1, 2]
    assert members[0].primary is None and all(m.primary is members[0] for m in members[1:])
    assert all(m.url() == "http://10.210.1.2:18778" for m in members)  # the catalog's: haproxy
    assert ("placement", dep.placements) in dep.services()
    assert dep.ks.opts.db_site is None  # every Keystone through its own site's node too
    # one writer: every placement and every Keystone writes through the node nova's roles use
    # (nova's control site: 1), not through their own sites' (issue 28: they used to)
    sdep = NovaDeployment(ThreeSites(), stack=_stack(spec, single))  # type: ignore[arg-type]
    assert sdep.stack.nova.control_site == 1 and sdep.stack.nova.db_writers == "single"
    assert [m.db_site for m in sdep.placements.members] == [1, 1, 1]
    assert sdep.ks.opts.db_site == 1
    assert sdep._writers() == {"mode": "single", "nova": 1, "placement": 1, "keystone": 1}
    assert dep._writers()["mode"] == "local" and dep._writers()["placement"] == [3, 1, 2]


def test_no_haproxy_no_haproxy_step() -> None:
    dep = NovaDeployment(FakeSites(), stack=NovaStack())  # type: ignore[arg-type]
    assert dep.lb is None and "haproxy" not in dep.needs() and "haproxy" not in dep.needs()["keystone"]
    assert dep.nova.transport_url().count("@") == 1


@pytest.mark.parametrize(("over", "msg"), [
    ({"haproxy": {"maxconn": [0]}}, "haproxy.maxconn.0"),
    ({"haproxy": {"maxconn": [4000, 4000]}}, "listed twice"),
    ({"haproxy": {"maxconn": "lots"}}, "haproxy.maxconn"),
    ({"haproxy": {"site": 5}}, "haproxy.site: 5 is not a site"),
    ({"topology": {"rabbitmq_nodes": 2}}, "topology.rabbitmq_nodes"),
    ({"topology": {"keystones": 2}}, "topology.keystones: 2 Keystones need as many control sites"),
    ({"topology": {"control_sites": [1, 4]}}, "topology.control_sites: 4 is not a site"),
    ({"topology": {"control_sites": [1, 1]}}, "listed twice"),
    ({"topology": {"wat": 1}}, "wat"),
    ({"topology": {"placements": 2}}, "topology.placements: 2 placement servers need as many control sites"),
    ({"topology": {"control_sites": [1, 2], "placements": 2}}, "need haproxy in front"),
])
def test_bad_values_are_one_line_errors(over: dict[str, Any], msg: str) -> None:
    with pytest.raises(UserError, match=msg) as e:
        parse(_spec(**over), "t.yaml")
    assert "\n" not in str(e.value).strip()


def test_stack_rejects_duplicate_keystone_sites_and_maxconn_without_haproxy() -> None:
    with pytest.raises(UserError, match="keystone_sites"):
        NovaStack(keystone_sites=(1, 1))
    with pytest.raises(UserError, match="only with haproxy on"):
        NovaStack(haproxy_maxconn=4000)
    with pytest.raises(UserError, match="haproxy.maxconn"):
        NovaStack(haproxy=True, haproxy_maxconn=0)
    with pytest.raises(UserError, match="placement_sites: several placement servers need haproxy"):
        NovaStack(placement_sites=(1, 2))
    with pytest.raises(UserError, match="one placement per site"):
        NovaStack(haproxy=True, placement_sites=(2, 2))


def test_the_example_parses() -> None:
    data = yaml.safe_load((ROOT / "examples" / "nova-production.yaml").read_text())
    spec = parse(data, "nova-production.yaml")
    assert spec.haproxy is not None and spec.haproxy.maxconn and spec.topology.rabbitmq_nodes == 3
    assert len(expand(spec)) >= 2


def test_report_table_from_stored_haproxy_counters(tmp_path: Path) -> None:
    import json

    from juice.studies.nova.report import haproxy_table

    def row(px: str, sv: str, **kv: str) -> dict[str, str]:
        return {"pxname": px, "svname": sv, **kv}

    small, big, old = tmp_path / "small", tmp_path / "big", tmp_path / "old"
    for d, maxconn, smax in ((small, 50, "50"), (big, 16000, "37")):
        d.mkdir()
        sampled = {"samples": 10, "interval_s": 1.0, "max_curr_conns": min(maxconn, 50), "maxconn": maxconn,
                   "at_limit": 4 if maxconn == 50 else 0}
        (d / "haproxy-stats.json").write_text(json.dumps({"maxconn": maxconn, "info": {}, "sampled": sampled,
                                                          "stats": [
            row("keystone", "FRONTEND", smax=smax, slim=str(maxconn), hrsp_5xx="0", ereq="1"),
            row("keystone", "keystone-s1", stot="40"), row("keystone", "keystone-s2", stot="0"),
            row("keystone", "BACKEND", stot="40", econ="2", eresp="")]}))
    old.mkdir()  # a run without haproxy (or from before it): no row
    t = haproxy_table([small, big, old])
    assert list(t["run"]) == ["small", "big"]
    assert list(t["reached"]) == [True, False]
    assert list(t["servers_used"]) == [1, 1] and list(t["servers"]) == [2, 2]
    assert list(t["errors"]) == [3, 3] and list(t["requests"]) == [40, 40]
    assert not t["failed"].any()
    assert list(t["global_max"]) == [50, 50] and list(t["s_at_global_limit"]) == [4, 0]
    # a failed run that kept the counters is found (and flagged) for the table
    failed = tmp_path / "x-run.failed"
    small.rename(failed)
    from juice.studies.nova.report import failed_runs

    assert failed_runs([tmp_path]) == [failed]
    assert list(haproxy_table(failed_runs([tmp_path]))["failed"]) == [True]


def test_haproxy_timeout_server_is_a_server_option_recorded_as_a_deviation() -> None:
    spec = parse(_spec(haproxy={}, configurations={"before": {}, "after": {"haproxy_timeout_server": 180}}),
                 "t.yaml")
    before, after = expand(spec)
    assert _stack(spec, before).haproxy_timeout_server_s is None  # Debian's 50 s
    st = _stack(spec, after)
    assert st.haproxy_timeout_server_s == 180.0 and "haproxy_timeout_server" not in st.nova.__dict__
    assert before.deployment_key != after.deployment_key
    dep = NovaDeployment(FakeSites(), stack=st)  # type: ignore[arg-type]
    assert dep.lb is not None and dep.lb.timeout_server_s == 180.0  # rendered: tests/services/test_haproxy.py
    (d,) = [d for d in dep.deviations() if d.server == "haproxy"]
    assert (d.option, d.value, d.default) == ("defaults timeout server (s)", "180", "50")


@pytest.mark.parametrize("over", [{"server": {"haproxy_timeout_server": 60}},
                                  {"configurations": {"a": {}, "b": {"haproxy_timeout_server": 60}}}])
def test_haproxy_timeout_server_without_haproxy_names_the_fix(over: dict[str, Any]) -> None:
    fix = r"haproxy_timeout_server: only with haproxy on \(add `haproxy: \{\}`\)"
    with pytest.raises(UserError, match=fix) as e:
        parse(_spec(**over), "t.yaml")
    assert "\n" not in str(e.value).strip()
