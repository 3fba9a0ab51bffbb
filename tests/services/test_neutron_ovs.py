"""``network_service: ovs``: the real neutron 29 with ML2/OVS (neutron-api under gunicorn and
neutron-rpc-server) in a nova stack of 2 sites, each nova-compute process playing its hosts'
neutron-openvswitch-agent (``juice_nova.ovs``: state reports and device RPCs over RabbitMQ);
images from the stand-in fake-glance (not the subject).
Boots get a port bound by ML2's openvswitch driver to the node's host (vif_type ovs), set
ACTIVE once the simulated agent reports the device up, and the spawn waited for neutron's
network-vif-plugged; deleting the servers leaves no port; after ``stop`` nothing runs in the
sites. Rendering and the agent's state are checked without a lab."""

from __future__ import annotations

import importlib.util
import secrets
import time
from pathlib import Path

import pytest

from juice.errors import UserError
from juice.services.openstack.neutron_ovs import SIMULATED_AGENT, render_ml2_ovs_conf
from tests.services.conftest import needs_lab

OVS_PY = Path(__file__).resolve().parents[2] / "plugins" / "juice-nova" / "src" / "juice_nova" / "ovs.py"

NODES = 2
BOOTS = 2


def test_ml2_ovs_conf_and_the_simulated_agents_state() -> None:
    from juice.services.openstack.nova_deploy import NovaStack
    spec = importlib.util.spec_from_file_location("juice_nova_ovs_under_test", OVS_PY)
    assert spec is not None and spec.loader is not None
    ovs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ovs)
    agent_state = ovs.agent_state

    ml2 = render_ml2_ovs_conf().splitlines()
    for line in ("mechanism_drivers = openvswitch", "type_drivers = vxlan,flat",
                 "project_network_types = vxlan", "firewall_driver = openvswitch"):
        assert line in ml2, line
    st = agent_state("juice-c1", "100.64.32.0", {"public": "br-ex"}, ["vxlan"])
    assert (st["binary"], st["agent_type"], st["host"], st["topic"]) == (
        "neutron-openvswitch-agent", "Open vSwitch agent", "juice-c1", "N/A")
    assert st["configurations"]["bridge_mappings"] == {"public": "br-ex"}
    assert st["configurations"]["tunnel_types"] == ["vxlan"] and st["start_flag"] is True
    assert {o for o, *_ in SIMULATED_AGENT} >= {"process", "report_state", "device details"}
    assert NovaStack(network_service="ovs").neutron_processes() == 3  # 1 API worker + RPC + reports
    assert NovaStack(network_service="ovs", neutron_rpc_workers=4).neutron_processes() == 6
    assert NovaStack(network_service="ovn").neutron_processes() == 1
    with pytest.raises(UserError, match="ovn, ovs or fake-neutron"):
        NovaStack(network_service="linuxbridge")


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_ml2_ovs_boots_bind_ports_to_the_simulated_agents_hosts(tmp_path: Path) -> None:
    from juice.lab import LocalLab, netns
    from juice.lab import spec as labspec
    from juice.services.openstack.nova_conf import ComputeOptions, Computes
    from juice.services.openstack.nova_deploy import NovaDeployment, NovaStack
    from juice.util import proc

    ls = labspec.parse({"name": "no" + secrets.token_hex(3), "sites": 2, "delay_ms": 0})
    comp = ComputeOptions(Computes(processes=1, sites=[2], nodes_per_process=NODES, vcpus=2,
                                   memory_mb=2048, disk_gb=20))
    with LocalLab.up(ls, ephemeral=True) as lab:
        # the subject is the network: the image service's stand-in (the real glance is tested elsewhere)
        dep = NovaDeployment(lab, stack=NovaStack(computes=comp, network_service="ovs",
                                                  image_service="fake-glance"))
        pids: list[int] = []
        try:
            dep.up()
            pids = dep.pids()
            net = dep.neutron
            assert net is not None and dep.ovn is None
            # the simulated agent of the compute's host, alive to neutron (its state reports)
            deadline = time.monotonic() + 60  # its first report is sent as nova-compute starts
            while not (agents := [a for a in net.agents() if a["host"] == "juice-c1"]):
                assert time.monotonic() < deadline, "no agent of juice-c1 in neutron"
                time.sleep(1)
            assert [(a["agent_type"], a["binary"], a["alive"]) for a in agents] == [
                ("Open vSwitch agent", "neutron-openvswitch-agent", True)]
            assert agents[0]["configurations"]["bridge_mappings"] == {"public": "br-ex"}

            cli = dep.client(2)
            flavor = cli.ensure_flavor("juice-small", vcpus=1, ram_mb=256, disk_gb=1)
            t0 = time.monotonic()
            ids = [cli.boot(f"juice-ovs-{i}", flavor, dep.image_id, network=dep.network_id)
                   for i in range(BOOTS)]
            for sid in ids:
                cli.wait_status(sid, "ACTIVE", timeout=240)
            boots_s = time.monotonic() - t0
            ports = {p["device_id"]: p for p in net.api(
                "GET", f"/v2.0/ports?network_id={dep.network_id}&device_owner=compute:nova")["ports"]}
            assert set(ports) == set(ids)
            assert {(p["status"], p["binding:host_id"], p["binding:vif_type"]) for p in ports.values()} == {
                ("ACTIVE", "juice-c1", "ovs")}
            log = dep.computes.log("juice-c1").read_text(errors="replace")
            for p in ports.values():  # reported up by the simulated agent, the spawn waited for it
                assert f"juice simulated ovs agent: port {p['id']} up on juice-c1" in log
                assert f"juice-fake: network-vif-plugged-{p['id']} received in" in log
            for sid in ids:
                cli.delete(sid)
            for sid in ids:
                cli.wait_gone(sid, timeout=240)
            assert not net.api("GET", f"/v2.0/ports?device_owner=compute:nova&network_id={dep.network_id}")[
                "ports"]
            facts = dep.facts()
            assert facts["network_service"] == "neutron (ML2/OVS)"
            assert facts["neutron"]["ml2"] == "openvswitch"
            simulated = {d.option for d in dep.deviations() if d.server == "neutron-openvswitch-agent"}
            assert {"process", "report_state", "device details"} <= simulated
            assert "neutron-rpc-server" in {r.kind for r in net.records()}
            print(f"ML2/OVS: stack up in {dep.timings['up_s']:.0f} s (neutron "
                  f"{dep.timings['neutron_s']:.0f} s), {BOOTS} boots ACTIVE in {boots_s:.1f} s")
        finally:
            for name, svc in dep.services():
                if name in ("neutron", "computes"):
                    svc.collect_logs(tmp_path / "logs" / name)
            pids = pids or dep.pids()
            dep.stop()
        assert not [p for p in pids if proc.alive(p)]
        assert not [p for k in lab.sites for p in netns.pids(lab.site_ns(k))]
