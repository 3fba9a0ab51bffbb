"""The real Neutron (neutron 29, ML2/OVN, under gunicorn) with Debian's ovn-central (NB and SB
ovsdb-servers, ovn-northd), the lab's MariaDB, RabbitMQ and Keystone: the tenant network made at
deployment, a port created through the API with a real token from the other site, bound by
ML2/OVN to a simulated chassis host (juice_nova.ovn registers it in the SB as ovn-controller
does), then claimed: northd sets the logical switch port up and neutron the port ACTIVE. On the
suite's shared nova stack (``tests/stacks.py``: its teardown checks that every process stops by
pid and nothing is left in the sites). Rendering and options are checked without a lab."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from juice.errors import ServiceError
from juice.services.openstack.neutron import NETWORK, Neutron, render_ml2_conf, render_neutron_conf
from tests.services.conftest import FakeSites, needs_lab
from tests.stacks import NovaCloud

PLUGIN_SRC = Path(__file__).resolve().parents[2] / "plugins" / "juice-nova" / "src"


def test_conf_has_ml2_ovn_geneve_and_the_nova_notifier() -> None:
    ml2 = render_ml2_conf(nb="tcp:10.0.0.1:6641", sb="tcp:10.0.0.1:6642").splitlines()
    for line in ("mechanism_drivers = ovn", "type_drivers = geneve,flat", "project_network_types = geneve",
                 "ovn_nb_connection = tcp:10.0.0.1:6641", "ovn_sb_connection = tcp:10.0.0.1:6642"):
        assert line in ml2, line
    conf = render_neutron_conf(db_url="mysql+pymysql://u:p@h/neutron", transport_url="rabbit://x",
                               auth_url="http://k:5000/v3", region="Region1", password="pw",
                               state="/s1/neutron", api_workers=2)
    assert "[nova]\nauth_type = password\nauth_url = http://k:5000/v3\nusername = neutron" in conf
    assert "region_name = Region1" in conf and "core_plugin = ml2" in conf and "api_workers = 2" in conf
    with pytest.raises(Exception, match="neutron.api_workers"):
        Neutron(FakeSites(), object(), object(), object(), object(), api_workers=0)  # type: ignore[arg-type]


def _chassis(lab: Any, site: int, sb: str, host: str, *args: str) -> str:
    """The simulated ovn-controller's CLI run in ``site`` with the OpenStack venv's python."""
    from juice.services.openstack.os_api import venv_bin

    r = lab.place(site).run([str(venv_bin("python3")), "-m", "juice_nova.ovn", "--sb", sb,
                             "--ip", lab.site_ip(site), "--host", host, *args], timeout=90,
                            env={"PYTHONPATH": str(PLUGIN_SRC), "PATH": os.environ["PATH"]})
    assert r.ok, (r.out + r.err)[-2000:]
    return str(r.out)


def _wait(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout} s")


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_real_neutron_binds_and_activates_a_port_on_a_simulated_chassis(nova_cloud: NovaCloud) -> None:
    """On the suite's shared stack (its neutron, ovn-central, Keystone; tests/stacks.py), with a
    chassis of this test's own (removed after: the stack is left as found). That the stack's
    processes all stop by pid and nothing is left in the sites is the fixture's own check."""
    dep = nova_cloud.dep
    net, ovn = dep.neutron, dep.ovn
    assert net is not None and ovn is not None, "the shared stack runs the real neutron with ML2/OVN"
    assert len(net.pids()) == 1 + net.api_workers and len(ovn.pids()) == 3  # gunicorn; NB, SB, northd
    host = f"juice-test-{uuid.uuid4().hex[:8]}"
    try:
        _serve(dep.lab, dep.ks, ovn, net, host)
    finally:
        for name in ovn.sbctl("--bare", "--columns=name", "find", "Chassis", f"hostname={host}").split():
            ovn.sbctl("chassis-del", name)


def _serve(lab: Any, ks: Any, ovn: Any, net: Neutron, host: str) -> None:
    from juice.openstack.http import issue_token

    token = issue_token(lab, 2, ks.admin_credentials())
    nets = net.api("GET", f"/v2.0/networks?name={NETWORK}", token=token, site=2)["networks"]
    assert [(n["id"], n["provider:network_type"], n["shared"]) for n in nets] == [
        (net.network_id, "geneve", True)]
    assert ovn.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split() == [
        f"neutron-{net.network_id}"]  # ML2/OVN wrote the network into the NB

    # the simulated chassis: registered in the SB, seen by neutron as an alive OVN controller agent
    _chassis(lab, 2, ovn.sb_url(), host)
    agents = _wait(lambda: [a for a in net.agents() if a["host"] == host], 30, "the chassis as an agent")
    assert agents[0]["alive"] and agents[0]["agent_type"] == "OVN Controller agent"

    device = str(uuid.uuid4())
    port = net.api("POST", "/v2.0/ports", {"port": {
        "network_id": net.network_id, "binding:host_id": host, "device_owner": "compute:nova",
        "device_id": device}}, ok=(201,), token=token, site=2)["port"]
    assert port["binding:vif_type"] == "ovs" and port["status"] == "DOWN"  # bound by ML2/OVN, not up
    assert port["fixed_ips"][0]["ip_address"].startswith("10.")
    # a host with no chassis cannot bind
    other = net.api("POST", "/v2.0/ports", {"port": {"network_id": net.network_id,
                                                     "binding:host_id": "no-such-host"}}, ok=(201,))["port"]
    assert other["binding:vif_type"] == "binding_failed"

    out = _chassis(lab, 2, ovn.sb_url(), host, "--claim", port["id"])
    assert "claimed 1 of 1" in out
    _wait(lambda: net.api("GET", f"/v2.0/ports/{port['id']}")["port"]["status"] == "ACTIVE", 60,
          "the claimed port ACTIVE")
    assert ovn.nbctl("lsp-get-up", port["id"]).strip() == "up"

    with pytest.raises(ServiceError, match="401"):
        net.api("GET", "/v2.0/ports", token="not-a-token")
    for p in (port["id"], other["id"]):
        net.api("DELETE", f"/v2.0/ports/{p}", ok=(204,))
    assert net.records()[0].kind == "neutron-api"
    assert net.facts()["neutron_version"].startswith("29.")
