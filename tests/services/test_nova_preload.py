"""Preload as rows (juice.services.openstack.nova_preload): the statements and the node choice without a
server; then for real on the suite's shared nova stack (tests/stacks.py: 20 nodes x 2 vCPUs),
filled to capacity with clones of one booted server, which nova then treats as its own: a
restarted compute adopts them, listed, counted by the resource trackers, refusing one more boot,
deleted through the API (their room taken back), stopped and started."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from juice.errors import ServiceError
from juice.services.openstack.nova_preload import CELL, TABLES, Node, clone_sql, place_servers
from tests.services.conftest import needs_lab
from tests.stacks import COMPUTE_NODES, NovaCloud

COLS = {(db, t): [("id", "int"), (key, "varchar"), ("deleted", "int")] for db, t, key in TABLES}
COLS[(CELL, "instances")] += [("host", "varchar"), ("node", "varchar"), ("vcpus", "int"),
                              ("display_name", "varchar"), ("compute_id", "bigint")]
COLS[("nova_api", "request_specs")] = [("id", "int"), ("instance_uuid", "varchar"), ("spec", "text")]
COLS[(CELL, "instance_actions_events")] = [("id", "int"), ("action_id", "int"), ("event", "varchar"),
                                          ("host", "varchar")]


def test_clone_statements_copy_every_column_but_the_servers_own() -> None:
    text = clone_sql(COLS, "tmpl-uuid")
    lines = text.splitlines()
    assert lines[0] == "SET @t = 'tmpl-uuid';"
    inst = next(x for x in lines if x.startswith(f"INSERT INTO {CELL}.instances "))
    assert "`id`" not in inst  # a new row id
    assert "jp.host" in inst and "jp.node" in inst and "jp.compute_id" in inst and "jp.name" in inst
    assert "t.`vcpus`" in inst  # copied as it is
    assert "REPLACE(t.`uuid`, @t, jp.uuid)" in inst and "t.deleted = 0" in inst
    spec = next(x for x in lines if x.startswith("INSERT INTO nova_api.request_specs "))
    assert "REPLACE(t.`spec`, @t, jp.uuid)" in spec and "deleted" not in spec  # the uuid inside
    ev = next(x for x in lines if "instance_actions_events" in x.split("SELECT")[0])
    assert "a.id" in ev and "jp.host" in ev and "ta.instance_uuid = @t" in ev
    assert len(lines) == 1 + len(TABLES) + 1


def test_clone_refuses_a_schema_without_a_table() -> None:
    cols = dict(COLS)
    del cols[(CELL, "instance_extra")]
    with pytest.raises(ServiceError, match="instance_extra not found"):
        clone_sql(cols, "t")


def _node(name: str, ram: float, vcpu: float = 8) -> Node:
    return Node(name, "juice-c1", 1, f"rp-{name}", {"VCPU": vcpu, "MEMORY_MB": ram, "DISK_GB": 100})


def test_servers_spread_by_free_ram_and_only_where_they_fit() -> None:
    want = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
    chosen = place_servers([_node("a", 2048), _node("b", 1024), _node("c", 4096, vcpu=0)], want, 5)
    # most free RAM first (a tie goes by name); c has the most RAM but no vCPU left
    assert [n.name for n in chosen] == ["a", "a", "a", "b", "a"]
    with pytest.raises(ServiceError, match="room for 6 more servers"):
        place_servers([_node("a", 2048), _node("b", 1024)], want, 7)


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_cloned_servers_are_novas_own(nova_cloud: NovaCloud) -> None:
    from juice.services.openstack.nova_preload import Preloader

    dep = nova_cloud.dep
    cli = dep.client(1)
    flavor = cli.ensure_flavor("juice-small", vcpus=1, ram_mb=256, disk_gb=1)
    room = COMPUTE_NODES * 2  # 2 vCPUs a node, 1 a server
    template = cli.boot("juice-preload-000000", flavor, dep.image_id)
    made: list[str] = [template]
    try:
        cli.wait_status(template, "ACTIVE", timeout=240)
        pre = Preloader(dep.lab, dep.db, dep.placement.url(), dep.placement.site, dep.ks.admin_credentials())
        with pytest.raises(ServiceError, match=f"room for {room - 1} more"):
            pre.clone(template, [f"juice-preload-{i:06d}" for i in range(1, room + 1)])  # one too many
        clones = pre.clone(template, [f"juice-preload-{i:06d}" for i in range(1, room)], wait=False)
        made += clones
        # a compute restarted now meets servers its hypervisor never ran: it adopts them and
        # its start-up resource update counts them (sooner than the 60 s periodic one)
        dep.computes.kill(2)
        dep.computes.restart(2)
        dep.computes.wait_registered(120)
        pre.wait_tracked(120)
        servers = [s for s in cli.servers() if s["name"].startswith("juice-preload-")]
        assert len(servers) == room and {s["status"] for s in servers} == {"ACTIVE"}
        per_node = Counter(s["OS-EXT-SRV-ATTR:hypervisor_hostname"] for s in servers)
        assert len(per_node) == COMPUTE_NODES and set(per_node.values()) == {2}  # spread, full
        # the resource trackers counted them; placement holds them
        db: Any = dep.db
        rows = db.server.query(f"SELECT SUM(running_vms), SUM(vcpus_used) FROM {CELL}.compute_nodes")
        assert rows == [(str(room), str(room))]
        # no room left: one more boot fails in the scheduler, as with booted servers
        over = cli.boot("juice-over", flavor, dep.image_id)
        made.append(over)
        with pytest.raises(ServiceError, match="No valid host"):
            cli.wait_status(over, "ACTIVE", timeout=240)
        # deleted through the API: gone, and their room taken back
        for sid in clones[:2]:
            cli.delete(sid)
        for sid in clones[:2]:
            cli.wait_gone(sid, timeout=240)
        after = cli.boot("juice-after", flavor, dep.image_id)
        made.append(after)
        assert cli.wait_status(after, "ACTIVE", timeout=240)["status"] == "ACTIVE"
        # stopped and started on the hypervisor that adopted it
        cli.call("POST", f"/servers/{clones[2]}/action", {"os-stop": None}, ok=(202,))
        assert cli.wait_status(clones[2], "SHUTOFF", timeout=240)["OS-EXT-STS:power_state"] == 4
        cli.call("POST", f"/servers/{clones[2]}/action", {"os-start": None}, ok=(202,))
        assert cli.wait_status(clones[2], "ACTIVE", timeout=240)["OS-EXT-STS:power_state"] == 1
    finally:  # the stack is shared: leave no server behind
        gone = set(clones[:2]) if "clones" in locals() else set()
        left = [s for s in made if s not in gone]
        for sid in left:
            cli.delete(sid)
        for sid in left:
            cli.wait_gone(sid, timeout=240)
    log = dep.computes.log("juice-c1").read_text(errors="replace")
    assert "not in instances" not in log  # FakeDriver's "unknown instance" warning never came
