"""RabbitMQ: one broker node per listed site (a site may hold several), optionally clustered.

    mq = RabbitMQ(lab, progress, nodes=[1, 2, 3], queues="mirrored")  # pure: nothing started
    mq.up()                        # configure + start (+ join) + wait_healthy, bounded
    mq.url(2)                      # "rabbit://juice:juice@10.210.2.2:5672/" (site 2's own node)
    mq.urls_all()                  # "rabbit://juice:juice@h1:5672,juice:juice@h2:5672,.../"
    mq.counters()                  # per node: queues, connections, channels, messages ready/unacked
    mq.kill(2); mq.restart(2)      # a crash of site 2's node; it comes back and rejoins
    mq.stop()                      # TERM every node by recorded pid, then the epmds

How the nodes run (Debian 12: rabbitmq-server 3.10.8 on Erlang 25):

- ``/usr/lib/rabbitmq/bin/rabbitmq-server`` (not the /usr/sbin wrapper, which switches user) is
  spawned in the node's site with ``RUNNING_UNDER_SYSTEMD=true`` in its environment: the script then
  ``exec``s ``erl``, which ``exec``s ``erlexec``, which ``exec``s ``beam.smp`` — so the pid
  ``process.spawn`` records IS the beam.smp (checked in the tests with /proc/<pid>/comm). Its
  children (``erl_child_setup``, ``inet_gethost``) exit with it, even on SIGKILL.
- Nodes use long names with the site address as host part (``juice<i>@<site ip>``), so no name
  resolution is involved; distribution listens only on the site address
  (``-kernel inet_dist_use_interface``) on a fixed ``RABBITMQ_DIST_PORT``.
- epmd: one per site that holds a node, at a Juice port (``epmd_port``, default 24369, never the
  host's 4369), started by Juice in the foreground with ``process.spawn`` before the nodes, so its
  pid is recorded and it is stopped by pid after them. It is per SITE rather than per node because
  an Erlang node looks remote nodes up on its own ERL_EPMD_PORT: the nodes of one cluster must agree
  on that port, and each site is its own network namespace. Nodes and CLI calls run with
  ``-start_epmd false``: nothing ever starts an epmd daemon that Juice does not own.
- Each node has its home under ``<workdir>/s<site>/rabbitmq-<name>/``: rabbitmq.conf
  (``render_conf``), the shared Erlang cookie (mode 0400), mnesia, logs, the plugin list (empty by
  default, ``plugins=`` adds some; never the management plugin: counters come from
  ``rabbitmqctl``), and an empty rabbitmq-env.conf so the
  packaged /etc/rabbitmq one is never read.
- Clustering: all nodes boot in parallel, then each other node does ``stop_app`` /
  ``join_cluster <first>`` / ``start_app`` in turn; ``timings`` keeps start_s and join_s per node.

Queue flavours (``queues=``): ``classic`` (default: no policy); ``mirrored``: classic mirrored
queues through an ``ha-mode: all`` policy (``render_policies``, still in 3.10); ``quorum`` is chosen
by the CLIENT (oslo.messaging ``[oslo_messaging_rabbit] rabbit_quorum_queue = true``, see
``oslo_options``), so the broker gets no policy for it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from juice.errors import ServiceError
from juice.lab.place import Place
from juice.services.base import Endpoint, Endpoints, Progress, ServerRecord, Service, Sites, quiet
from juice.services.deviations import SPEC, Deviation, dev
from juice.services.process import Server, port_open, spawn, stop_all
from juice.util import proc

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
EPMD = "/usr/bin/epmd"
AMQP_PORT = 5672
DIST_PORT = 25672
EPMD_PORT = 24369
USER = PASSWORD = "juice"
COOKIE = "JUICERABBITMQCOOKIE"
FLAVOURS = ("classic", "mirrored", "quorum")


@dataclass(frozen=True)
class Node:
    """One broker node: its place and ports (the k-th node of a site uses base ports + k)."""

    index: int        # 1-based, over the whole deployment
    site: int
    ip: str
    amqp_port: int
    dist_port: int
    epmd_port: int

    @property
    def short(self) -> str:
        return f"juice{self.index}"

    @property
    def name(self) -> str:
        """The Erlang node name (long names, the site address as host part)."""
        return f"{self.short}@{self.ip}"

    @property
    def metrics_port(self) -> int:
        """The Prometheus plugin's port (the k-th node of a site: 15692 + k, like its AMQP port)."""
        return PROMETHEUS_PORT + self.dist_port - DIST_PORT


def plan_nodes(sites: Sequence[int], ips: dict[int, str], *, amqp_port: int = AMQP_PORT,
               dist_port: int = DIST_PORT, epmd_port: int = EPMD_PORT) -> list[Node]:
    """The nodes for ``sites`` (one per entry; a repeated site gets the next ports)."""
    seen: dict[int, int] = {}
    out = []
    for i, s in enumerate(sites, start=1):
        k = seen.get(s, 0)
        seen[s] = k + 1
        out.append(Node(i, s, ips[s], amqp_port + k, dist_port + k, epmd_port))
    return out


PROMETHEUS = "rabbitmq_prometheus"  # the node's own /metrics (message rates, queue depths)
PROMETHEUS_PORT = 15692


def render_conf(node: Node, prometheus: bool = False) -> str:
    """rabbitmq.conf (new-style sysctl format) of ``node``: AMQP on the site address only, the
    juice/juice user (administrator, full permissions on vhost /), remote logins allowed; with
    ``prometheus``, the plugin's listener on the site address too (not every interface)."""
    extra = ([f"prometheus.tcp.ip = {node.ip}", f"prometheus.tcp.port = {node.metrics_port}"]
             if prometheus else [])
    return "\n".join([
        f"listeners.tcp.1 = {node.ip}:{node.amqp_port}",
        f"distribution.listener.port_range.min = {node.dist_port}",
        f"distribution.listener.port_range.max = {node.dist_port}",
        "loopback_users = none",
        "default_vhost = /",
        f"default_user = {USER}",
        f"default_pass = {PASSWORD}",
        "default_user_tags.administrator = true",
        "default_permissions.configure = .*",
        "default_permissions.read = .*",
        "default_permissions.write = .*",
        "log.file.level = info",
        "log.console = false",
        # A lab host is small and shared: do not block publishers on the default 40 % / 50 MB.
        "vm_memory_high_watermark.relative = 0.8",
        "disk_free_limit.absolute = 10MB",
        *extra,
        "",
    ])


MEMORY_REASON = ("a lab machine is small and carries every site's broker: the default would block "
                 "publishers on the machine's memory, not the broker's")
DISK_REASON = "a lab's disk may be small (a tmpfs): the default 50 MB would block publishers"


def deviations(queues: str) -> list[Deviation]:
    """What every broker runs with that differs from RabbitMQ 3.10's defaults."""
    out = [dev("rabbitmq", "vm_memory_high_watermark.relative", 0.8, 0.4, MEMORY_REASON),
           dev("rabbitmq", "disk_free_limit.absolute", "10MB", "50MB", DISK_REASON)]
    if queues == "mirrored":
        out.append(dev("rabbitmq", "policy ha-all", "ha-mode=all, ha-sync-mode=automatic", "(none)",
                       "the spec's queues: mirrored (what OpenStack guides of the time recommended)",
                       SPEC))
    return out


def node_env(node: Node, home: Path) -> dict[str, str]:
    """The environment of the node's server AND of every rabbitmqctl call aimed at it."""
    ip_tuple = "{" + ",".join(node.ip.split(".")) + "}"
    return {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(home),
        "RABBITMQ_NODENAME": node.name,
        "RABBITMQ_USE_LONGNAME": "true",
        "RABBITMQ_NODE_IP_ADDRESS": node.ip,
        "RABBITMQ_NODE_PORT": str(node.amqp_port),
        "RABBITMQ_DIST_PORT": str(node.dist_port),
        "ERL_EPMD_PORT": str(node.epmd_port),
        "RABBITMQ_CONFIG_FILE": str(home / "rabbitmq.conf"),
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(home / "advanced.config"),
        "RABBITMQ_CONF_ENV_FILE": str(home / "rabbitmq-env.conf"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"),
        "RABBITMQ_MNESIA_BASE": str(home / "mnesia"),
        "RABBITMQ_LOG_BASE": str(home / "log"),
        "RABBITMQ_PID_FILE": str(home / "rabbitmq.pid"),
        # exec all the way down to beam.smp (no signal-forwarding shell in between)
        "RUNNING_UNDER_SYSTEMD": "true",
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS":
            f"-kernel inet_dist_use_interface {ip_tuple} -start_epmd false",
        "RABBITMQ_CTL_ERL_ARGS": "-start_epmd false",
    }


def render_policies(queues: str) -> list[list[str]]:
    """The ``rabbitmqctl`` argument lists that give every queue of vhost / the ``queues``
    flavour (empty for classic and quorum: quorum is declared by the client)."""
    if queues not in FLAVOURS:
        raise ServiceError(f"queues: expected one of {', '.join(FLAVOURS)}, got {queues!r}")
    if queues != "mirrored":
        return []
    definition = json.dumps({"ha-mode": "all", "ha-sync-mode": "automatic"}, separators=(",", ":"))
    # Not on exclusive/auto-delete reply queues? They are mirrored too: "all" is what the
    # OpenStack guides of the time recommended (rabbit_ha_queues). amq.* queues excluded.
    return [["set_policy", "-p", "/", "--apply-to", "queues", "--priority", "0",
             "ha-all", r"^(?!amq\.).*", definition]]


def oslo_options(queues: str) -> dict[str, str]:
    """``[oslo_messaging_rabbit]`` options a client needs for the ``queues`` flavour."""
    if queues not in FLAVOURS:
        raise ServiceError(f"queues: expected one of {', '.join(FLAVOURS)}, got {queues!r}")
    return {"rabbit_quorum_queue": "true"} if queues == "quorum" else {}


def render_plugins(plugins: Sequence[str]) -> str:
    """The enabled_plugins file (an Erlang term: ``[p1,p2].``) for ``plugins``."""
    for p in plugins:
        if not p.replace("_", "").isalnum():
            raise ServiceError(f"plugins: {p!r} is not a plugin name")
    return "[" + ",".join(plugins) + "].\n"


def version() -> str:
    """The packaged rabbitmq-server version (e.g. ``3.10.8-1.1+deb12u1``), or ``unknown``."""
    try:
        cp = proc.run(["dpkg-query", "-W", "-f", "${Version}", "rabbitmq-server"], check=False,
                      timeout=10)
    except Exception:
        return "unknown"
    return cp.stdout.strip() or "unknown"


def erlang_version() -> str:
    for p in sorted(Path("/usr/lib/erlang/releases").glob("*/OTP_VERSION")):
        return p.read_text().strip()
    return "unknown"


class RabbitMQ(Service):
    """RabbitMQ nodes in ``nodes`` (sites, one node per entry), a cluster when ``cluster``."""

    kind = "rabbitmq"

    def __init__(self, lab: Sites, progress: Progress = quiet, *, nodes: list[int] | None = None,
                 cluster: bool = True, queues: str = "classic", amqp_port: int = AMQP_PORT,
                 dist_port: int = DIST_PORT, epmd_port: int = EPMD_PORT,
                 plugins: Sequence[str] = ()) -> None:
        super().__init__(lab, progress)
        sites = list(nodes) if nodes is not None else list(lab.sites)
        if not sites:
            raise ServiceError("nodes: rabbitmq needs at least one node")
        for s in sites:
            if s not in lab.sites:
                raise ServiceError(f"nodes: {s} is not a site of this lab (1..{len(lab.sites)})")
        render_policies(queues)  # validates the flavour
        self.queues = queues
        self.cluster = cluster
        self.plugins = list(plugins)   # e.g. ["rabbitmq_federation"]: the enabled_plugins file
        self.nodes = plan_nodes(sites, {s: lab.site_ip(s) for s in set(sites)}, amqp_port=amqp_port,
                                dist_port=dist_port, epmd_port=epmd_port)
        self.servers: dict[int, Server] = {}   # node index -> its beam.smp
        self.epmds: dict[int, Server] = {}     # site -> its epmd
        self.timings: dict[str, float] = {}

    # ---- where things are -------------------------------------------------------------------
    def home(self, node: Node) -> Path:
        return self.lab.place(node.site).root / f"s{node.site}" / f"rabbitmq-{node.short}"

    def stdout_log(self, node: Node) -> Path:
        return self.home(node) / f"{node.short}-stdout.log"

    def server_log(self, node: Node) -> Path:
        return self.home(node) / "log" / f"{node.name}.log"

    def env(self, node: Node) -> dict[str, str]:
        return node_env(node, self.home(node))

    def node_for(self, site: int) -> Node:
        """The node a client in ``site`` uses: the first one in that site, else the first."""
        return next((n for n in self.nodes if n.site == site), self.nodes[0])

    def url(self, site: int) -> str:
        n = self.node_for(site)
        return f"rabbit://{USER}:{PASSWORD}@{n.ip}:{n.amqp_port}/"

    def urls_all(self, site: int | None = None) -> str:
        """oslo.messaging's multi-host transport URL (the node of ``site`` first, when given)."""
        nodes = list(self.nodes)
        if site is not None:
            first = self.node_for(site)
            nodes = [first, *[n for n in nodes if n is not first]]
        return "rabbit://" + ",".join(f"{USER}:{PASSWORD}@{n.ip}:{n.amqp_port}" for n in nodes) + "/"

    def endpoint(self, site: int) -> Endpoints:
        n = self.node_for(site)
        ep = Endpoint("rabbit", n.ip, n.amqp_port, USER, PASSWORD, site=n.site)
        return Endpoints(read=ep, write=ep)

    # ---- rabbitmqctl --------------------------------------------------------------------------
    def ctl(self, node: Node, *args: str, timeout: float = 30.0, check: bool = True) -> str:
        """``rabbitmqctl -n <node> args...`` run in the node's site with the node's environment."""
        env = [f"{k}={v}" for k, v in self.env(node).items()]
        argv = ["env", "-i", *env, CTL, "-n", node.name, "--longnames", *args]
        r = self.lab.place(node.site).run(argv, timeout=timeout)
        if check and not r.ok:
            why = (r.err or r.out).strip().splitlines()
            raise ServiceError(f"rabbitmqctl {' '.join(args[:2])} on {node.name}: exit {r.rc}: "
                               f"{' | '.join(why[:3])}")
        return r.out

    def cluster_nodes(self, node: Node) -> list[str]:
        """The running nodes ``node`` sees (``cluster_status``)."""
        out = self.ctl(node, "cluster_status", "--formatter", "json", timeout=30)
        data = json.loads(out)
        return sorted(str(x) for x in data.get("running_nodes", []))

    # ---- lifecycle ----------------------------------------------------------------------------
    def configure(self) -> None:
        for n in self.nodes:
            place, home = self.lab.place(n.site), self.home(n)
            for path in (SERVER, CTL, EPMD):
                if not place.run(["test", "-x", path]).ok:
                    raise ServiceError(f"{place.label}: {path} is missing: run scripts/setup.sh "
                                       "(apt rabbitmq-server)")
            place.remove(home)
            place.mkdir(home / "mnesia")
            place.mkdir(home / "log")
            place.write(home / "rabbitmq.conf", render_conf(n, PROMETHEUS in self.plugins))
            place.write(home / "enabled_plugins", render_plugins(self.plugins))
            place.write(home / "rabbitmq-env.conf", "# Juice: everything comes from the environment\n")
            place.write(home / ".erlang.cookie", COOKIE, mode=0o400)

    def start(self) -> None:
        t0 = time.monotonic()
        try:
            self._start_epmds()
            for n in self.nodes:
                self._spawn(n)
            self.progress(f"rabbitmq: {len(self.nodes)} node(s) starting "
                          f"({', '.join(n.name for n in self.nodes)})")
            for n in self.nodes:
                self._wait_node(n, 120.0)
                self.timings[f"{n.short}.start_s"] = round(time.monotonic() - t0, 3)
            self.timings["start_s"] = round(time.monotonic() - t0, 3)
            if self.cluster and len(self.nodes) > 1:
                first = self.nodes[0]
                for n in self.nodes[1:]:
                    t1 = time.monotonic()
                    self.ctl(n, "stop_app", timeout=60)
                    self.ctl(n, "join_cluster", first.name, timeout=120)
                    self.ctl(n, "start_app", timeout=120)
                    self.timings[f"{n.short}.join_s"] = round(time.monotonic() - t1, 3)
                    self.progress(f"rabbitmq: {n.name} joined {first.name} in "
                                  f"{self.timings[f'{n.short}.join_s']:.1f} s")
            for argv in render_policies(self.queues):
                self.ctl(self.nodes[0], *argv)
            self.timings["ready_s"] = round(time.monotonic() - t0, 3)
        except BaseException:
            self.stop()
            raise

    def _start_epmds(self) -> None:
        for site in dict.fromkeys(n.site for n in self.nodes):
            if site in self.epmds:
                continue
            port = self.nodes[0].epmd_port
            place = self.lab.place(site)
            log = place.root / f"s{site}" / f"epmd-{port}.log"
            place.mkdir(log.parent)
            srv = spawn(place, [EPMD, "-port", str(port)], log=log,
                        what=f"epmd in site {site}")
            self.epmds[site] = srv
            ip = self.lab.site_ip(site)
            srv.wait_ready(lambda ip=ip, site=site, port=port:  # type: ignore[misc]
                           port_open(self.lab.place(site), ip, port), 15, interval=0.05)

    def _spawn(self, n: Node) -> None:
        self.servers[n.index] = spawn(self.lab.place(n.site), [SERVER], log=self.stdout_log(n),
                                      tail=self.stdout_log(n), env=self.env(n), cwd=self.home(n),
                                      what=f"rabbitmq {n.name} in site {n.site}")

    def _wait_node(self, n: Node, timeout: float) -> None:
        srv = self.servers[n.index]
        srv.wait_ready(lambda: port_open(self.lab.place(n.site), n.ip, n.amqp_port), timeout, interval=0.2)
        self.ctl(n, "await_startup", "--timeout", "60", timeout=90)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        want = sorted(n.name for n in self.nodes) if self.cluster else None
        for n in self.nodes:
            srv = self.servers.get(n.index)
            if srv is None:
                raise ServiceError(f"rabbitmq {n.name} is not running")
            srv.wait_ready(lambda n=n: port_open(self.lab.place(n.site), n.ip, n.amqp_port),  # type: ignore[misc]
                           timeout)
            if want is not None:
                srv.wait_ready(lambda n=n: self._sees(n, want), timeout,  # type: ignore[misc]
                               f"rabbitmq {n.name}: cluster_status does not list {want}", interval=0.5)
        self.progress(f"rabbitmq ready: {len(self.nodes)} node(s)"
                      + (", one cluster" if want else ""))

    def _sees(self, n: Node, want: list[str]) -> bool:
        try:
            return self.cluster_nodes(n) == want
        except (ServiceError, ValueError):
            return False

    def stop(self) -> None:
        live = list(self.servers.values())
        if live:
            stop_all(live, grace_s=30)   # SIGTERM: Erlang 25 runs init:stop (graceful)
        self.servers.clear()
        if self.epmds:
            stop_all(self.epmds.values(), grace_s=5)
            self.epmds.clear()
        if live:
            self.progress(f"rabbitmq: {len(live)} node(s) stopped")

    def kill(self, site: int) -> dict[str, object]:
        """SIGKILL the node(s) of ``site`` (the others see them leave the cluster)."""
        pids = []
        for n in self._nodes_in(site):
            srv = self.servers.pop(n.index, None)
            if srv is not None and srv.running():
                pids.append(srv.kill())
        if not pids:
            raise ServiceError(f"no running rabbitmq node in site {site}")
        return {"pid": pids[0], "pids": pids}

    def restart(self, site: int, timeout: float = 300.0) -> dict[str, object]:
        """Start the killed node(s) of ``site`` again; back when every node sees the whole
        cluster again (a clustered node rejoins by itself: its mnesia lists the cluster)."""
        down = [n for n in self._nodes_in(site) if n.index not in self.servers]
        if not down:
            raise ServiceError(f"rabbitmq in site {site}: nothing killed to restart")
        t0 = time.monotonic()
        for n in down:
            self._spawn(n)
        for n in down:
            self._wait_node(n, timeout)
        if self.cluster:
            want = sorted(x.name for x in self.nodes)
            for n in down:
                self.servers[n.index].wait_ready(lambda n=n: self._sees(n, want),  # type: ignore[misc]
                                                 timeout, f"rabbitmq {n.name}: not back in the cluster",
                                                 interval=0.5)
        srv = self.servers[down[0].index]
        return {"pid": srv.pid, "rejoin_s": round(time.monotonic() - t0, 3)}

    def _nodes_in(self, site: int) -> list[Node]:
        nodes = [n for n in self.nodes if n.site == site]
        if not nodes:
            raise ServiceError(f"site: rabbitmq has no node in site {site} "
                               f"(sites: {sorted({n.site for n in self.nodes})})")
        return nodes

    # ---- observations -------------------------------------------------------------------------
    def counters(self, timeout: float = 30.0) -> dict[str, dict[str, Any]]:
        """Per node name: queues (whose leader/master it holds), connections, channels,
        messages_ready, messages_unacked — from rabbitmqctl (no management plugin), each
        call bounded by ``timeout`` — and ``shared_queues``: the names of the shared (RPC topic)
        queues it holds, at most 50 (not reply or fanout queues): where a crash hurts."""
        running = [n for n in self.nodes if n.index in self.servers]
        out: dict[str, dict[str, Any]] = {
            n.name: {"queues": 0, "connections": 0, "channels": 0, "messages_ready": 0,
                     "messages_unacked": 0, "shared_queues": []} for n in running}
        for n in running:
            rows = json.loads(self.ctl(n, "list_queues", "--local", "name",
                                       "messages_ready", "messages_unacknowledged",
                                       "--formatter", "json", timeout=timeout) or "[]")
            c = out[n.name]
            c["queues"] = len(rows)
            c["messages_ready"] = sum(int(r.get("messages_ready") or 0) for r in rows)
            c["messages_unacked"] = sum(int(r.get("messages_unacknowledged") or 0) for r in rows)
            names = [str(r.get("name", "")) for r in rows]
            c["shared_queues"] = sorted(x for x in names if "_fanout" not in x and "." not in x
                                        and not x.startswith(("reply_", "amq.", "federation:")))[:50]
        # One cluster-wide call (one per node when not clustered: independent brokers): a
        # connection's `host`/`port` are the SERVER side (the node's listener address; reverse
        # DNS is off by default), `channels` its channels.
        by_addr = {(n.ip, n.amqp_port): n.name for n in running}
        for asked in running if not self.cluster else running[:1]:
            rows = json.loads(self.ctl(asked, "list_connections", "host", "port", "channels",
                                       "--formatter", "json", timeout=timeout) or "[]")
            for r in rows:
                host = r.get("host", "")  # the json formatter gives an address as [10,210,1,2]
                host = ".".join(map(str, host)) if isinstance(host, list) else str(host)
                name = by_addr.get((host, int(r.get("port") or 0)), "")
                if name in out:
                    out[name]["connections"] += 1
                    out[name]["channels"] += int(r.get("channels") or 0)
        return out

    def deviations(self) -> list[Deviation]:
        out = deviations(self.queues)
        if PROMETHEUS in self.plugins:
            out.append(dev("rabbitmq", "enabled plugins", PROMETHEUS, "(none)",
                           "the broker's own message rates and queue depths over each run, scraped "
                           f"from its /metrics (port {PROMETHEUS_PORT} + k for a site's k-th node, the "
                           "site address only)"))
        return out

    def metrics_urls(self) -> list[tuple[int, str]]:
        """(site, URL) of every node's Prometheus endpoint (empty without the plugin)."""
        if PROMETHEUS not in self.plugins:
            return []
        return [(n.site, f"http://{n.ip}:{n.metrics_port}/metrics") for n in self.nodes]

    def records(self) -> list[ServerRecord]:
        by_index = {n.index: n for n in self.nodes}
        recs = []
        for i, srv in self.servers.items():
            n = by_index[i]
            recs.append(srv.record(self.kind, port=n.amqp_port, datadir=self.home(n),
                                   extra={"node": n.name, "dist_port": n.dist_port,
                                          "epmd_port": n.epmd_port}))
        for site, srv in self.epmds.items():
            recs.append(srv.record("rabbitmq-epmd", port=self.nodes[0].epmd_port,
                                   datadir=self.lab.place(site).root / f"s{site}"))
        return recs

    def logs(self) -> list[tuple[Place, Path]]:
        return [(self.lab.place(n.site), p) for n in self.nodes
                for p in (self.stdout_log(n), self.server_log(n))]

    def facts(self) -> dict[str, object]:
        return {"version": version(), "erlang": erlang_version(), "queues": self.queues,
                "cluster": self.cluster,
                "nodes": [{"name": n.name, "site": n.site, "amqp_port": n.amqp_port,
                           "dist_port": n.dist_port, "epmd_port": n.epmd_port} for n in self.nodes],
                "timings": dict(self.timings)}
