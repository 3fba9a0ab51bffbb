"""SIMULATED ovn-controller: what a hypervisor's ovn-controller does in OVN's southbound
database for the boot path, without Open vSwitch, flows or tunnels.

One ``Chassis`` object serves every nova service host of one nova-compute process (one chassis
per host name: the process's host when its nodes share it, each node's with ``fork``), over ONE
southbound connection (ovsdbapp's IDL, the library neutron uses) per process:

- ``register()``: per host, a ``Chassis`` row as ovn-controller writes it (``name`` = its
  system-id, here uuid5 of the host name; ``hostname`` = the host, as nova binds ports to it;
  one geneve ``Encap``; ``other_config`` with the features ovn-controller
  23.03 announces, ``port-up-notif`` among them) and its ``Chassis_Private`` (``nb_cfg``);
- a heartbeat thread copies ``SB_Global.nb_cfg`` into each ``Chassis_Private.nb_cfg`` (with
  ``nb_cfg_timestamp``) when it changes, as ovn-controller does after a full recompute: neutron
  counts the chassis' "OVN Controller agent" alive from it and refuses to bind ports to a dead one;
- ``plug(port_id, host)``: what ovn-controller does when an OVS interface with
  ``external_ids:iface-id=<port>`` appears on br-int: it claims the ``Port_Binding`` (``chassis``
  = its chassis, ``up`` = true once the flows are installed), northd then sets the logical
  switch port up in the NB, neutron sets the port ACTIVE and sends nova ``network-vif-plugged``.
  Claims are made by one thread, as soon as the ``Port_Binding`` exists (northd creates it from
  the NB port), no later than ``claim_timeout_s``;
- ``unplug(port_id)``: the interface removed: the binding released (``chassis`` empty, ``up`` false).

Deviations from ovn-controller (docs/nova-simulation.md): no OVS database, no flows, no
tunnels, no conditional monitoring (the process replicates three columns of every
Port_Binding); the claim is immediate (no flow computation time); ``up`` is set with the claim;
the Encap's address is a distinct one of 100.64.0.0/10 per chassis (``encap_ip``: the SB allows
one chassis per (type, address), and the simulated nodes of a site share its address; the site's
own address is in the chassis' ``external_ids:juice-site-ip``).

Standalone (the neutron test binds a port without nova)::

    python -m juice_nova.ovn --sb tcp:IP:6642 --ip IP --host H [--claim PORT_ID ...] [--serve S]
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import re
import threading
import time
import uuid
from typing import Any

LOG = logging.getLogger(__name__)
NAMESPACE = uuid.UUID("6a1c5c3e-8f61-5f0e-9a3c-7d6a0e4e2b11")  # the simulated system-ids'
CLAIM_TIMEOUT_S = 300.0
# what ovn-controller 23.03 writes in Chassis.other_config (no bridge mappings: geneve only)
OTHER_CONFIG = {"datapath-type": "system", "iface-types": "geneve,internal,system,tap,vxlan",
                "ovn-bridge-mappings": "", "ovn-chassis-mac-mappings": "", "ovn-cms-options": "",
                "ovn-enable-lflow-cache": "true", "ovn-monitor-all": "false", "is-interconn": "false",
                "port-up-notif": "true", "ct-no-masked-label": "true", "fdb-timestamp": "true",
                "mac-binding-timestamp": "true", "ovn-ct-lb-related": "true"}
TABLES: dict[str, list[str] | None] = {"Chassis": None, "Chassis_Private": None, "Encap": None,
                                       "SB_Global": ["nb_cfg"],
                                       "Port_Binding": ["logical_port", "chassis", "up"]}


def system_id(host: str) -> str:
    """The simulated chassis' name (ovn-controller's system-id) for host ``host``."""
    return str(uuid.uuid5(NAMESPACE, host))


def encap_ip(host: str) -> str:
    """A distinct tunnel address per simulated chassis, in 100.64.0.0/10 (never routed: no tunnel
    is ever built): from the host's numbers (``juice-c<i>``, ``juice-c<i>-n<j>``: unique up to
    512 processes x 8191 nodes), else from a hash of the name."""
    m = re.fullmatch(r".*-c(\d+)(?:-n(\d+))?", host)
    if m:
        n = int(m.group(1)) * 8192 + (int(m.group(2)) + 1 if m.group(2) is not None else 0)
    else:
        n = int(uuid.uuid5(NAMESPACE, host).hex, 16)
    n %= 1 << 22
    return str(ipaddress.IPv4Address((100 << 24) | (64 << 16) + n))


def now_ms() -> int:
    return int(time.time() * 1000)


class Chassis:
    """The simulated ovn-controller of ``hosts`` (see the module doc)."""

    def __init__(self, sb: str, ip: str, hosts: list[str], *,
                 claim_timeout_s: float = CLAIM_TIMEOUT_S) -> None:
        self.sb, self.ip, self.hosts = sb, ip, list(hosts)
        self.claim_timeout_s = claim_timeout_s
        self.api: Any = None
        self._pending: dict[str, tuple[str, float]] = {}  # port -> (chassis name, deadline)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.claimed = 0

    def connect(self, timeout: float = 60.0) -> None:
        from ovsdbapp.backend.ovs_idl import connection, idlutils
        from ovsdbapp.schema.ovn_southbound import impl_idl

        helper = idlutils.get_schema_helper(self.sb, "OVN_Southbound")
        for table, columns in TABLES.items():
            if columns is None:
                helper.register_table(table)
            else:
                helper.register_columns(table, columns)
        idl = connection.OvsdbIdl(self.sb, helper)
        self.api = impl_idl.OvnSbApiIdlImpl(connection.Connection(idl, timeout=timeout))

    def start(self) -> Chassis:
        """Connect, register every host's chassis, start the heartbeat and claim threads."""
        self.connect()
        self.register()
        for name, fn in (("juice-ovn-heartbeat", self._heartbeat), ("juice-ovn-claims", self._claims)):
            threading.Thread(target=fn, name=name, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _nb_cfg(self) -> int:
        rows = list(self.api.tables["SB_Global"].rows.values())
        return int(rows[0].nb_cfg) if rows else 0

    def _private(self, name: str) -> Any:
        return next((r for r in self.api.tables["Chassis_Private"].rows.values() if r.name == name), None)

    def register(self) -> None:
        """A Chassis (+ Encap) and a Chassis_Private per host; existing ones (a restarted
        process: ovn-controller keeps its system-id) are updated."""
        cfg = self._nb_cfg()
        for host in self.hosts:
            name = system_id(host)
            rows = self.api.db_find_rows("Chassis", ("name", "=", name)).execute(check_error=True)
            if not rows:
                self.api.chassis_add(name, ["geneve"], encap_ip(host), hostname=host,
                                     other_config=OTHER_CONFIG,
                                     external_ids={"juice-site-ip": self.ip}).execute(check_error=True)
            else:
                self.api.db_set("Chassis", rows[0].uuid, ("hostname", host),
                                ("other_config", OTHER_CONFIG)).execute(check_error=True)
            chassis = self.api.db_find_rows("Chassis", ("name", "=", name)).execute(check_error=True)[0]
            priv = self._private(name)
            if priv is None:
                self.api.db_create("Chassis_Private", name=name, chassis=chassis.uuid, nb_cfg=cfg,
                                   nb_cfg_timestamp=now_ms(), external_ids={}).execute(check_error=True)
            else:
                self.api.db_set("Chassis_Private", priv.uuid, ("chassis", chassis.uuid), ("nb_cfg", cfg),
                                ("nb_cfg_timestamp", now_ms())).execute(check_error=True)
        LOG.info("juice simulated ovn-controller: %d chassis registered in %s", len(self.hosts), self.sb)

    def _heartbeat(self) -> None:
        names = [system_id(h) for h in self.hosts]
        while not self._stop.wait(1.0):
            try:
                cfg = self._nb_cfg()
                with self.api.transaction(check_error=True) as txn:
                    for name in names:
                        priv = self._private(name)
                        if priv is not None and priv.nb_cfg != cfg:
                            txn.add(self.api.db_set("Chassis_Private", priv.uuid, ("nb_cfg", cfg),
                                                    ("nb_cfg_timestamp", now_ms())))
            except Exception:  # the connection comes back by itself; try at the next tick
                LOG.exception("juice simulated ovn-controller: heartbeat failed")

    def plug(self, port_id: str, host: str) -> None:
        """The VIF of ``port_id`` appeared on ``host``'s bridge: claim its binding (async)."""
        with self._lock:
            self._pending[port_id] = (system_id(host), time.monotonic() + self.claim_timeout_s)
        self._wake.set()

    def unplug(self, port_id: str, host: str | None = None) -> None:
        """The VIF is gone: release the binding (if the port still exists; ``host``: unused,
        the chassis is the binding's)."""
        with self._lock:
            self._pending.pop(port_id, None)
        try:
            self.api.lsp_unbind(port_id, if_exists=True).execute(check_error=True)
        except Exception:
            LOG.exception("juice simulated ovn-controller: releasing port %s failed", port_id)

    def _claims(self) -> None:
        from ovsdbapp.backend.ovs_idl import idlutils

        while not self._stop.is_set():
            self._wake.wait(0.05)
            self._wake.clear()
            with self._lock:
                pending = dict(self._pending)
            for port, (chassis, deadline) in pending.items():
                try:
                    idlutils.row_by_value(self.api.idl, "Port_Binding", "logical_port", port)
                except idlutils.RowNotFound:
                    if time.monotonic() > deadline:
                        LOG.error("juice simulated ovn-controller: no Port_Binding for %s after %.0f s",
                                  port, self.claim_timeout_s)
                        self._drop(port)
                    continue
                try:
                    self.api.lsp_bind(port, chassis, may_exist=True).execute(check_error=True)
                    self.claimed += 1
                    LOG.info("juice simulated ovn-controller: claimed port %s for chassis %s", port, chassis)
                    self._drop(port)
                except Exception:
                    LOG.exception("juice simulated ovn-controller: claiming %s failed (retrying)", port)

    def _drop(self, port: str) -> None:
        with self._lock:
            self._pending.pop(port, None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="juice_nova.ovn", description=__doc__.split("\n\n")[0])
    p.add_argument("--sb", required=True)
    p.add_argument("--ip", required=True)
    p.add_argument("--host", action="append", required=True)
    p.add_argument("--claim", action="append", default=[], help="PORT_ID[@HOST] (default: the first host)")
    p.add_argument("--serve", type=float, default=0.0, help="keep the heartbeat up for S seconds")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    ch = Chassis(a.sb, a.ip, a.host, claim_timeout_s=60).start()
    for c in a.claim:
        port, _, host = c.partition("@")
        ch.plug(port, host or a.host[0])
    deadline = time.monotonic() + 60
    while ch.claimed < len(a.claim) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(a.serve)
    ch.stop()
    print(f"claimed {ch.claimed} of {len(a.claim)}", flush=True)
    return 0 if ch.claimed == len(a.claim) else 1


if __name__ == "__main__":
    raise SystemExit(main())
