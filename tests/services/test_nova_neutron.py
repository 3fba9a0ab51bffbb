"""The nova stack with the real Neutron (ML2/OVN, ovn-central) in a 2-site lab: one nova-compute
of 2 simulated nodes in site 2 plays its host's ovn-controller (juice_nova.ovn: a chassis in the
SB, alive as an OVN Controller agent); 2 servers booted on the tenant network get real ports
(created by nova-compute, bound by ML2/OVN to juice-c1, claimed by the simulated chassis), the
driver's spawn waits for neutron's ``network-vif-plugged`` as nova's libvirt driver does, the
servers go ACTIVE with ACTIVE ports; deleted, their ports are gone. Nothing is left running."""

from __future__ import annotations

from pathlib import Path

from tests.services.conftest import needs_lab

SERVERS = 2


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_boots_get_real_ports_and_wait_for_vif_plugged(lab_name: str, tmp_path: Path) -> None:
    from juice.lab import LocalLab, netns, spec
    from juice.services.openstack.nova_conf import ComputeOptions, Computes
    from juice.services.openstack.nova_deploy import NovaDeployment, NovaStack
    from juice.util import proc

    ls = spec.parse({"name": lab_name, "sites": 2, "delay_ms": 1})
    stack = NovaStack(network_service="ovn", image_service="fake-glance",
                      computes=ComputeOptions(Computes(processes=1, sites=[2], nodes_per_process=2, vcpus=2,
                                                       memory_mb=2048, disk_gb=20)))
    with LocalLab.up(ls, ephemeral=True) as lab:
        dep = NovaDeployment(lab, stack=stack)
        pids: list[int] = []
        try:
            dep.up()
            pids = dep.pids()
            assert dep.fakes is not None and dep.fakes.kinds == ("glance",)  # no fake-neutron
            assert dep.neutron is not None and dep.network_id
            (agent,) = [a for a in dep.neutron.agents() if a["host"] == "juice-c1"]
            assert agent["alive"]
            cli = dep.client(2)
            flavor = cli.ensure_flavor("juice-small", vcpus=1, ram_mb=256, disk_gb=1)
            ids = [cli.boot(f"juice-vm-{i}", flavor, dep.image_id, network=dep.network_id)
                   for i in range(SERVERS)]
            for sid in ids:
                cli.wait_status(sid, "ACTIVE", timeout=240)
            query = f"/v2.0/ports?network_id={dep.network_id}&device_owner=compute:nova"
            ports = dep.neutron.api("GET", query)
            mine = {p["device_id"]: p for p in ports["ports"]}
            assert set(mine) == set(ids)
            assert {(p["status"], p["binding:host_id"], p["binding:vif_type"]) for p in mine.values()} == {
                ("ACTIVE", "juice-c1", "ovs")}
            log = dep.computes.log("juice-c1").read_text(errors="replace")
            for p in mine.values():  # the spawn waited for neutron's event of every port
                assert f"juice-fake: network-vif-plugged-{p['id']} received in" in log
            assert "claimed port" in log
            for sid in ids:
                cli.delete(sid)
            for sid in ids:
                cli.wait_gone(sid, timeout=240)
            left = dep.neutron.api("GET", query)
            assert left["ports"] == []
            facts = dep.facts()
            assert facts["network_service"] == "neutron (ML2/OVN)" and facts["neutron"]["ml2"] == "ovn"
        finally:
            dep.collect_logs(tmp_path / "logs")
            dep.stop()
        assert pids and not [p for p in pids if proc.alive(p)]
        assert not [p for k in lab.sites for p in netns.pids(lab.site_ns(k))]
