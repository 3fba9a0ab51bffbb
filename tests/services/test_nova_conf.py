"""nova's options and config rendering, node UUIDs, the fake-glance/fake-neutron answers and
placement's config: pure, no root needed."""

from __future__ import annotations

import configparser
import uuid

import pytest

from juice.errors import UserError
from juice.services.openstack import fake_openstack as fakes
from juice.services.openstack.nova_conf import (
    DRIVER,
    ComputeOptions,
    Computes,
    ConfContext,
    NovaOptions,
    backend_env,
    node_uuid,
    render_nodes,
    render_nova_conf,
    service_id,
    spread,
)
from juice.services.openstack.placement import render_placement_conf
from juice.util.validation import validate

CTX = ConfContext(transport_url="rabbit://juice:juice@10.210.1.2:5672/",
                  api_db_url="mysql+pymysql://juice:juice@10.210.1.2:3306/nova_api?charset=utf8mb4",
                  cell_db_url="mysql+pymysql://juice:juice@10.210.1.2:3306/nova_cell1?charset=utf8mb4",
                  auth_url="http://10.210.1.2:5000/v3", region="Region1", password="pw",
                  state_root="/w/nova", api_paste="/w/nova/juice-api/api-paste.ini")


def parse(text: str) -> configparser.RawConfigParser:
    cp = configparser.RawConfigParser(default_section="-")  # nova's [DEFAULT] is a plain section
    cp.read_string(text)
    return cp


def test_node_uuids_are_deterministic_and_distinct() -> None:
    a = render_nodes("juice-c1", 50, ComputeOptions())
    b = render_nodes("juice-c1", 50, ComputeOptions())
    assert a == b
    uuids = [n["uuid"] for n in a["nodes"]]
    assert len(set(uuids)) == 50 and all(uuid.UUID(u).version == 5 for u in uuids)
    assert a["nodes"][3]["name"] == "juice-c1-n0003"
    assert node_uuid("juice-c1", "juice-c1-n0003") == uuids[3]
    other = {n["uuid"] for n in render_nodes("juice-c2", 50, ComputeOptions())["nodes"]}
    assert not other & set(uuids)  # another host's nodes never collide
    # A fixed value: node UUIDs must stay the same across Juice versions and runs.
    assert node_uuid("juice-c1", "juice-c1-n0000") == str(
        uuid.uuid5(uuid.uuid5(uuid.NAMESPACE_DNS, "juice.compute-nodes"), "juice-c1/juice-c1-n0000"))
    assert service_id("juice-c1") != service_id("juice-c2")


def test_nodes_carry_their_exact_size() -> None:
    nodes = render_nodes("h", 2, ComputeOptions(Computes(vcpus=3, memory_mb=1536, disk_gb=7)))["nodes"]
    assert {(n["vcpus"], n["memory_mb"], n["disk_gb"]) for n in nodes} == {(3, 1536, 7)}


def test_compute_conf_makes_capacity_exact() -> None:
    cp = parse(render_nova_conf("compute", CTX, NovaOptions(), host="juice-c1", my_ip="10.210.2.2",
                                comp=ComputeOptions(Computes(max_concurrent_builds=4))))
    d = cp["DEFAULT"]
    assert d["compute_driver"] == DRIVER and d["host"] == "juice-c1" and d["my_ip"] == "10.210.2.2"
    assert d["state_path"] == "/w/nova/juice-c1"
    for k in ("reserved_host_memory_mb", "reserved_host_disk_mb", "reserved_host_cpus"):
        assert d[k] == "0"
    for k in ("cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio"):
        assert d[k] == "1.0"
    assert d["max_concurrent_builds"] == "4" and d["debug"] == "false"  # compute: INFO by default
    assert d["max_concurrent_snapshots"] == "4"  # threading: one pool of max(builds, snapshots)
    assert not cp.has_section("api_database") and not cp.has_section("database")  # no DB access
    assert cp["placement"]["username"] == "nova" and cp["placement"]["region_name"] == "Region1"


def test_control_plane_roles() -> None:
    opts = NovaOptions(host_subset_size=3, scheduler_workers=2, max_attempts=5, max_pool_size=7,
                       max_overflow=11, concurrency_backend="eventlet", notifications_log=True)
    sched = parse(render_nova_conf("scheduler", CTX, opts, host="juice-sched-1"))
    assert sched["filter_scheduler"]["host_subset_size"] == "3"
    assert sched["scheduler"]["workers"] == "2" and sched["scheduler"]["max_attempts"] == "5"
    assert sched["scheduler"]["discover_hosts_in_cells_interval"] == "-1"
    assert sched["api_database"]["max_pool_size"] == "7" and sched["api_database"]["max_overflow"] == "11"
    assert sched["DEFAULT"]["concurrency_backend"] == "eventlet"
    assert sched["DEFAULT"]["debug"] == "true"  # scheduler/conductor: DEBUG (request ids)
    assert sched["oslo_messaging_notifications"]["driver"] == "log"
    assert all(sched["quota"][q] == "-1" for q in ("instances", "cores", "ram", "server_group_members"))
    cond = parse(render_nova_conf("conductor", CTX, opts, host="juice-conductor"))
    assert cond["database"]["connection"].endswith("/nova_cell1?charset=utf8mb4")
    assert cond["DEFAULT"]["debug"] == "true" and cond["DEFAULT"]["transport_url"] == CTX.transport_url
    api = parse(render_nova_conf("api", CTX, NovaOptions(), host="juice-api"))
    assert api["DEFAULT"]["debug"] == "false" and api["wsgi"]["api_paste_config"] == CTX.api_paste
    assert api["keystone_authtoken"]["username"] == "nova"
    assert api["oslo_messaging_notifications"]["driver"] == "noop"
    quiet = parse(render_nova_conf("scheduler", CTX, NovaOptions(log_levels={"scheduler": "INFO"}),
                                   host="s"))
    assert quiet["DEFAULT"]["debug"] == "false"


def test_backend_env_follows_the_option() -> None:
    assert backend_env(NovaOptions()) == {"OS_NOVA_DISABLE_EVENTLET_PATCHING": "1"}
    eventlet = NovaOptions(concurrency_backend="eventlet")
    assert backend_env(eventlet) == {"OS_NOVA_DISABLE_EVENTLET_PATCHING": "0"}


def test_placement_of_roles() -> None:
    o = NovaOptions(control_site=2, schedulers=3)
    assert (o.api, o.conductor, o.scheduler_placement) == (2, 2, (2, 2, 2))
    o = NovaOptions(api_site=1, scheduler_sites=(1, 3))
    assert (o.api, o.conductor, o.scheduler_placement) == (1, 1, (1, 3)) and o.sites_used() == {1, 3}
    comp = ComputeOptions(Computes(processes=4, sites=[2, 3], nodes_per_process=10))
    assert comp.sites == spread(4, range(2, 4)) == (2, 3, 2, 3) and comp.nodes == 40
    assert ComputeOptions(Computes(processes=3), default_sites=(2, 3)).sites == (2, 3, 2)
    assert comp.hosts()[:2] == [("juice-c1", 2), ("juice-c2", 3)]


@pytest.mark.parametrize("kwargs,field", [
    ({"schedulers": 0}, "schedulers"), ({"scheduler_sites": ()}, "scheduler_sites"),
    ({"host_subset_size": 0}, "host_subset_size"), ({"concurrency_backend": "gevent"}, "concurrency_backend"),
    ({"log_levels": {"scheduler": "TRACE"}}, "log_levels.scheduler"),
    ({"log_levels": {"x": "INFO"}}, "log_levels"),
    ({"max_overflow": -2}, "max_overflow")])
def test_nova_options_name_the_bad_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(UserError, match=f"^{field}"):
        NovaOptions(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs,field", [({"sites": []}, "computes: sites"),
                                          ({"nodes_per_process": 0}, "computes: nodes_per_process"),
                                          ({"vcpus": 0}, "computes: vcpus")])
def test_computes_name_the_bad_field(kwargs: dict[str, object], field: str) -> None:
    # checked once, where the spec is read (the service takes the validated model as it is)
    with pytest.raises(UserError, match=f"^computes: {field.split(': ')[1]}"):
        validate(Computes, kwargs, "computes", expected="a mapping", unknown_key_hint="")


def test_unknown_role_is_refused() -> None:
    with pytest.raises(UserError, match="role"):
        render_nova_conf("cells", CTX, NovaOptions(), host="h")


def test_fake_glance_knows_one_image_and_its_schema() -> None:
    base = "http://10.210.1.2:9292"
    status, body = fakes.answer("glance", "GET", f"/v2/images/{fakes.IMAGE_ID}", base)
    assert status == 200 and body["id"] == fakes.IMAGE_ID and body["status"] == "active"
    assert set(body) - {"schema"} <= set(fakes.image_schema()["properties"]) | {"self", "file"}
    assert fakes.answer("glance", "GET", f"/v2/images/{uuid.uuid4()}", base)[0] == 404
    assert fakes.answer("glance", "GET", "/v2/schemas/image", base)[1]["name"] == "image"
    assert fakes.answer("glance", "DELETE", f"/v2/images/{fakes.IMAGE_ID}", base)[0] == 404


def test_fake_neutron_has_no_ports_nor_networks() -> None:
    base = "http://10.210.1.2:9696"
    assert fakes.answer("neutron", "GET", "/v2.0/ports?device_id=x", base) == (200, {"ports": []})
    assert fakes.answer("neutron", "GET", "/v2.0/networks.json?shared=True", base) == (200, {"networks": []})
    assert fakes.answer("neutron", "GET", "/v2.0/security-groups", base) == (200, {"security_groups": []})
    assert fakes.answer("neutron", "GET", "/", base)[1]["versions"][0]["id"] == "v2.0"
    assert fakes.answer("neutron", "POST", "/v2.0/ports", base)[0] == 404


def test_fake_neutron_quota_is_unlimited() -> None:
    # nova-api reads the port quota when a boot (microversion < 2.37) asks for no network
    status, body = fakes.answer("neutron", "GET", "/v2.0/quotas/0a1b2c3d4e5f", "http://10.210.1.2:9696")
    assert status == 200 and body["quota"]["port"] == -1 and body["quota"]["network"] == -1


def test_placement_conf() -> None:
    cp = parse(render_placement_conf(db_url="mysql+pymysql://u:p@h/placement", auth_url="http://k:5000/v3",
                                     password="pw", max_pool_size=4, max_overflow=9))
    assert cp["placement_database"]["connection"] == "mysql+pymysql://u:p@h/placement"
    assert cp["placement_database"]["max_pool_size"] == "4"
    assert cp["keystone_authtoken"]["username"] == "placement" and cp["api"]["auth_strategy"] == "keystone"


def test_compute_groups_can_coexist() -> None:
    a = ComputeOptions(Computes(sites=[2, 3]))
    b = ComputeOptions(Computes(processes=1, sites=[2], nodes_per_process=1), first_index=3)
    assert [h for h, _ in a.hosts()] == ["juice-c1", "juice-c2"] and b.hosts() == [("juice-c3", 2)]


def test_failing_nodes_are_the_first_k_of_each_process_and_json_logs_are_an_option() -> None:
    comp = ComputeOptions(Computes(nodes_per_process=5, failing_nodes=2))
    nodes = render_nodes("juice-c2", 5, comp)["nodes"]
    assert [n["fail_builds"] for n in nodes] == [True, True, False, False, False]
    with pytest.raises(UserError, match=r"computes: failing_nodes: at most nodes_per_process \(5\)"):
        validate(Computes, {"nodes_per_process": 5, "failing_nodes": 6}, "computes", expected="a mapping",
                 unknown_key_hint="")
    on = parse(render_nova_conf("conductor", CTX, NovaOptions(log_json=True), host="juice-conductor"))
    off = parse(render_nova_conf("conductor", CTX, NovaOptions(), host="juice-conductor"))
    assert on.get("DEFAULT", "use_json") == "true" and not off.has_option("DEFAULT", "use_json")


def test_osprofiler_is_off_as_shipped_and_on_in_every_role_when_asked() -> None:
    from dataclasses import replace

    from juice.services.openstack.nova_settings import nova_deviations

    for role in ("api", "conductor", "scheduler", "compute"):
        assert not parse(render_nova_conf(role, CTX, NovaOptions(), host="h")).has_section("profiler")
    ctx = replace(CTX, profiler_url="redis://10.210.1.2:6379", profiler_key="k3y")
    for role in ("api", "conductor", "scheduler", "compute"):
        p = parse(render_nova_conf(role, ctx, NovaOptions(profiler="redis"), host="h"))["profiler"]
        assert p["enabled"] == "true" and p["connection_string"] == ctx.profiler_url
        assert p["hmac_keys"] == "k3y" and p["trace_sqlalchemy"] == "false"
    with pytest.raises(UserError, match="profiler: expected off or redis"):
        NovaOptions(profiler="jaeger")
    devs = {d.option: d for d in nova_deviations(NovaOptions(profiler="redis"))}
    assert devs["[profiler] enabled"].value == "true" and devs["[profiler] enabled"].default == "false"
    assert not any("profiler" in d.option for d in nova_deviations(NovaOptions()))


def test_fork_isolation_makes_one_service_per_node() -> None:
    from juice.services.openstack.nova_conf import render_node_of

    shared = ComputeOptions(Computes(sites=[2, 3], nodes_per_process=3, failing_nodes=1))
    assert shared.service_hosts() == [("juice-c1", 2), ("juice-c2", 3)]
    assert render_node_of(shared, "juice-c1") == render_nodes("juice-c1", 3, shared)
    fork = ComputeOptions(Computes(sites=[2, 3], nodes_per_process=3, failing_nodes=1, isolation="fork"))
    assert fork.hosts() == shared.hosts()  # the processes Juice starts and stops
    assert fork.service_hosts() == [(f"juice-c{i}-n000{j}", s) for i, s in ((1, 2), (2, 3)) for j in range(3)]
    one = render_node_of(fork, "juice-c2-n0001")
    assert one["host"] == "juice-c2-n0001" and [n["name"] for n in one["nodes"]] == ["juice-c2-n0001"]
    assert one["nodes"][0]["uuid"] == node_uuid("juice-c2-n0001", "juice-c2-n0001")
    # failing_nodes: the first k nodes of each process, as with shared isolation
    assert [render_node_of(fork, h)["nodes"][0]["fail_builds"] for h, _ in fork.service_hosts()] == [
        True, False, False] * 2
    conf = parse(render_nova_conf("compute", CTX, NovaOptions(), host="juice-c2-n0001", comp=fork))
    assert conf.get("DEFAULT", "host") == "juice-c2-n0001"
    assert conf.get("DEFAULT", "state_path") == "/w/nova/juice-c2-n0001"
    with pytest.raises(UserError, match="^computes: isolation"):
        validate(Computes, {"isolation": "thread"}, "computes", expected="a mapping", unknown_key_hint="")
