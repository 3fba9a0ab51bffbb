"""Simulated compute hosts: nova 34's own nova-compute processes, each serving N fake nodes
through Juice's multi-node fake driver (``plugins/juice-nova``), placed in lab sites.

    comp = NovaComputes(lab, nova, progress, ComputeOptions(Computes(sites=[2, 3], nodes_per_process=500)))
    comp.up()                # files, processes, services up, discover_hosts, every node in placement
    comp.node_uuids()        # the deterministic node UUIDs (uuid5 of host and node name)
    comp.rss()               # {"juice-c1": bytes, ...} (fork: also each node's process)
    comp.memory()            # {"juice-c1-n0000": {"rss", "pss", "uss"}, ...} from smaps_rollup
    comp.stop()              # every nova-compute by recorded pid (TERM, then KILL)

Per process (service host ``juice-c<i>``), under ``<root>/s<site>/nova/juice-c<i>/`` at its site's
place (its state_path; a namespace here or an SSH host, ``juice.lab.place``):
``nova.conf`` (role compute: ``compute_driver = juice_fake.MultiNodeFakeDriver``, reserved
resources 0, allocation ratios 1.0, so placement's capacity is exactly the nodes' sizes),
``juice-nodes.json`` (its nodes, ``nova_conf.render_nodes``), ``compute_id`` (written before the
first start: a restarted compute refuses to start without one once its service record has node
identity) and its log. The process is ``juice-nova-compute`` (nova-compute with the driver
registered in ``nova.virt``); spawn goes through nova's real build path (claims, placement
allocations, instance records), the driver only skips the guest.

``wait_healthy`` waits for every compute service to be up, runs ``nova-manage cell_v2
discover_hosts --by-service`` ONCE (never in parallel: nova does not lock the host mappings),
then waits until placement lists every node as a resource provider. ``timings`` keeps
``services_up_s``, ``discover_s`` and ``registered_s`` (from start to the last node in placement).

``isolation: fork`` (``ComputeOptions``): each process is ``juice-nova-compute --fork-nodes``
(``juice_nova.fork``), a parent that imports nova once and forks one nova-compute per node, each
its own nova service host ``<process host>-n<j>`` with its own state_path (nova.conf,
1-node juice-nodes.json, compute_id, log) beside the process's. Juice records and stops the
PARENT by pid (the children die with it); the parent writes its children's pids to
``<process home>/children.json``, read by ``pids``, ``rss`` and ``memory``.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from juice.errors import ServiceError, UserError
from juice.lab.place import Place
from juice.services.base import Progress, ServerRecord, Service, Sites, quiet
from juice.services.deviations import Deviation
from juice.services.openstack import simwait
from juice.services.openstack.nova import Nova, copy_logs
from juice.services.openstack.nova_conf import (
    ComputeOptions,
    backend_env,
    render_node_of,
    render_nova_conf,
    service_id,
)
from juice.services.openstack.nova_settings import compute_deviations
from juice.services.openstack.os_api import check_venv, os_env, venv_bin
from juice.services.process import Server, memory, rss, spawn, stop_all

NODES_FILE = "juice-nodes.json"  # juice_nova.virt.NODES_FILE
PIDS_FILE = "children.json"      # juice_nova.fork: the forked children's pids
# The plugin's source in this repository: shipped to every compute's place and put first on
# its PYTHONPATH, so the driver that runs is the one of this Juice (an SSH host needs only the
# OpenStack venv with nova). Without it (Juice installed from a wheel), the venv's own install.
PLUGIN = Path(__file__).resolve().parents[4] / "plugins" / "juice-nova" / "src" / "juice_nova"


def read_pids(text: str) -> dict[str, int]:
    """The children's pids ({service host: pid}) of a ``children.json`` ({} when unreadable:
    not written yet, or a partial file)."""
    try:
        doc: Any = json.loads(text)
        return {str(h): int(p) for h, p in doc["children"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}


class NovaComputes(Service):
    """nova-compute processes with simulated nodes (see the module doc)."""

    kind = "nova-compute"

    def __init__(self, lab: Sites, nova: Nova, progress: Progress = quiet,
                 options: ComputeOptions | None = None, *, image_download: bool = False) -> None:
        """``image_download``: each node downloads an instance's image through glance-api the
        first time it boots it and uses its own copy afterwards (the nodes file's ``image``
        entry: ``juice_nova.virt``); off: no node reads the image (the stand-in has none)."""
        super().__init__(lab, progress)
        self.nova = nova
        self.opts = options or ComputeOptions()
        self.image_download = image_download
        # OVN's southbound DB (a deployment with the real neutron, ML2/OVN): each process then plays
        # its hosts' ovn-controller (the nodes file's ``ovn`` entry: juice_nova.virt, juice_nova.ovn)
        self.ovn_sb: str | None = None
        # ML2/OVS instead: the nodes file's ``ovs`` entry per site (neutron_ovs.NeutronOVS.agent_config):
        # each process plays its hosts' neutron-openvswitch-agent (juice_nova.ovs)
        self.ovs_agent: Callable[[int], dict[str, Any]] | None = None
        for s in self.opts.sites:
            if s not in lab.sites:
                raise UserError(f"computes.sites: {s} is not a site of this lab (1..{len(lab.sites)})")
        self.servers: dict[str, Server] = {}
        self.timings: dict[str, float] = {}
        self._t_start = 0.0
        self._discovered = False

    def site_of(self, host: str) -> int:
        """The site of a process host or a nova service host."""
        return {**dict(self.opts.hosts()), **dict(self.opts.service_hosts())}[host]

    def place(self, host: str) -> Place:
        return self.lab.place(self.site_of(host))

    def home(self, host: str) -> Path:
        return self.nova.state_root(self.site_of(host)) / host

    def log(self, host: str) -> Path:
        return self.home(host) / f"{host}.log"

    def nodes(self, host: str) -> list[dict[str, Any]]:
        """The nodes of nova service host ``host``."""
        nodes: list[dict[str, Any]] = render_node_of(self.opts, host)["nodes"]
        return nodes

    def node_uuids(self) -> list[str]:
        return [n["uuid"] for h, _ in self.opts.service_hosts() for n in self.nodes(h)]

    def configure(self) -> None:
        for s in sorted(set(self.opts.sites)):
            check_venv(self.lab.place(s), "juice-nova-compute", "python3")
            self._ship_plugin(s)
        for host, site in self.opts.hosts():
            place = self.lab.place(site)
            place.remove(self.home(host))  # a fresh deployment: no state of an earlier one
            place.mkdir(self.home(host))
            for svc in self.opts.services_of(host):
                home = self.home(svc)
                if svc != host:
                    place.remove(home)
                place.mkdir(home / "locks")
                place.write(home / "nova.conf", render_nova_conf(
                    "compute", self.nova.context(site), self.nova.opts, host=svc,
                    my_ip=self.lab.site_ip(site), comp=self.opts), mode=0o600)
                image = {"image": {"download": "node_cache"}} if self.image_download else {}
                if self.ovn_sb:
                    image["ovn"] = {"sb": self.ovn_sb, "ip": self.lab.site_ip(site)}
                if self.ovs_agent is not None:  # with RabbitMQ's credentials: 0600, as nova.conf
                    image["ovs"] = self.ovs_agent(site)
                place.write(home / NODES_FILE, json.dumps({**render_node_of(self.opts, svc), **image},
                                                          indent=1), mode=0o600)
                place.write(home / "compute_id", service_id(svc) + "\n")
        self.progress(f"nova-compute: {len(self.opts.sites)} process(es) x "
                      f"{self.opts.nodes_per_process} node(s) configured"
                      + (" (fork: one nova-compute per node)" if self.opts.forked else ""))

    def plugin_dir(self, site: int) -> Path:
        """Where the juice-nova plugin's source goes at ``site``'s place (on PYTHONPATH)."""
        return self.nova.state_root(site) / "juice-nova"

    def _ship_plugin(self, site: int) -> None:
        place, dest = self.lab.place(site), self.plugin_dir(site)
        place.remove(dest)
        if PLUGIN.is_dir():
            for f in sorted(PLUGIN.glob("*.py")):
                place.write(dest / "juice_nova" / f.name, f.read_bytes())
            # the simulated waits' draws (stdlib only), the same file Juice validates with
            place.write(dest / "juice_nova" / "simwait.py", Path(simwait.__file__).read_bytes())
            return
        r = place.run([str(venv_bin("python3")), "-c", "import juice_nova.compute"], timeout=120)
        if not r.ok:
            raise ServiceError(f"{place.label}: the juice-nova plugin is not importable in the OpenStack "
                               f"venv ({(r.err.strip().splitlines() or ['?'])[-1]}): run scripts/setup.sh")

    def start(self) -> None:
        self._t_start = time.monotonic()
        for host, site in self.opts.hosts():
            self._start(host, site)
        self.progress(f"nova-compute: {len(self.servers)} process(es) starting")

    def _start(self, host: str, site: int) -> None:
        home = self.home(host)
        argv = [str(venv_bin("juice-nova-compute")), "--config-file", str(home / "nova.conf")]
        if self.opts.forked:
            self.place(host).remove(home / PIDS_FILE)
            argv = [str(venv_bin("juice-nova-compute")), "--fork-nodes",
                    *(str(self.home(c)) for c in self.opts.services_of(host)),
                    "--pids-file", str(home / PIDS_FILE)]
        env = os_env(home, {**backend_env(self.nova.opts), "PYTHONPATH": str(self.plugin_dir(site))})
        self.servers[host] = spawn(self.lab.place(site), argv, log=self.log(host),
                                   what=f"nova-compute {host} in site {site}", env=env, cwd=home)

    def wait_healthy(self, timeout: float = 600.0) -> None:
        """Services up, discover_hosts once, every node a resource provider (bounded)."""
        deadline = time.monotonic() + timeout
        want = {h for h, _ in self.opts.service_hosts()}

        def up() -> bool:
            try:
                svcs = self.nova.services()
            except Exception:
                return False
            return want <= {s["host"] for s in svcs if s["binary"] == "nova-compute" and s["state"] == "up"}

        first = next(iter(self.servers.values()))
        first.wait_ready(up, max(1.0, deadline - time.monotonic()), "nova-compute services up",
                         interval=1.0, fail=self._dead)
        self.timings["services_up_s"] = time.monotonic() - self._t_start
        self.progress(f"nova-compute: {len(want)} service(s) up ({self.timings['services_up_s']:.1f} s)")
        self.discover()
        self.wait_registered(max(1.0, deadline - time.monotonic()))

    def discover(self) -> None:
        """``discover_hosts --by-service`` once for the current processes."""
        self.timings["discover_s"] = self.nova.discover_hosts()
        self._discovered = True
        self.progress(f"nova-manage cell_v2 discover_hosts --by-service ({self.timings['discover_s']:.1f} s)")

    def wait_registered(self, timeout: float) -> None:
        """Until placement lists every node of these processes as a resource provider."""
        want = set(self.node_uuids())
        seen: dict[str, int] = {"n": 0}
        last = {"t": 0.0}

        def done() -> bool:
            try:
                have = {rp["uuid"] for rp in self.nova.placement.resource_providers()}
            except Exception:
                return False
            seen["n"] = len(want & have)
            if time.monotonic() - last["t"] > 15:
                last["t"] = time.monotonic()
                self.progress(f"nova-compute: {seen['n']}/{len(want)} nodes in placement")
            return seen["n"] == len(want)

        first = next(iter(self.servers.values()))
        try:
            first.wait_ready(done, timeout, "compute nodes in placement", interval=2.0, fail=self._dead)
        except ServiceError as e:
            raise ServiceError(f"{e} ({seen['n']}/{len(want)} nodes registered)") from None
        self.timings["registered_s"] = time.monotonic() - self._t_start
        self.progress(f"nova-compute: {len(want)} nodes in placement ({self.timings['registered_s']:.1f} s "
                      "from start)")

    def _dead(self) -> str | None:
        for host, srv in self.servers.items():
            why = srv.exited()
            if why:
                return f"{host} {why}"
        return None

    def children(self, host: str) -> dict[str, int]:
        """fork: the pids of process ``host``'s children ({nova service host: pid}; {} before
        its parent wrote them, and always with shared isolation)."""
        if not self.opts.forked or host not in self.servers:
            return {}
        raw = self.place(host).read(self.home(host) / PIDS_FILE)
        return read_pids(raw.decode(errors="replace")) if raw else {}

    def _processes(self) -> dict[str, tuple[Place, int]]:
        """Every running process: the parents by process host, the children by service host."""
        out: dict[str, tuple[Place, int]] = {}
        for h, srv in self.servers.items():
            if srv.pid:
                out[h] = (srv.place, srv.pid)
                out.update({c: (srv.place, pid) for c, pid in self.children(h).items()})
        return out

    def rss(self) -> dict[str, int]:
        """Resident set size (bytes) of each running nova-compute process, read at its place
        (fork: the parents by process host and each node's child by its service host)."""
        procs = self._processes()
        found: dict[int, int] = {}
        for place in {id(pl): pl for pl, _ in procs.values()}.values():
            found.update(rss(place, [pid for pl, pid in procs.values() if pl is place]))
        return {h: found.get(pid, 0) for h, (_, pid) in procs.items()}

    def memory(self) -> dict[str, dict[str, int]]:
        """``rss``, ``pss`` and ``uss`` (bytes, ``/proc/<pid>/smaps_rollup``) per process, keyed
        as ``rss``; a process whose figures cannot be read is left out."""
        procs = self._processes()
        found: dict[int, dict[str, int]] = {}
        for place in {id(pl): pl for pl, _ in procs.values()}.values():
            found.update(memory(place, [pid for pl, pid in procs.values() if pl is place]))
        return {h: found[pid] for h, (_, pid) in procs.items() if pid in found}

    def memory_summary(self) -> dict[str, Any]:
        """Memory per simulated node (MB): what the facts record (``{}`` when unreadable):
        ``mb_per_node`` (every compute process's PSS over the nodes, any layout) and, with fork,
        ``added_mb_per_node`` (a child's mean USS: what one more node costs) with the children's
        mean USS/PSS/RSS."""
        mem = self.memory()
        procs = [h for h, _ in self.opts.hosts()]
        per_proc = [mem[h] for h in procs if h in mem]
        if not per_proc:
            return {}
        mb, n = 1024 * 1024, len(per_proc)
        out: dict[str, Any] = {"isolation": self.opts.isolation, "processes": n,
                               "process_rss_mb": round(sum(m["rss"] for m in per_proc) / n / mb, 1),
                               "process_uss_mb": round(sum(m["uss"] for m in per_proc) / n / mb, 1)}
        kids = [mem[c] for h in procs for c in self.opts.services_of(h) if c != h and c in mem]
        if kids:  # fork: one more node costs one more child's private pages (USS)
            out.update({"children": len(kids),
                        "child_uss_mb": round(sum(m["uss"] for m in kids) / len(kids) / mb, 1),
                        "child_pss_mb": round(sum(m["pss"] for m in kids) / len(kids) / mb, 1),
                        "child_rss_mb": round(sum(m["rss"] for m in kids) / len(kids) / mb, 1)})
            out["added_mb_per_node"] = out["child_uss_mb"]
        # every compute process's PSS (shared pages counted once) over the nodes: comparable
        # across layouts
        total = sum(m["pss"] for m in [*per_proc, *kids]) / mb
        out["mb_per_node"] = round(total / max(1, self.opts.nodes), 3)
        return out

    def pids(self) -> list[int]:
        out = [srv.pid for srv in self.servers.values() if srv.pid is not None and srv.running()]
        return out + [p for h in self.servers for p in self.children(h).values()]

    def stop(self) -> None:
        if not self.servers:
            return
        stop_all(self.servers.values(), grace_s=30, sig=signal.SIGTERM)
        self.progress(f"nova-compute: {len(self.servers)} process(es) stopped")
        self.servers.clear()

    def kill(self, site: int) -> dict[str, Any]:
        """SIGKILL every nova-compute of ``site``."""
        hosts = [h for h, s in self.opts.hosts() if s == site and h in self.servers]
        if not hosts:
            raise ServiceError(f"no running nova-compute in site {site}")
        killed = {h: self.servers.pop(h).kill() for h in hosts}
        return {"pid": next(iter(killed.values())), "killed": killed}

    def restart(self, site: int, timeout: float = 300.0) -> dict[str, Any]:
        """Start the killed nova-computes of ``site`` again (their compute_id and node UUIDs
        are unchanged, so nova meets its own records) and wait until they are up."""
        hosts = [(h, s) for h, s in self.opts.hosts() if s == site and h not in self.servers]
        if not hosts:
            raise ServiceError(f"nova-compute in site {site}: nothing killed to restart")
        t0 = time.monotonic()
        names = {c for h, _ in hosts for c in self.opts.services_of(h)}
        # The killed process's last heartbeat keeps its service "up" for service_down_time
        # (60 s): wait for a NEW report (updated_at changes) from every restarted process.
        before = {x["host"]: x["updated_at"] for x in self.nova.services()
                  if x["binary"] == "nova-compute" and x["host"] in names}
        for h, s in hosts:
            self._start(h, s)

        def up() -> bool:
            try:
                svcs = self.nova.services()
            except Exception:
                return False
            fresh = {x["host"] for x in svcs if x["binary"] == "nova-compute" and x["state"] == "up"
                     and x["host"] in names and x["updated_at"] != before.get(x["host"])}
            return fresh == names

        self.servers[hosts[0][0]].wait_ready(up, timeout, f"nova-compute in site {site} restarted",
                                             interval=1.0, fail=self._dead)
        return {"pids": [self.servers[h].pid for h, _ in hosts], "restart_s": round(time.monotonic() - t0, 3)}

    def deviations(self) -> list[Deviation]:
        return compute_deviations(self.opts)

    def records(self) -> list[ServerRecord]:
        fork = {"isolation": "fork"} if self.opts.forked else {}
        return [srv.record(self.kind, port=0, datadir=self.home(h),
                           extra={"host": h, "nodes": self.opts.nodes_per_process, **fork})
                for h, srv in self.servers.items()]

    def logs(self) -> list[tuple[Place, Path]]:
        """Each process's log (fork: the parent's, then each node's own)."""
        out = [(self.lab.place(s), self.log(h)) for h, s in self.opts.hosts()]
        if self.opts.forked:
            out += [(self.lab.place(s), self.log(h)) for h, s in self.opts.service_hosts()]
        return out

    def collect_logs(self, dest: Path) -> list[Path]:
        return copy_logs(self.logs(), dest)

    def facts(self) -> dict[str, Any]:
        o = self.opts
        size = {"vcpus": o.vcpus, "memory_mb": o.memory_mb, "disk_gb": o.disk_gb}
        return {"processes": len(o.sites), "sites": list(o.sites), "nodes_per_process": o.nodes_per_process,
                "nodes": o.nodes, "node_size": size, "max_concurrent_builds": o.max_concurrent_builds,
                "timings": dict(self.timings), "discovered": self._discovered,
                "driver": "juice_fake.MultiNodeFakeDriver (plugins/juice-nova)",
                "isolation": o.isolation, "services": len(o.service_hosts()),
                "image_download": "node_cache" if self.image_download else "none",
                **({"memory": mem} if (mem := self.memory_summary()) else {})}

