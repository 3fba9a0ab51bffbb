"""``computes.isolation: fork`` for real: one nova-compute process forks one nova-compute per
simulated node (``juice_nova.fork``) in a 2-site lab (MariaDB, RabbitMQ, Keystone, placement,
the stand-ins, nova-api, conductor, a scheduler in site 1). Each node is its own nova service,
boots land and go ACTIVE on the node of their own service, memory figures are read from
smaps_rollup, and killing the parent (by its recorded pid) leaves no child; a stop forwards TERM
to the children and reaps them."""

from __future__ import annotations

import secrets
import time

from juice.util import proc
from tests.services.conftest import needs_lab

NODES = 3
BOOTS = 4


def gone(pids: list[int], timeout: float = 15.0) -> list[int]:
    """The pids still alive after at most ``timeout`` (bounded poll)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if proc.alive(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_forked_nodes_are_each_their_own_nova_compute() -> None:
    from juice.lab import LocalLab, netns
    from juice.lab import spec as labspec
    from juice.services.openstack.nova_conf import ComputeOptions, Computes
    from juice.services.openstack.nova_deploy import NovaDeployment, NovaStack

    ls = labspec.parse({"name": "nf" + secrets.token_hex(3), "sites": 2, "delay_ms": 0})
    comp = ComputeOptions(Computes(processes=1, sites=[2], nodes_per_process=NODES, vcpus=2,
                                   memory_mb=2048, disk_gb=20, isolation="fork"))
    with LocalLab.up(ls, ephemeral=True) as lab:
        # the subject is the forked nodes: the named stand-ins for the image and network
        # services (the real ones are tested on the suite's shared stack and in its CLI run)
        dep = NovaDeployment(lab, stack=NovaStack(computes=comp, image_service="fake-glance",
                                                  network_service="fake-neutron"))
        try:
            dep.up()
            hosts = {f"juice-c1-n{j:04d}" for j in range(NODES)}
            # `openstack compute service list`: one nova-compute service per node, each up
            svcs = [s for s in dep.nova.services() if s["binary"] == "nova-compute"]
            assert {s["host"] for s in svcs} == hosts and {s["state"] for s in svcs} == {"up"}
            assert set(dep.computes.node_uuids()) <= {rp["uuid"] for rp in dep.placement.resource_providers()}
            children = dep.computes.children("juice-c1")
            assert set(children) == hosts
            parent = dep.computes.servers["juice-c1"].pid
            assert parent is not None and all(proc.alive(p) for p in children.values())
            assert sorted(dep.computes.pids()) == sorted([parent, *children.values()])

            # memory: per child from smaps_rollup, in the facts
            mem = dep.computes.facts()["memory"]
            assert mem["isolation"] == "fork" and mem["children"] == NODES
            assert 0 < mem["child_uss_mb"] <= mem["child_pss_mb"] <= mem["child_rss_mb"]
            assert mem["added_mb_per_node"] == mem["child_uss_mb"] and mem["mb_per_node"] > 0
            assert set(dep.computes.rss()) == {"juice-c1", *hosts}

            cli = dep.client(1)
            flavor = cli.ensure_flavor("juice-small", vcpus=1, ram_mb=256, disk_gb=1)
            ids = [cli.boot(f"juice-fork-{i}", flavor, dep.image_id) for i in range(BOOTS)]
            for sid in ids:
                srv = cli.wait_status(sid, "ACTIVE", timeout=180)
                # each node's own service built it: the service host is the node
                assert srv["OS-EXT-SRV-ATTR:host"] == srv["OS-EXT-SRV-ATTR:hypervisor_hostname"]
                assert srv["OS-EXT-SRV-ATTR:host"] in hosts
            # the parent logs the fork, each child nova's own lines in its own file
            assert f"{NODES} node(s) forked" in dep.computes.log("juice-c1").read_text(errors="replace")
            assert all(dep.computes.log(h).stat().st_size > 0 for h in hosts)
            for sid in ids:
                cli.delete(sid)
            for sid in ids:
                cli.wait_gone(sid, timeout=120)

            # killing the parent (SIGKILL, by its recorded pid) leaves no child
            dep.computes.kill(2)
            assert gone([parent, *children.values()]) == []

            # a restarted parent forks its nodes again; a stop forwards TERM and reaps them
            dep.computes.restart(2, timeout=180)
            again = dep.computes.children("juice-c1")
            assert set(again) == hosts and not set(again.values()) & set(children.values())
        finally:
            pids = dep.pids()
            dep.stop()
        assert gone(pids) == []
        assert [p for k in lab.sites for p in netns.pids(lab.site_ns(k))] == []
