"""NATS: nats-server per site, as ONE cluster or as a super-cluster of per-site clusters.

    nats = Nats(lab, progress, sites=[1, 2, 3], topology="gateways")  # pure: nothing started
    nats.up()                    # configure + start + wait_healthy: ports AND topology formed
    nats.url(2)                  # "nats://10.210.2.2:4222" (the server a client in site 2 uses)
    nats.counters()              # per server: /varz, /subsz, /routez, /gatewayz figures
    nats.kill(2); nats.restart(2)  # SIGKILL site 2's server(s), start again, wait until re-formed
    nats.stop()                  # TERM every server, then KILL after a grace period

Topologies (the locality axis of the messaging study; see VERIFIED-FACTS "Messaging"):

- ``cluster``: ONE NATS cluster ``juice`` spanning all sites, every server routed to every
  other. A queue group's member is then picked at random among all sites' subscribers.
- ``gateways``: one cluster per site (``s<site>``, its servers routed together), the clusters
  joined by gateways into a super-cluster. Members in the publisher's cluster are strictly
  preferred: queue traffic stays in its site while it has a subscriber there.

Each server listens on its site's address only: client port 4222+i, cluster (routes) 6222+i,
gateway 7222+i, monitoring (HTTP) 8222+i, ``i`` being its index within the site. No
authentication: the ports are lab-internal addresses (a fixed user would only add a line to
every client). JetStream is off. The config is rendered by a pure function
(``render_config``); the server runs at its site's place (``process.spawn``,
``/usr/sbin/nats-server -c <conf>``, logging to stdout, appended to
``<root>/s<site>/nats/nats-s<site>-<i>.log`` at its site's place: a namespace here, an SSH
host there). The started process IS nats-server: its pid is recorded directly. It runs as
root (the package's ``nats`` user has no home; the lab namespace is the confinement). The
monitoring API is read from inside the sites (``place.http_get``).

Ready = the client port answers from inside the site AND the topology is formed: every
server's ``/routez`` lists exactly one route to each expected peer (by ``server_id``: two
servers soliciting each other at once briefly hold a duplicate route, so a mere count can
say "formed" too early) and its ``/gatewayz`` a connected outbound gateway to every other
site's cluster (``gateways`` only), every one of these connections at least ``settle_s``
(1 s) old: NATS 2.9 may drop both of two routes made at once ~1 RTT later and retry after 1 s
(raise ``settle_s`` with WAN delays of hundreds of ms). NATS 2.9 has no route pooling: one
route per peer.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from juice.errors import ServiceError
from juice.lab.place import Place, http_get
from juice.services.base import Endpoint, Endpoints, Progress, ServerRecord, Service, Sites, quiet
from juice.services.process import Server, port_open, spawn, stop_all
from juice.util import proc

NATS = "/usr/sbin/nats-server"
CLIENT_PORT = 4222
CLUSTER_PORT = 6222
GATEWAY_PORT = 7222
HTTP_PORT = 8222
CLUSTER_NAME = "juice"
Topology = Literal["cluster", "gateways"]
TOPOLOGIES: tuple[str, ...] = ("cluster", "gateways")


@dataclass(frozen=True)
class Node:
    """One nats-server of a deployment: where it runs and its four ports."""

    site: int
    index: int  # within its site
    ip: str

    @property
    def name(self) -> str:
        return f"juice-nats-s{self.site}-{self.index}"

    @property
    def client_port(self) -> int:
        return CLIENT_PORT + self.index

    @property
    def cluster_port(self) -> int:
        return CLUSTER_PORT + self.index

    @property
    def gateway_port(self) -> int:
        return GATEWAY_PORT + self.index

    @property
    def http_port(self) -> int:
        return HTTP_PORT + self.index

    @property
    def url(self) -> str:
        return f"nats://{self.ip}:{self.client_port}"


def plan(sites: Sequence[int], ips: Mapping[int, str], servers_per_site: int = 1) -> list[Node]:
    """Every server of a deployment, site by site (pure)."""
    return [Node(s, i, ips[s]) for s in sites for i in range(servers_per_site)]


def cluster_name(node: Node, topology: str) -> str:
    return CLUSTER_NAME if topology == "cluster" else f"s{node.site}"


def peers(node: Node, nodes: Sequence[Node], topology: str) -> list[Node]:
    """The servers ``node`` is routed to: every other one (``cluster``), or the other ones of
    its own site (``gateways``)."""
    return [n for n in nodes if n != node and (topology == "cluster" or n.site == node.site)]


def expected(node: Node, nodes: Sequence[Node], topology: str) -> tuple[int, list[str]]:
    """(number of routes, names of the outbound gateways) of a formed topology, for ``node``."""
    gws = sorted({f"s{n.site}" for n in nodes if n.site != node.site}) if topology == "gateways" else []
    return len(peers(node, nodes, topology)), gws


def _q(s: str) -> str:
    return json.dumps(s)


def render_config(node: Node, nodes: Sequence[Node], topology: str) -> str:
    """The nats-server config of ``node`` in a deployment of ``nodes`` (pure; see module doc)."""
    if topology not in TOPOLOGIES:
        raise ServiceError(f"topology: {topology!r} is not one of {', '.join(TOPOLOGIES)}")
    if node not in nodes:
        raise ServiceError(f"{node.name} is not part of the deployment")
    routes = [f"nats-route://{n.ip}:{n.cluster_port}" for n in peers(node, nodes, topology)]
    lines = [
        f"# {node.name}: rendered by juice.services.buses.nats (topology {topology})",
        f"server_name: {_q(node.name)}",
        f"listen: {_q(f'{node.ip}:{node.client_port}')}",
        f"http: {_q(f'{node.ip}:{node.http_port}')}",
        "logtime: true",
        "",
        "cluster {",
        f"  name: {_q(cluster_name(node, topology))}",
        f"  listen: {_q(f'{node.ip}:{node.cluster_port}')}",
        "  routes: [" + ", ".join(_q(r) for r in routes) + "]",
        "}",
    ]
    if topology == "gateways":
        by_site: dict[int, list[str]] = {}
        for n in nodes:
            if n.site != node.site:
                by_site.setdefault(n.site, []).append(f"nats://{n.ip}:{n.gateway_port}")
        lines += [
            "",
            "gateway {",
            f"  name: {_q(cluster_name(node, topology))}",
            f"  listen: {_q(f'{node.ip}:{node.gateway_port}')}",
            "  gateways: [",
            *(f"    {{name: {_q(f's{s}')}, urls: [{', '.join(_q(u) for u in urls)}]}}"
              for s, urls in sorted(by_site.items())),
            "  ]",
            "}",
        ]
    return "\n".join(lines) + "\n"


def version() -> str:
    """nats-server's version (e.g. ``2.9.10``), or ``unknown``."""
    try:
        cp = proc.run([NATS, "--version"], check=False, timeout=10)
    except Exception:
        return "unknown"
    out = (cp.stdout or "").strip()
    return out.rsplit("v", 1)[-1] if "v" in out else "unknown"


def monitor(place: Place, ip: str, port: int, path: str, timeout: float = 2.0) -> dict[str, Any]:
    """GET ``http://ip:port/<path>`` of a monitoring endpoint as JSON, from inside ``place``."""
    data = json.loads(http_get(place, f"http://{ip}:{port}/{path}", timeout))
    if not isinstance(data, dict):
        raise ServiceError(f"/{path} of {ip}:{port}: not a JSON object")
    return data


def _ts(stamp: object) -> float | None:
    """Seconds since the epoch of a monitoring timestamp (RFC 3339, nanoseconds), or None."""
    if not isinstance(stamp, str):
        return None
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", stamp)
    if m is None:
        return None
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    base = datetime.fromisoformat(m.group(1) + zone).timestamp()
    return base + float("0." + (m.group(2) or "0"))


def _settled(now: float | None, conn: Mapping[str, Any], settle_s: float) -> bool:
    if settle_s <= 0:
        return True
    start = _ts(conn.get("start"))
    return now is not None and start is not None and now - start >= settle_s


def formed(routez: Mapping[str, Any], gatewayz: Mapping[str, Any] | None, peer_ids: Collection[str],
           gateways: Sequence[str], settle_s: float = 0.0) -> bool:
    """True when the monitoring answers of one server show exactly one route to each expected
    peer (``peer_ids``: their ``server_id``s) and a connected outbound gateway to every
    cluster in ``gateways``, each connection at least ``settle_s`` old by the server's own
    clock (pure).

    Why the age: when two servers solicit each other at once, NATS 2.9 may close BOTH
    connections as duplicates ~1 RTT after making them and retry 1 s later (seen here), so a
    fresh full mesh is not yet a stable one."""
    routes = routez.get("routes") or []
    ids = [r.get("remote_id") for r in routes]
    if int(routez.get("num_routes", -1)) != len(peer_ids) or len(ids) != len(peer_ids):
        return False
    now = _ts(routez.get("now"))
    if set(ids) != set(peer_ids) or not all(_settled(now, r, settle_s) for r in routes):
        return False
    if not gateways:
        return True
    out = (gatewayz or {}).get("outbound_gateways") or {}
    gnow = _ts((gatewayz or {}).get("now"))
    conns = [(out.get(g) or {}).get("connection") for g in gateways]
    return all(isinstance(c, dict) and bool(c) and _settled(gnow, c, settle_s) for c in conns)


class Nats(Service):
    """nats-server in every site of ``sites`` (see the module doc)."""

    kind = "nats"

    def __init__(self, lab: Sites, progress: Progress = quiet, *, sites: Sequence[int] | None = None,
                 topology: Topology = "cluster", servers_per_site: int = 1,
                 settle_s: float = 1.0) -> None:
        super().__init__(lab, progress)
        self.server_sites = list(sites) if sites is not None else list(lab.sites)
        if not self.server_sites:
            raise ServiceError("sites: nats needs at least one site")
        if len(set(self.server_sites)) != len(self.server_sites):
            raise ServiceError(f"sites: listed twice in {self.server_sites}")
        for s in self.server_sites:
            if s not in lab.sites:
                raise ServiceError(f"sites: {s} is not a site of this lab (1..{len(lab.sites)})")
        if topology not in TOPOLOGIES:
            raise ServiceError(f"topology: {topology!r} is not one of {', '.join(TOPOLOGIES)}")
        if not 1 <= servers_per_site <= 50:
            raise ServiceError(f"servers_per_site: must be 1..50, got {servers_per_site}")
        self.topology: str = topology
        self.servers_per_site = servers_per_site
        self.settle_s = settle_s  # min age of every route/gateway before "formed" (see formed)
        self.nodes = plan(self.server_sites, {s: lab.site_ip(s) for s in self.server_sites},
                          servers_per_site)
        self.servers: dict[Node, Server] = {}
        self.timings: dict[str, float] = {}

    # ---- where things are ---------------------------------------------------------------
    def home(self, site: int) -> Path:
        return self.lab.place(site).root / f"s{site}" / "nats"

    def conf(self, node: Node) -> Path:
        return self.home(node.site) / f"nats-s{node.site}-{node.index}.conf"

    def log(self, node: Node) -> Path:
        return self.home(node.site) / f"nats-s{node.site}-{node.index}.log"  # unique: collect_logs

    def node(self, site: int) -> Node:
        """The server a client in ``site`` uses: its own site's first one, else the first."""
        s = site if site in self.server_sites else self.server_sites[0]
        return next(n for n in self.nodes if n.site == s)

    def url(self, site: int) -> str:
        """The client URL for a client in ``site`` (its own site's server, in both topologies)."""
        return self.node(site).url

    def urls(self) -> list[str]:
        """Every server's client URL (site by site)."""
        return [n.url for n in self.nodes]

    # ---- lifecycle -----------------------------------------------------------------------
    def configure(self) -> None:
        for s in self.server_sites:
            place = self.lab.place(s)
            if not place.run(["test", "-x", NATS]).ok:
                raise ServiceError(f"{place.label}: {NATS} is missing: run scripts/setup.sh")
            place.remove(self.home(s))
            place.mkdir(self.home(s))
        for n in self.nodes:
            self.lab.place(n.site).write(self.conf(n), render_config(n, self.nodes, self.topology))

    def _spawn(self, n: Node) -> None:
        self.servers[n] = spawn(self.lab.place(n.site), [NATS, "-c", str(self.conf(n))], log=self.log(n),
                                what=f"nats {n.name} in site {n.site}")

    def start(self) -> None:
        self._t0 = time.monotonic()
        for n in self.nodes:
            self._spawn(n)
        self.progress(f"nats ({self.topology}) starting {len(self.nodes)} server(s) in site(s) "
                      f"{','.join(map(str, self.server_sites))}")

    def topology_formed(self) -> bool:
        """Every server answers its monitoring port, and each one's routes and outbound
        gateways are exactly the expected ones (``formed``); read from inside the sites."""
        answers: dict[Node, tuple[dict[str, Any], dict[str, Any] | None]] = {}
        for n in self.nodes:
            gws = expected(n, self.nodes, self.topology)[1]

            place = self.lab.place(n.site)
            try:
                rz = monitor(place, n.ip, n.http_port, "routez")
                got = rz, monitor(place, n.ip, n.http_port, "gatewayz") if gws else None
            except (OSError, ValueError, ServiceError):
                got = None
            if got is None:
                return False
            answers[n] = got
        ids = {n: str(rz.get("server_id")) for n, (rz, _) in answers.items()}
        return all(formed(rz, gz, {ids[p] for p in peers(n, self.nodes, self.topology)},
                          expected(n, self.nodes, self.topology)[1], self.settle_s)
                   for n, (rz, gz) in answers.items())

    def _wait(self, nodes: Sequence[Node], deadline: float) -> tuple[float, float]:
        """Ports open on ``nodes``, then the topology formed on EVERY server (bounded by
        ``deadline``); returns (ports s, formed s) since the call."""
        t0 = time.monotonic()
        for n in nodes:
            srv = self.servers[n]
            srv.wait_ready(lambda n=n: port_open(self.lab.place(n.site), n.ip, n.client_port),  # type: ignore[misc]
                           max(0.0, deadline - time.monotonic()), interval=0.05)
        t_ports = time.monotonic() - t0

        def exited() -> str | None:
            return next((f"{n.name} {why}" for n, srv in self.servers.items()
                         if (why := srv.exited())), None)

        first = self.servers[nodes[0]]
        first.wait_ready(self.topology_formed, max(0.0, deadline - time.monotonic()),
                         f"nats ({self.topology}): topology not formed", interval=0.3, fail=exited)
        return t_ports, time.monotonic() - t0

    def wait_healthy(self, timeout: float = 60.0) -> None:
        t0 = getattr(self, "_t0", time.monotonic())
        ports, form = self._wait(self.nodes, time.monotonic() + timeout)
        spent = time.monotonic() - t0
        self.timings["start_s"] = round(spent - form + ports, 3)
        self.timings["formed_s"] = round(spent, 3)
        self.progress(f"nats ({self.topology}) formed: {len(self.nodes)} server(s), "
                      f"ports {self.timings['start_s']:.2f} s, formed {spent:.2f} s")

    def kill(self, site: int) -> dict[str, object]:
        """SIGKILL every server of ``site`` (a crash); returns their pids."""
        victims = [n for n in self.nodes if n.site == site and n in self.servers]
        if not victims or not any(self.servers[n].running() for n in victims):
            raise ServiceError(f"no running nats in site {site}")
        pids = [self.servers.pop(n).kill() for n in victims]
        return {"pids": [p for p in pids if p is not None]}

    def restart(self, site: int, timeout: float = 60.0) -> dict[str, object]:
        """Start ``site``'s killed server(s) again; wait until the whole topology is formed."""
        todo = [n for n in self.nodes if n.site == site and n not in self.servers]
        if not todo:
            raise ServiceError(f"nats in site {site}: nothing killed to restart")
        t0 = time.monotonic()
        for n in todo:
            self._spawn(n)
        _, form = self._wait(todo, t0 + timeout)
        spent = time.monotonic() - t0
        self.timings[f"restart_s{site}_s"] = round(spent, 3)
        self.progress(f"nats site {site} restarted, topology formed again in {spent:.2f} s")
        return {"pids": [self.servers[n].pid for n in todo], "formed_s": round(spent, 3)}

    def stop(self) -> None:
        if not self.servers:
            return
        stop_all(self.servers.values(), grace_s=10)  # TERM all at once, then wait/kill (bounded)
        n = len(self.servers)
        self.servers.clear()
        self.progress(f"nats stopped ({n} server(s))")

    # ---- observations --------------------------------------------------------------------
    def counters(self, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Per running server, read from inside its site (bounded): connections, messages and
        bytes in/out, cpu (%), mem (RSS bytes), subscriptions, routes, gateways."""
        out = []
        for n in self.nodes:
            if n not in self.servers:
                continue

            def read(n: Node = n) -> dict[str, Any]:
                place = self.lab.place(n.site)
                v = monitor(place, n.ip, n.http_port, "varz", timeout)
                sz = monitor(place, n.ip, n.http_port, "subsz", timeout)
                rz = monitor(place, n.ip, n.http_port, "routez", timeout)
                gz = monitor(place, n.ip, n.http_port, "gatewayz", timeout)
                return {
                    "server": n.name, "site": n.site,
                    "connections": v.get("connections"), "total_connections": v.get("total_connections"),
                    "in_msgs": v.get("in_msgs"), "out_msgs": v.get("out_msgs"),
                    "in_bytes": v.get("in_bytes"), "out_bytes": v.get("out_bytes"),
                    "slow_consumers": v.get("slow_consumers"),
                    "cpu": v.get("cpu"), "mem": v.get("mem"),
                    "subscriptions": sz.get("num_subscriptions"),
                    "routes": rz.get("num_routes"),
                    "gateways_out": sorted((gz.get("outbound_gateways") or {}).keys()),
                    "gateways_in": sorted((gz.get("inbound_gateways") or {}).keys()),
                }

            out.append(read())
        return out

    def endpoint(self, site: int) -> Endpoints:
        n = self.node(site)
        ep = Endpoint("nats", n.ip, n.client_port, "", site=n.site)
        return Endpoints(read=ep, write=ep)

    def records(self) -> list[ServerRecord]:
        return [srv.record(self.kind, port=n.client_port, datadir=self.home(n.site),
                           extra={"name": n.name, "topology": self.topology, "conf": str(self.conf(n)),
                                  "http_port": n.http_port})
                for n, srv in self.servers.items()]

    def logs(self) -> list[tuple[Place, Path]]:
        return [(self.lab.place(n.site), self.log(n)) for n in self.nodes]

    def facts(self) -> dict[str, object]:
        return {
            "kind": self.kind, "version": version(), "topology": self.topology,
            "sites": self.server_sites, "servers_per_site": self.servers_per_site,
            "auth": "none (lab-internal addresses)",
            "ports": {"client": CLIENT_PORT, "cluster": CLUSTER_PORT, "gateway": GATEWAY_PORT,
                      "http": HTTP_PORT, "per_extra_server": "+index within the site"},
            "timings": dict(self.timings),
        }
