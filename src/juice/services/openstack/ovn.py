"""OVN's central services: Debian's ovn-central (the real NB and SB ovsdb-servers and
ovn-northd, OVN 23.03 / Open vSwitch 3.1) as three processes in one site, for ML2/OVN.

    ovn = OVN(lab, progress, site=1)   # pure: nothing started
    ovn.up()                  # databases created from the packaged schemas, processes, health
    ovn.nb_url()              # "tcp:10.210.1.2:6641" (neutron's [ovn] ovn_nb_connection)
    ovn.sb_url()              # "tcp:10.210.1.2:6642" (neutron's and the simulated chassis')
    ovn.sbctl("list", "Chassis")  # ovn-sbctl --db=<sb> ... run in the site, its output
    ovn.stop()                # northd, then both ovsdb-servers, by recorded pid (TERM, then KILL)

Each ovsdb-server runs in the foreground (no ``--detach``: the spawned process IS the server),
serves its database file on the site's address (``--remote=ptcp:PORT:IP``) and its control
socket in the service's directory (``--unixctl``); ovn-northd connects to both over TCP and
reports ``Status: active`` through ``ovn-appctl`` once it holds its lock. The databases are
new at every deployment (``ovsdb-tool create`` from ``/usr/share/ovn/*.ovsschema``), standalone
(not clustered: Debian's default, one server each). Everything logs to the console, captured in
its log file; syslog is off. The packaged systemd units are never started (scripts/setup.sh
disables them).

Files: ``<root>/s<site>/ovn/{nb.db, sb.db, ovsdb-nb.log, ovsdb-sb.log, ovn-northd.log, *.ctl}``.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from juice.errors import ServiceError, UserError
from juice.lab.place import Place
from juice.services.base import Progress, ServerRecord, Service, Sites, quiet
from juice.services.deviations import Deviation, dev
from juice.services.process import Server, port_open, spawn, stop_all

NB_PORT = 6641
SB_PORT = 6642
SCHEMAS = Path("/usr/share/ovn")
TOOLS = ("/usr/sbin/ovsdb-server", "/usr/bin/ovsdb-tool", "/usr/bin/ovn-northd", "/usr/bin/ovn-nbctl",
         "/usr/bin/ovn-sbctl", "/usr/bin/ovn-appctl")
LOGGING = ["-vconsole:info", "-vsyslog:off", "-vfile:off"]
DBS = {"nb": ("OVN_Northbound", NB_PORT), "sb": ("OVN_Southbound", SB_PORT)}


# How the simulated ovn-controller (juice_nova.ovn, in each nova-compute process) differs from a
# hypervisor's ovn-controller 23.03 (option, Juice's, the real one's, why): recorded as deviations.
SIMULATED_CONTROLLER: list[tuple[str, str, str, str]] = [
    ("process", "simulated in each nova-compute process (one southbound connection per process)",
     "ovn-controller + ovs-vswitchd on every hypervisor",
     "the nodes are simulated (no guest, no bridge): what the control plane sees of a node's network "
     "agent is kept (its chassis, its claims, its nb_cfg replies)"),
    ("chassis per host", "one per nova service host (isolation shared: every node of a process "
     "shares its host's chassis)", "one per hypervisor",
     "nova binds a port to the instance's service host; a chassis per node would match no binding"),
    ("Port_Binding claim", "at plug_vifs, chassis and up=true in one transaction",
     "when the OVS interface with the port's iface-id appears, up=true once its flows are installed",
     "no OVS database nor OpenFlow: the flow computation time (milliseconds to seconds at scale) is "
     "not simulated"),
    ("southbound monitoring", "Chassis, Chassis_Private, Encap, SB_Global.nb_cfg and 3 columns of "
     "every Port_Binding", "conditional monitoring of the rows its chassis needs (ovn-monitor-all false)",
     "one replica per compute process is what ovsdbapp offers simply; the SB's load per chassis "
     "differs from a real one's"),
    ("flows, tunnels, DHCP, metadata", "none", "logical flows, geneve tunnels, OVN DHCP answers",
     "no guest sends a packet"),
    ("Encap ip", "a distinct address of 100.64.0.0/10 per chassis (never routed)",
     "the hypervisor's tunnel endpoint address",
     "the SB allows one chassis per (type, address) and the simulated nodes of a site share its "
     "address; no tunnel is ever built"),
]


class OVN(Service):
    """ovn-central in ``site`` (see the module doc)."""

    kind = "ovn"

    def __init__(self, lab: Sites, progress: Progress = quiet, *, site: int = 1) -> None:
        super().__init__(lab, progress)
        if site not in lab.sites:
            raise UserError(f"ovn.site: {site} is not a site of this lab (1..{len(lab.sites)})")
        self.site = site
        self.servers: dict[str, Server] = {}  # "nb", "sb", "northd"
        self.timings: dict[str, float] = {}

    @property
    def place(self) -> Place:
        return self.lab.place(self.site)

    @property
    def home(self) -> Path:
        return self.place.root / f"s{self.site}" / "ovn"

    def log(self, name: str) -> Path:
        return self.home / (f"ovsdb-{name}.log" if name in DBS else "ovn-northd.log")

    def nb_url(self) -> str:
        return f"tcp:{self.lab.site_ip(self.site)}:{NB_PORT}"

    def sb_url(self) -> str:
        return f"tcp:{self.lab.site_ip(self.site)}:{SB_PORT}"

    def _env(self) -> dict[str, str]:
        # the OVS tools' run/log/db directories: nothing under /var/run/ovn or /etc/ovn
        h = str(self.home)
        return {"OVS_RUNDIR": h, "OVS_LOGDIR": h, "OVS_DBDIR": h, "OVN_RUNDIR": h, "OVN_LOGDIR": h,
                "OVN_DBDIR": h, "OVS_SYSCONFDIR": h, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}

    def configure(self) -> None:
        place = self.place
        r = place.run(["sh", "-c", 'for f in "$@"; do test -x "$f" || { echo "$f"; exit 1; }; done', "sh",
                       *TOOLS])
        if not r.ok:
            raise ServiceError(f"{place.label}: {r.out.strip() or 'ovn-central'} is missing: install "
                               "Debian's ovn-central (scripts/setup.sh does)")
        ip = self.lab.site_ip(self.site)
        for _, port in DBS.values():
            if port_open(place, ip, port):
                raise ServiceError(f"ovn in site {self.site}: port {port} is already taken "
                                   "(another ovsdb-server still running?)")
        place.remove(self.home)
        place.mkdir(self.home)
        for name in DBS:
            r = place.run(["/usr/bin/ovsdb-tool", "create", str(self.home / f"{name}.db"),
                           str(SCHEMAS / f"ovn-{name}.ovsschema")], env=self._env())
            if not r.ok:
                raise ServiceError(f"ovn in site {self.site}: ovsdb-tool create {name}.db failed: "
                                   f"{(r.err or r.out).strip()[-300:]}")

    def start(self) -> None:
        ip = self.lab.site_ip(self.site)
        for name, (_, port) in DBS.items():
            argv = ["/usr/sbin/ovsdb-server", f"--remote=ptcp:{port}:{ip}",
                    f"--unixctl={self.home / f'ovsdb-{name}.ctl'}", *LOGGING, str(self.home / f"{name}.db")]
            self.servers[name] = spawn(self.place, argv, log=self.log(name), env=self._env(),
                                       cwd=self.home, what=f"ovsdb-server {name.upper()} in site {self.site}")
        argv = ["/usr/bin/ovn-northd", f"--ovnnb-db={self.nb_url()}", f"--ovnsb-db={self.sb_url()}",
                f"--unixctl={self.home / 'ovn-northd.ctl'}", *LOGGING]
        self.servers["northd"] = spawn(self.place, argv, log=self.log("northd"), env=self._env(),
                                       cwd=self.home, what=f"ovn-northd in site {self.site}")

    def _northd_active(self) -> bool:
        r = self.place.run(["/usr/bin/ovn-appctl", "-t", str(self.home / "ovn-northd.ctl"), "status"],
                           env=self._env(), timeout=5)
        return r.ok and "active" in r.out

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Both databases accept connections on the site's address, northd is active."""
        t0 = time.monotonic()
        ip = self.lab.site_ip(self.site)
        for name, (_, port) in DBS.items():
            self.servers[name].wait_ready(lambda p=port: port_open(self.place, ip, p), timeout,  # type: ignore[misc]
                                          interval=0.1)
        self.servers["northd"].wait_ready(self._northd_active, max(5.0, timeout - (time.monotonic() - t0)),
                                          interval=0.2)
        self.timings["healthy_s"] = round(time.monotonic() - t0, 2)
        self.progress(f"ovn: NB, SB and northd up in site {self.site} ({self.timings['healthy_s']:.1f} s)")

    def sbctl(self, *args: str, timeout: float = 30.0) -> str:
        """``ovn-sbctl --db=<sb> args...`` in the site; its output (ServiceError on failure)."""
        return self._ctl("ovn-sbctl", self.sb_url(), args, timeout)

    def nbctl(self, *args: str, timeout: float = 30.0) -> str:
        return self._ctl("ovn-nbctl", self.nb_url(), args, timeout)

    def _ctl(self, tool: str, db: str, args: tuple[str, ...], timeout: float) -> str:
        r = self.place.run([f"/usr/bin/{tool}", f"--db={db}", f"--timeout={int(timeout)}", *args],
                           env=self._env(), timeout=timeout + 5)
        if not r.ok:
            raise ServiceError(f"{tool} {' '.join(args)}: {(r.err or r.out).strip()[-300:]}")
        return r.out

    def stop(self) -> None:
        if not self.servers:
            return
        northd = self.servers.pop("northd", None)
        if northd is not None:
            stop_all([northd], grace_s=10, sig=signal.SIGTERM)
        stop_all(self.servers.values(), grace_s=10, sig=signal.SIGTERM)
        self.servers.clear()
        self.progress("ovn: stopped")

    def kill(self, site: int) -> dict[str, Any]:
        if site != self.site or not self.servers:
            raise ServiceError(f"no running ovn in site {site}")
        pids = {k: s.kill() for k, s in self.servers.items()}
        self.servers.clear()
        return {"pid": pids.get("sb"), "killed": pids}

    def pids(self) -> list[int]:
        return [s.pid for s in self.servers.values() if s.pid is not None]

    def records(self) -> list[ServerRecord]:
        ports = {"nb": NB_PORT, "sb": SB_PORT, "northd": 0}
        names = {"nb": "ovsdb-server-nb", "sb": "ovsdb-server-sb", "northd": "ovn-northd"}
        return [srv.record(names[k], port=ports[k], datadir=self.home) for k, srv in self.servers.items()]

    def logs(self) -> list[tuple[Place, Path]]:
        return [(self.place, self.log(k)) for k in ("nb", "sb", "northd")]

    def deviations(self) -> list[Deviation]:
        """ovn-central keeps its packaged defaults; what differs is the nodes' side: each
        hypervisor's ovn-controller is SIMULATED inside the nova-compute process
        (``juice_nova.ovn``), as listed here (``SIMULATED_CONTROLLER``)."""
        return [dev("ovn-controller", option, value, default, why)
                for option, value, default, why in SIMULATED_CONTROLLER]

    def facts(self) -> dict[str, Any]:
        r = self.place.run(["/usr/bin/ovn-northd", "--version"], env=self._env())
        version = r.out.split()[1] if r.ok and len(r.out.split()) > 1 else "?"
        return {"ovn_version": version, "site": self.site, "nb": self.nb_url(), "sb": self.sb_url()}
