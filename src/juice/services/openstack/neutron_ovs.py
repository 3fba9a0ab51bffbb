"""Neutron with ML2/OVS: the real neutron 29 API (as ``neutron.Neutron``) with the ML2
``openvswitch`` mechanism driver (no OVN), plus the real ``neutron-rpc-server`` that serves the
L2 agents' RPC over RabbitMQ; the agents themselves (``neutron-openvswitch-agent``, one per
hypervisor) are SIMULATED in each nova-compute process (``juice_nova.ovs``).

    net = NeutronOVS(lab, db, mq, ks, progress, site=1)   # pure
    net.up()     # database, neutron-api (gunicorn), neutron-rpc-server, the tenant network
    net.agents() # GET /v2.0/agents: one "Open vSwitch agent" per simulated nova host
    net.stop()   # neutron-rpc-server (parent, then its workers), then neutron-api, by pid

ML2: mechanism driver ``openvswitch``, type drivers ``vxlan`` and ``flat``, project networks
``vxlan`` (VNIs 1..65536), security groups on (``firewall_driver = openvswitch``, devstack's),
port security; the L3 service plugin ``router`` (nova lists a server's floating IPs; no L3 agent
runs: no router is made). The tenant network ``juice-net`` is then a vxlan network.

``neutron-rpc-server`` (neutron 29: ``neutron.cmd.server:main_rpc``, oslo.service's process
launcher with the threading backend) reads the same ``neutron.conf`` and ``ml2_conf.ini``; it forks
``rpc_workers`` RPC workers (consumers of ``q-plugin``: device details, device up/down, tunnel
sync) and ``rpc_state_report_workers`` (1) for ``q-reports-plugin`` (the agents' heartbeats).
Both as shipped (``rpc_workers`` unset: half the CPUs) unless the stack sets ``rpc_workers``.
It is healthy when RabbitMQ shows a consumer on both topics. ``neutron-periodic-workers`` (its
periodic tasks: agent liveness rescheduling of DHCP/L3, none on the boot path) is not started:
a recorded deviation.

A port is bound by ML2/OVS to a host only while that host's "Open vSwitch agent" is alive
(``agent_down_time``, 75 s, since its last ``report_state``) and reports a tunnel type or bridge
mapping for the network's segment; it becomes ACTIVE (and neutron's nova notifier sends
``network-vif-plugged``) when that agent calls ``update_device_list`` with the port up.

Files: neutron's (``neutron.Neutron``) plus ``<home>/neutron-rpc.log``.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

from juice.errors import ServiceError
from juice.lab.place import Place
from juice.services.base import Progress, ServerRecord, Service, Sites, quiet
from juice.services.buses.rabbitmq import RabbitMQ
from juice.services.deviations import Deviation, dev
from juice.services.openstack.keystone import VENV, Keystone
from juice.services.openstack.neutron import Neutron, _section
from juice.services.process import Server, children, spawn, stop_all

REPORT_INTERVAL_S = 30.0   # neutron's [AGENT] report_interval, as shipped (the simulated agents')
PHYSNET = "public"         # devstack's ML2/OVS physical network (bridge_mappings public:br-ex)
TUNNEL_TYPES = ("vxlan",)  # the agents' tunnel_types: the project networks' type
RPC_TOPICS = ("q-plugin", "q-reports-plugin")  # what neutron-rpc-server consumes (neutron_lib topics)

# How the simulated neutron-openvswitch-agent (juice_nova.ovs, in each nova-compute process)
# differs from a hypervisor's neutron-openvswitch-agent 29 (option, Juice's, the real one's, why).
SIMULATED_AGENT: list[tuple[str, str, str, str]] = [
    ("process", "simulated in each nova-compute process: one RabbitMQ connection per process, "
     "serving every nova host of the process",
     "one neutron-openvswitch-agent (+ ovs-vswitchd) per hypervisor",
     "the nodes are simulated (no bridge, no guest): what neutron sees of a node's L2 agent is kept "
     "(its state reports, its device RPCs, from that host's name)"),
    ("report_state", f"every report_interval ({REPORT_INTERVAL_S:g} s, as shipped) per host, an RPC call "
     "on q-reports-plugin with the real agent's agent_state (binary, type, topic, configurations with "
     "bridge_mappings and tunnel_types, start_flag, resource_versions at the first)",
     "the same, from each agent", "reports of a process's hosts are spread over the interval; a process "
     "sends at most 8 at a time"),
    ("device details", "get_devices_details_list_and_failed_devices RPC (q-plugin, 1.5) for each "
     "plugged port, then update_device_list (1.9) with it up",
     "neutron 29's agent reads the details from its resource cache (filled by neutron's push "
     "notifications, bulk_pull on a miss), then calls update_device_list",
     "no resource cache nor push consumers; the server does one device lookup per port instead "
     "(the RPC older agents used, still served by neutron 29)"),
    ("fanout consumers", "none", "port_update, network_update/delete, security-group and resource "
     "push (neutron-vo-*) fanout queues per agent", "nothing in the simulated node reacts to them; "
     "neutron's casts to those exchanges find no queue (RabbitMQ drops them)"),
    ("flows, tunnels, security groups", "none (tunnel_sync once per host at start)",
     "OpenFlow rules, local VLANs, vxlan tunnels, SG flows", "no guest sends a packet; the "
     "time to program flows is not simulated (the device is reported up at once)"),
    ("tunneling_ip", "a distinct address of 100.64.0.0/10 per host (never routed)",
     "the hypervisor's tunnel endpoint address",
     "neutron keeps one vxlan endpoint per address and the nodes of a site share its address"),
]


def render_ml2_ovs_conf() -> str:
    """ml2_conf.ini: ML2/OVS, vxlan project networks, flat provider networks."""
    lines = ["# rendered by juice"]
    lines += _section("ml2", {"mechanism_drivers": "openvswitch", "type_drivers": "vxlan,flat",
                              "project_network_types": "vxlan", "extension_drivers": "port_security"})
    lines += _section("ml2_type_vxlan", {"vni_ranges": "1:65536"})
    lines += _section("ml2_type_flat", {"flat_networks": "*"})
    lines += _section("securitygroup", {"enable_security_group": True, "firewall_driver": "openvswitch"})
    return "\n".join(lines) + "\n"


class NeutronOVS(Neutron):
    """neutron-api and neutron-rpc-server with ML2/OVS (see the module doc)."""

    def __init__(self, lab: Sites, db: Service, mq: RabbitMQ, ks: Keystone, progress: Progress = quiet,
                 **kw: Any) -> None:
        super().__init__(lab, db, mq, ks, None, progress, **kw)
        self.rpc: Server | None = None

    @property
    def rpc_log(self) -> Path:
        return self.home / "neutron-rpc.log"

    def ml2_conf(self) -> str:
        return render_ml2_ovs_conf()

    def configure(self) -> None:
        super().configure()
        # the L3 plugin of ML2/OVS deployments (neutron.conf is rendered with ML2/OVN's)
        conf = self.home / "neutron.conf"
        text = (self.place.read(conf) or b"").decode()
        if "service_plugins = ovn-router" not in text:
            raise ServiceError(f"neutron in site {self.site}: no service_plugins line in {conf}")
        self.place.write(conf, text.replace("service_plugins = ovn-router", "service_plugins = router"),
                         mode=0o600)

    def start(self) -> None:
        super().start()
        argv = [str(VENV / "bin" / "neutron-rpc-server"), "--config-file", str(self.home / "neutron.conf"),
                "--config-file", str(self.home / "ml2_conf.ini")]
        self.rpc = spawn(self.place, argv, log=self.rpc_log, what=f"neutron-rpc-server in site {self.site}",
                         env=self._env(), cwd=self.home)

    def _consumed(self) -> bool:
        """RabbitMQ shows a consumer on every topic neutron-rpc-server serves."""
        node = self.mq.node_for(self.site)
        try:
            rows = json.loads(self.mq.ctl(node, "list_queues", "name", "consumers", "--formatter", "json",
                                          timeout=10) or "[]")
        except (ServiceError, ValueError):
            return False
        consumers = {str(r.get("name")): int(r.get("consumers") or 0) for r in rows}
        return all(consumers.get(t, 0) > 0 for t in RPC_TOPICS)

    def wait_healthy(self, timeout: float = 180.0) -> None:
        """neutron-api answers and the network exists (``Neutron``), then neutron-rpc-server
        consumes its topics."""
        t0 = time.monotonic()
        super().wait_healthy(timeout)
        assert self.rpc is not None, "start() first"
        self.rpc.wait_ready(self._consumed, max(30.0, timeout - (time.monotonic() - t0)),
                            f"neutron-rpc-server consuming {', '.join(RPC_TOPICS)}", interval=0.5)
        self.timings["rpc_healthy_s"] = round(time.monotonic() - t0, 2)
        self.progress(f"neutron-rpc-server consumes {', '.join(RPC_TOPICS)} "
                      f"({self.timings['rpc_healthy_s']:.1f} s)")

    def agents(self) -> list[dict[str, Any]]:
        """GET /v2.0/agents: with ML2/OVS, one "Open vSwitch agent" per simulated nova host."""
        return super().agents()

    def _stop_rpc(self) -> None:
        if self.rpc is None:
            return
        workers = children(self.place, self.rpc.pid) if self.rpc.running() else []
        stop_all([self.rpc], grace_s=20, sig=signal.SIGTERM)  # the launcher stops its workers
        self.place.terminate([(w, None) for w in workers], grace_s=5)
        self.rpc = None

    def stop(self) -> None:
        try:
            self._stop_rpc()
        finally:
            super().stop()

    def kill(self, site: int) -> dict[str, Any]:
        rpc: dict[str, Any] = {}
        if site == self.site and self.rpc is not None and self.rpc.running():
            workers = children(self.place, self.rpc.pid)
            rpc = {"rpc_pid": self.rpc.kill(workers), "rpc_workers": workers}
            self.rpc = None
        return {**super().kill(site), **rpc}

    def pids(self) -> list[int]:
        rpc = [] if self.rpc is None or self.rpc.pid is None else [self.rpc.pid, *children(self.place,
                                                                                           self.rpc.pid)]
        return super().pids() + rpc

    def records(self) -> list[ServerRecord]:
        out = super().records()
        if self.rpc is not None:
            out.append(self.rpc.record("neutron-rpc-server", port=0, datadir=self.home))
        return out

    def logs(self) -> list[tuple[Place, Path]]:
        return [*super().logs(), (self.place, self.rpc_log)]

    def deviations(self) -> list[Deviation]:
        """neutron's (without ML2/OVN's), and the SIMULATED agents' differences from
        neutron-openvswitch-agent (server ``neutron-openvswitch-agent``)."""
        own = [d for d in super().deviations() if d.option not in ("neutron-ovn-maintenance-worker",
                                                                    "neutron-rpc-server")]
        return [*own,
                dev("neutron", "neutron-periodic-workers", "not started", "started (devstack)",
                    "its periodic tasks (rescheduling networks and routers off dead DHCP/L3 agents) are "
                    "not on the boot path; no DHCP or L3 agent runs"),
                *(dev("neutron-openvswitch-agent", option, value, default, why)
                  for option, value, default, why in SIMULATED_AGENT)]

    def facts(self) -> dict[str, Any]:
        return {**super().facts(), "ml2": "openvswitch", "agent": {
            "simulated": "neutron-openvswitch-agent (juice_nova.ovs)", "report_interval_s": REPORT_INTERVAL_S,
            "tunnel_types": list(TUNNEL_TYPES), "bridge_mappings": {PHYSNET: "br-ex"}}}

    def agent_config(self, site: int) -> dict[str, Any]:
        """The nodes file's ``ovs`` entry for compute processes in ``site`` (juice_nova.virt,
        juice_nova.ovs): neutron's RabbitMQ as the agents there reach it, the report interval,
        the agents' mappings."""
        mq = self.mq.urls_all(site) if len(self.mq.nodes) > 1 else self.mq.url(site)
        return {"transport_url": mq, "report_interval": REPORT_INTERVAL_S,
                "bridge_mappings": {PHYSNET: "br-ex"}, "tunnel_types": list(TUNNEL_TYPES)}
