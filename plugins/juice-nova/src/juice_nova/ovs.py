"""SIMULATED neutron-openvswitch-agent: what a hypervisor's ML2/OVS L2 agent says to neutron
over RabbitMQ for the boot path, without Open vSwitch, flows or tunnels.

One ``Agent`` object serves every nova service host of one nova-compute process (each host an
agent of its own to neutron: its name is the agent's ``host``), over ONE RabbitMQ connection per
process (oslo.messaging from the OpenStack venv: the RPC client neutron's agent uses), with the
topics, methods, versions and arguments of neutron 29's ``neutron.agent.rpc``:

- state reports (``PluginReportStateAPI``: topic ``q-reports-plugin``, version 1.4, namespace
  None): per host, an RPC call ``report_state`` every ``report_interval`` (30 s as shipped; the
  call's timeout too) with the agent_state ``neutron-openvswitch-agent`` builds (binary
  ``neutron-openvswitch-agent``, agent_type ``Open vSwitch agent``, topic ``N/A``, configurations
  with ``bridge_mappings``, ``tunnel_types``, ``tunneling_ip``, ...; ``start_flag`` and
  ``resource_versions`` in the first report only). neutron's ML2 ``openvswitch`` mechanism driver
  binds a port to a host only while the host's agent is alive and maps the network's segment;
- at start, per host, ``tunnel_sync`` (``PluginApi``, topic ``q-plugin``, 1.4): the host's vxlan
  endpoint, as the agent's first loop iteration does;
- ``plug(port_id, host)``: what the agent does when the OVS port with ``iface-id=<port>`` appears
  on br-int: ``get_devices_details_list_and_failed_devices`` (1.5) for the host's new devices,
  then ``update_device_list`` (1.9) with those whose details came back bound to the host:
  neutron sets the port ACTIVE (the L2 agent's provisioning block done) and its nova notifier
  sends ``network-vif-plugged``. A device whose details are not there yet (no binding) is asked
  again until ``claim_timeout_s``;
- ``unplug(port_id, host)``: the OVS port gone: ``update_device_list`` with it down.

Each host's calls are serial (one agent's loop); a process runs at most ``WORKERS`` hosts' calls
at once. Deviations from the real agent (docs/nova-simulation.md, ``SIMULATED_AGENT`` in
``juice.services.openstack.neutron_ovs``): no OVS, flows, tunnels or security-group flows; the
device details come from the server RPC (neutron 29's agent reads them from its resource cache);
no fanout consumers (port_update, security groups, resource pushes).

Standalone (the neutron test binds a port without nova)::

    python -m juice_nova.ovs --url rabbit://... --host H [--up PORT_ID ...] [--serve S]
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

LOG = logging.getLogger(__name__)
CLAIM_TIMEOUT_S = 300.0
WORKERS = 8                      # hosts whose RPCs a process sends at once
REPORTS = "q-reports-plugin"     # neutron_lib.agent.topics.REPORTS
PLUGIN = "q-plugin"              # neutron_lib.agent.topics.PLUGIN
EXCHANGE = "neutron"             # neutron's control_exchange (neutron.common.config)
ISO8601 = "%Y-%m-%dT%H:%M:%S.%f"  # neutron's ISO8601_TIME_FORMAT (report_state's time)
PROCESSING_STEP = 20             # neutron's rpc_resources_processing_step (update_device_list chunks)
# neutron 29's neutron.api.rpc.callbacks.resources.LOCAL_RESOURCE_VERSIONS (the first report's)
RESOURCE_VERSIONS = {"QosPolicy": "1.10", "Trunk": "1.1", "SubPort": "1.0", "Port": "1.11", "Subnet": "1.2",
                     "Network": "1.3", "SecurityGroup": "1.6", "SecurityGroupRule": "1.3", "Log": "1.0",
                     "PortForwarding": "1.3", "ConntrackHelper": "1.0", "AddressGroup": "1.2",
                     "LocalIPAssociation": "1.0", "NDPProxy": "1.0", "Agent": "1.1"}
INVENTORY_DEFAULTS = {"allocation_ratio": 1.0, "min_unit": 1, "step_size": 1, "reserved": 0}


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


def admin_context() -> dict[str, Any]:
    """neutron_lib's ``get_admin_context_without_session()`` as its RPC serializer sends it
    (``RequestContextSerializer.serialize_context``: the context's ``to_dict()``)."""
    return {"user": None, "project_id": None, "system_scope": None, "project": None, "domain": None,
            "user_domain": None, "project_domain": None, "is_admin": True, "read_only": False,
            "show_deleted": False, "auth_token": None, "request_id": f"req-{uuid.uuid4()}",
            "global_request_id": None, "resource_uuid": None, "roles": ["member", "reader", "admin"],
            "user_identity": "- - - - -", "is_admin_project": True, "user_id": None,
            "timestamp": str(utcnow()), "project_name": None, "user_name": None,
            "has_global_access": True, "can_set_project_id": True}


def agent_state(host: str, tunneling_ip: str, bridge_mappings: dict[str, str],
                tunnel_types: list[str]) -> dict[str, Any]:
    """The agent_state neutron-openvswitch-agent 29 reports (its ``__init__``), with the shipped
    defaults of its options (openvswitch firewall: no hybrid plug; no l2population, DVR, QoS
    bandwidths)."""
    return {
        "binary": "neutron-openvswitch-agent", "host": host, "topic": "N/A",
        "configurations": {
            "bridge_mappings": dict(bridge_mappings), "resource_provider_bandwidths": {},
            "resource_provider_inventory_defaults": dict(INVENTORY_DEFAULTS),
            "resource_provider_packet_processing_without_direction": {},
            "resource_provider_packet_processing_with_direction": {},
            "resource_provider_packet_processing_inventory_defaults": dict(INVENTORY_DEFAULTS),
            "resource_provider_hypervisors": {}, "integration_bridge": "br-int",
            "tunnel_types": list(tunnel_types), "tunneling_ip": tunneling_ip, "l2_population": False,
            "arp_responder_enabled": False, "enable_distributed_routing": False,
            "log_agent_heartbeats": False, "extensions": [], "datapath_type": "system",
            "ovs_capabilities": {"datapath_types": ["netdev", "system"],
                                 "iface_types": ["erspan", "geneve", "gre", "internal", "ip6erspan",
                                                 "ip6gre", "lisp", "patch", "stt", "system", "tap",
                                                 "vxlan"]},
            "vhostuser_socket_dir": "/var/run/openvswitch", "ovs_hybrid_plug": False,
            "baremetal_smartnic": False, "devices": 0, "in_distributed_mode": False},
        "resource_versions": dict(RESOURCE_VERSIONS), "agent_type": "Open vSwitch agent",
        "start_flag": True}


class Agent:
    """The simulated neutron-openvswitch-agent of ``hosts`` (see the module doc)."""

    def __init__(self, transport_url: str, hosts: list[str], *, report_interval: float = 30.0,
                 bridge_mappings: dict[str, str] | None = None, tunnel_types: list[str] | None = None,
                 claim_timeout_s: float = CLAIM_TIMEOUT_S) -> None:
        from juice_nova.ovn import encap_ip  # the same distinct never-routed address per host

        self.url, self.hosts = transport_url, list(hosts)
        self.report_interval, self.claim_timeout_s = report_interval, claim_timeout_s
        self.tunnel_types = list(tunnel_types or ["vxlan"])
        self.states = {h: agent_state(h, encap_ip(h), bridge_mappings or {}, self.tunnel_types)
                       for h in self.hosts}
        self.contexts = {h: admin_context() for h in self.hosts}  # the agent's, made once
        self.devices = {h: 0 for h in self.hosts}
        self.transport: Any = None
        self.state_rpc: Any = None
        self.plugin_rpc: Any = None
        self._up: dict[str, dict[str, float]] = {h: {} for h in self.hosts}   # host -> port -> deadline
        self._down: dict[str, set[str]] = {h: set() for h in self.hosts}
        self._host_of: dict[str, str] = {}
        self._busy: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=min(WORKERS, max(1, len(self.hosts))),
                                        thread_name_prefix="juice-ovs-agent")
        self.reported = 0
        self.up = 0

    def connect(self) -> None:
        import oslo_messaging as messaging
        from oslo_config import cfg

        conf = cfg.ConfigOpts()  # its own: nothing of nova-compute's configuration is touched
        conf([], project="neutron", default_config_files=[], default_config_dirs=[])
        # oslo.messaging registers its client's metrics and tracing options on the global CONF only
        for module, group in (("oslo_messaging._metrics.client", "oslo_messaging_metrics"),
                              ("oslo_messaging._tracing.client", "oslo_messaging_tracing")):
            try:
                opts = getattr(importlib.import_module(module), group)
            except (ImportError, AttributeError):  # an oslo.messaging without them
                continue
            conf.register_opts(opts, group=group)
        self.transport = messaging.get_rpc_transport(conf, url=self.url)
        self.state_rpc = messaging.get_rpc_client(
            self.transport, messaging.Target(exchange=EXCHANGE, topic=REPORTS, version="1.4", namespace=None))
        self.plugin_rpc = messaging.get_rpc_client(
            self.transport, messaging.Target(exchange=EXCHANGE, topic=PLUGIN, version="1.9"))

    def start(self) -> Agent:
        """Connect, report every host's state once (as each agent's first report), sync its
        tunnel endpoint, then start the report and device threads."""
        self.connect()
        for h in self.hosts:
            self._pool.submit(self._first, h)
        for name, fn in (("juice-ovs-reports", self._reports), ("juice-ovs-devices", self._devices)):
            threading.Thread(target=fn, name=name, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.transport is not None:
            self.transport.cleanup()

    def agent_id(self, host: str) -> str:
        return f"ovs-agent-{host}"  # the real agent's

    # ---- state reports ----------------------------------------------------------------------
    def report(self, host: str) -> Any:
        """One ``report_state`` call for ``host`` (PluginReportStateAPI.report_state, use_call)."""
        state = self.states[host]
        state["configurations"]["devices"] = self.devices[host]
        state["uuid"] = str(uuid.uuid4())
        cctxt = self.state_rpc.prepare(timeout=self.report_interval)
        ret = cctxt.call(self.contexts[host], "report_state", agent_state={"agent_state": state},
                         time=utcnow().strftime(ISO8601))
        state.pop("resource_versions", None)  # only at start, as the real agent
        state.pop("start_flag", None)         # dropped once its first loop iteration is done
        self.reported += 1
        return ret

    def _first(self, host: str) -> None:
        try:
            self.report(host)
        except Exception:
            LOG.exception("juice simulated ovs agent: first state report of %s failed", host)
        for t in self.tunnel_types:
            try:
                self.plugin_rpc.prepare(version="1.4").call(
                    self.contexts[host], "tunnel_sync", tunnel_ip=self.states[host]["configurations"]
                    ["tunneling_ip"], tunnel_type=t, host=host)
            except Exception:
                LOG.exception("juice simulated ovs agent: tunnel_sync of %s failed", host)
        LOG.info("juice simulated ovs agent: %s reported and synced its %s endpoint", host,
                 "/".join(self.tunnel_types))

    def _reports(self) -> None:
        """Each host every report_interval, the hosts spread over the interval; a host whose
        report is still in flight is not reported again (one agent's report loop)."""
        n = len(self.hosts)
        t0 = time.monotonic()
        due = {h: t0 + self.report_interval * (1 + i / n) for i, h in enumerate(self.hosts)}
        inflight: set[str] = set()
        lock = threading.Lock()

        def one(h: str) -> None:
            try:
                self.report(h)
            except Exception:
                LOG.exception("juice simulated ovs agent: reporting the state of %s failed", h)
            finally:
                with lock:
                    inflight.discard(h)

        while not self._stop.is_set():
            now = time.monotonic()
            for h, t in due.items():
                if t <= now:
                    due[h] = t + self.report_interval
                    with lock:
                        if h in inflight:
                            continue
                        inflight.add(h)
                    try:
                        self._pool.submit(one, h)
                    except RuntimeError:  # the pool is shut down: stopping
                        return
            self._stop.wait(max(0.05, min(due.values()) - time.monotonic()))

    # ---- devices ----------------------------------------------------------------------------
    def plug(self, port_id: str, host: str) -> None:
        """The OVS port of ``port_id`` appeared on ``host``'s br-int (async)."""
        with self._lock:
            self._host_of[port_id] = host
            self._down[host].discard(port_id)
            self._up[host][port_id] = time.monotonic() + self.claim_timeout_s
        self._wake.set()

    def unplug(self, port_id: str, host: str | None = None) -> None:
        """The OVS port is gone: reported down (async)."""
        with self._lock:
            h = host or self._host_of.get(port_id) or self.hosts[0]
            self._host_of.pop(port_id, None)
            self._up.get(h, {}).pop(port_id, None)
            self._down.setdefault(h, set()).add(port_id)
        self._wake.set()

    def _devices(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.25)
            self._wake.clear()
            with self._lock:
                todo = [h for h in self.hosts if h not in self._busy and (self._up[h] or self._down[h])]
                self._busy.update(todo)
            for h in todo:
                try:
                    self._pool.submit(self._sync, h)
                except RuntimeError:
                    return

    def _sync(self, host: str) -> None:
        """One iteration of ``host``'s agent loop: new devices' details, then up/down."""
        try:
            with self._lock:
                new, gone = list(self._up[host]), sorted(self._down[host])
                self._down[host].clear()
            ready: list[str] = []
            ctx = self.contexts[host]
            if new:
                res = self.plugin_rpc.prepare(version="1.5").call(
                    ctx, "get_devices_details_list_and_failed_devices", devices=new,
                    agent_id=self.agent_id(host), host=host)
                ready = [d["device"] for d in res.get("devices", []) if "port_id" in d]
            for i in range(0, max(len(ready), len(gone)), PROCESSING_STEP):
                ret = self.plugin_rpc.prepare(version="1.9").call(
                    ctx, "update_device_list", devices_up=ready[i:i + PROCESSING_STEP],
                    devices_down=gone[i:i + PROCESSING_STEP], agent_id=self.agent_id(host), host=host,
                    refresh_tunnels=False)
                for d in ret.get("failed_devices_up", []):
                    ready.remove(d)
            now = time.monotonic()
            with self._lock:
                for p in ready:
                    self._up[host].pop(p, None)
                for p, deadline in list(self._up[host].items()):
                    if now > deadline:
                        LOG.error("juice simulated ovs agent: port %s not bound to %s after %.0f s",
                                  p, host, self.claim_timeout_s)
                        del self._up[host][p]
                self.devices[host] = max(0, self.devices[host] + len(ready) - len(gone))  # on br-int
                self.up += len(ready)
            for p in ready:
                LOG.info("juice simulated ovs agent: port %s up on %s", p, host)
            if self._up[host]:
                time.sleep(0.5)  # not bound yet: asked again at the next iteration
        except Exception:
            LOG.exception("juice simulated ovs agent: device RPCs of %s failed (retrying)", host)
            time.sleep(1.0)
        finally:
            with self._lock:
                self._busy.discard(host)
            self._wake.set()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="juice_nova.ovs", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="neutron's transport_url")
    p.add_argument("--host", action="append", required=True)
    p.add_argument("--up", action="append", default=[], help="PORT_ID[@HOST] (default: the first host)")
    p.add_argument("--serve", type=float, default=0.0, help="keep reporting for S seconds")
    p.add_argument("--report-interval", type=float, default=30.0)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    agent = Agent(a.url, a.host, report_interval=a.report_interval, bridge_mappings={"public": "br-ex"},
                  claim_timeout_s=60).start()
    deadline = time.monotonic() + 60
    while agent.reported < len(a.host) and time.monotonic() < deadline:
        time.sleep(0.05)
    for c in a.up:
        port, _, host = c.partition("@")
        agent.plug(port, host or a.host[0])
    while agent.up < len(a.up) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(a.serve)
    agent.stop()
    print(f"reported {agent.reported}, up {agent.up} of {len(a.up)}", flush=True)
    return 0 if agent.up == len(a.up) and agent.reported >= len(a.host) else 1


if __name__ == "__main__":
    raise SystemExit(main())
