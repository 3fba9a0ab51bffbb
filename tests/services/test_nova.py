"""The nova stack for real in a 2-site lab (the suite's shared ``nova_cloud``, tests/stacks.py):
MariaDB, RabbitMQ, Keystone, placement, the real glance-api (its image uploaded at deployment),
the real neutron (ML2/OVN, ovn-central), nova-api, nova-conductor, one nova-scheduler in site 1
and one nova-compute serving 20 simulated nodes in site 2 (playing its host's ovn-controller);
5 servers booted on the tenant network from glance's image to ACTIVE, each with a real port
bound to juice-c1 whose network-vif-plugged its spawn waited for, and deleted with their ports;
a compute killed and restarted as itself. That nothing is left running after ``stop`` is checked
by the fixture's teardown."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from juice.util import proc
from tests.services.conftest import needs_lab
from tests.stacks import COMPUTE_NODES, NovaCloud

SERVERS = 5


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_nova_stack_boots_and_deletes_servers(nova_cloud: NovaCloud, tmp_path: Path) -> None:
    dep = nova_cloud.dep
    # Every simulated node is a resource provider, with the deterministic UUID and the
    # exact size it was given.
    rps = dep.placement.resource_providers(2)
    want = set(dep.computes.node_uuids())
    assert len(want) == COMPUTE_NODES and want <= {rp["uuid"] for rp in rps}
    inv = dep.placement.inventories(sorted(want)[0])
    assert {rc: (inv[rc]["total"], inv[rc]["reserved"], inv[rc]["allocation_ratio"])
            for rc in ("VCPU", "MEMORY_MB", "DISK_GB")} == {
        "VCPU": (2, 0, 1.0), "MEMORY_MB": (2048, 0, 1.0), "DISK_GB": (20, 0, 1.0)}
    services = Counter((s["binary"], s["state"]) for s in dep.nova.services())
    assert services == {("nova-conductor", "up"): 1, ("nova-scheduler", "up"): 1,
                        ("nova-compute", "up"): 1}
    # The database's limit is the sum of the deployment's pools (above MariaDB's 151), as
    # recorded with how it was counted; the other servers keep their shipped defaults.
    limit, why = dep.stack.db_limit()
    assert limit is not None and why is not None
    assert dep.db.server.query("SHOW VARIABLES LIKE 'max_connections'") == [  # type: ignore[attr-defined]
        ("max_connections", str(limit))]
    found = {(d.server, d.option): d for d in dep.deviations()}
    assert found[("mariadb", "max_connections")].reason == why
    assert ("nova-compute", "reserved_host_memory_mb") in found
    assert ("rabbitmq", "disk_free_limit.absolute") in found
    conf = (dep.nova.place(1).read(dep.nova.home("juice-conductor") / "nova.conf") or b"").decode()
    assert "[database]" in conf and "max_pool_size" not in conf and "connection_recycle_time" not in conf

    cli = dep.client(2)  # a client in the computes' site, across the WAN
    flavor = cli.ensure_flavor("juice-small", vcpus=1, ram_mb=256, disk_gb=1)
    image = dep.image_id
    ids = [cli.boot(f"juice-vm-{i}", flavor, image, network=dep.network_id) for i in range(SERVERS)]
    assert cli.last_request_id.startswith("req-")
    hosts = set()
    try:
        for sid in ids:
            srv = cli.wait_status(sid, "ACTIVE", timeout=240)
            assert srv["OS-EXT-SRV-ATTR:host"] == "juice-c1"
            hosts.add(srv["OS-EXT-SRV-ATTR:hypervisor_hostname"])
        assert hosts <= {n["name"] for n in dep.computes.nodes("juice-c1")}
        # real ports: created by nova-compute, bound by ML2/OVN to the node's host, claimed by its
        # simulated ovn-controller, ACTIVE; the spawn waited for neutron's event of each
        ports = {p["device_id"]: p for p in dep.neutron.api(
            "GET", f"/v2.0/ports?network_id={dep.network_id}&device_owner=compute:nova")["ports"]}
        assert set(ports) == set(ids)
        assert {(p["status"], p["binding:host_id"], p["binding:vif_type"]) for p in ports.values()} == {
            ("ACTIVE", "juice-c1", "ovs")}
        log = dep.computes.log("juice-c1").read_text(errors="replace")
        assert all(f"juice-fake: network-vif-plugged-{p['id']} received in" in log for p in ports.values())
    finally:  # the stack is shared: leave no server behind
        for sid in ids:
            cli.delete(sid)
        for sid in ids:
            cli.wait_gone(sid, timeout=240)

    # nova asked the real glance for the image with the users' tokens (validated by
    # keystonemiddleware); no stand-in runs; the deleted servers' ports are gone
    assert ("GET", f"/v2/images/{image}", 200) in dep.glance.requests()
    assert dep.fakes is None and not dep.stand_ins()
    assert not dep.neutron.api("GET", f"/v2.0/ports?device_owner=compute:nova&network_id={dep.network_id}")[
        "ports"]
    facts = dep.facts()
    assert facts["image_service"] == "glance" and facts["glance"]["glance_version"].startswith("33.")
    assert facts["network_service"] == "neutron (ML2/OVN)"
    assert facts["neutron"]["neutron_version"].startswith("29.")
    # the simulated ovn-controller is recorded as deviations
    simulated = {d.option for d in dep.deviations() if d.server == "ovn-controller"}
    assert {"process", "Port_Binding claim"} <= simulated
    # Request ids reach the conductor and scheduler logs (DEBUG by default there).
    for host in ("juice-conductor", "juice-sched-1"):
        assert "req-" in dep.nova.log(host).read_text(errors="replace")

    # A crashed compute comes back as itself: same compute_id, same node UUIDs, no new
    # resource provider (nova refuses to start a known service without a compute_id).
    killed = dep.computes.kill(2)
    assert not proc.alive(killed["pid"])
    dep.computes.restart(2)
    dep.computes.wait_registered(120)
    assert len(dep.placement.resource_providers()) == COMPUTE_NODES
    log = dep.computes.log("juice-c1").read_text(errors="replace")
    refused = [line for line in log.splitlines() if "refusing to start" in line.lower()]
    assert refused == [] and "Determined node identity" in log  # compute_id read

    copies = dep.collect_logs(tmp_path / "logs")
    assert any(c.name == "nova-juice-c1.log" for c in copies)
    assert all(dep.ks.admin_credentials().password not in c.read_text(errors="replace")
               for c in copies)
