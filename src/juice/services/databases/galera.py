"""Galera: one MariaDB + galera-4 node per site, multi-master, WAN-tolerant.

Bring-up (``seed`` mode, the default and the fast one):
1. a template datadir is made once: ``mariadb-install-db``, then a ONE-node Galera cluster
   (inside site 1, on a socket) creates the Juice user/database and shuts down cleanly, so
   its ``grastate.dat`` and InnoDB both record the same cluster position ``uuid:seqno``;
2. the template is copied into every node's datadir (a local copy where the node's place
   shares the template's disk; to an SSH host, packed once with tar and unpacked there);
3. node 1 bootstraps with ``--wsrep-new-cluster`` (same uuid:seqno), then the other nodes
   join IN PARALLEL: their state equals the cluster's, so there is no SST or IST at all.

``rsync`` mode instead starts joiners on empty datadirs and lets Galera copy node 1 by rsync
SST (works because the servers run as ``mysql``; joins are serialized — one donor).

Provider options that hold at 50-150 ms one-way come from ``wsrep_provider_options``
(evs.* timeouts larger than the RTT, bigger send windows); ``render_provider_options`` is a
pure function tested without servers.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from juice.errors import ServiceError
from juice.lab.place import Place
from juice.services.base import Endpoints, Progress, ServerRecord, Service, Sites, quiet
from juice.services.databases.mariadb import (
    MariaDBServer,
    ServerOptions,
    _pid,
    check_max_connections,
    endpoint_of,
    install_datadir,
    socket_ok,
    socket_query,
    template_args,
)
from juice.services.databases.mariadb import (
    deviations as mariadb_deviations,
)
from juice.services.deviations import Deviation, dev
from juice.services.process import spawn, stop_all

PROVIDER = "/usr/lib/galera/libgalera_smm.so"
GCOMM_PORT = 4567
IST_PORT = 4568
SST_PORT = 4444

# Verified at 50-150 ms one-way (see VERIFIED-FACTS.md).
WAN_EVS = {
    "evs.keepalive_period": "PT3S",
    "evs.suspect_timeout": "PT30S",
    "evs.inactive_timeout": "PT1M",
    "evs.install_timeout": "PT1M",
    "evs.send_window": "512",
    "evs.user_send_window": "512",
    # Joiners wait this long for a primary component: 8 parallel joins across a 75-150 ms
    # WAN can take longer than the 30 s default.
    "pc.wait_prim_timeout": "PT150S",
}
# Galera 4's defaults of the options above, and the reason for each change.
WAN_DEFAULTS = {
    "evs.keepalive_period": "PT1S", "evs.suspect_timeout": "PT5S", "evs.inactive_timeout": "PT15S",
    "evs.install_timeout": "PT7.5S", "evs.send_window": "4", "evs.user_send_window": "2",
    "pc.wait_prim_timeout": "PT30S",
}
WAN_REASON = ("a WAN of 50-150 ms one-way: timeouts well above the round trip, larger send "
              "windows (Galera's WAN guidance; verified in VERIFIED-FACTS.md)")
DEFAULT_GCACHE_MB = 128
DEFAULT_SLAVE_THREADS = 1
# (option, value, MariaDB's default, reason): what every Galera node needs beyond MariaDB's.
REQUIRED = (
    ("binlog_format", "ROW", "MIXED", "required by Galera (row-based write sets)"),
    ("innodb_autoinc_lock_mode", "2", "1", "required by Galera (interleaved auto-increment locks)"),
)


@dataclass(frozen=True)
class GaleraOptions:
    """Knobs of a Galera deployment (all optional)."""

    cluster_name: str = "juice"
    gcache_mb: int = 64
    segments: dict[int, int] | None = None  # site -> gmcast.segment (default: all 0)
    provider_extra: tuple[tuple[str, str], ...] = ()  # e.g. (("gcs.fc_limit", "64"),)
    slave_threads: int = DEFAULT_SLAVE_THREADS  # wsrep_slave_threads
    buffer_pool_mb: int = 48
    sst: str = "seed"  # seed | rsync
    performance_schema: bool = False  # MariaDB's default; ON for statement attribution
    max_connections: int | None = None  # None: MariaDB's default (151)
    max_connections_reason: str | None = None  # None: the spec set it


def galera_deviations(opts: GaleraOptions) -> list[Deviation]:
    """What a Galera node runs with beyond MariaDB's own deviations (``mariadb.deviations``)."""
    out = [dev("galera", o, v, d, why) for o, v, d, why in REQUIRED]
    out += [dev("galera", f"wsrep_provider_options {k}", v, WAN_DEFAULTS[k], WAN_REASON)
            for k, v in WAN_EVS.items()]
    if opts.gcache_mb != DEFAULT_GCACHE_MB:
        out.append(dev("galera", "wsrep_provider_options gcache.size", f"{opts.gcache_mb}M",
                       f"{DEFAULT_GCACHE_MB}M", "disk: a node per site, up to 45 on one machine"))
    if opts.slave_threads != DEFAULT_SLAVE_THREADS:
        out.append(dev("galera", "wsrep_slave_threads", opts.slave_threads, DEFAULT_SLAVE_THREADS,
                       "set by the caller (GaleraOptions.slave_threads)"))
    out += [dev("galera", f"wsrep_provider_options {k}", v, "(unset)", "set by the caller (provider_extra)")
            for k, v in opts.provider_extra]
    return out


def render_provider_options(ip: str, site: int, opts: GaleraOptions) -> str:
    """``wsrep_provider_options`` for the node at ``ip`` (a ';'-separated key=value list)."""
    kv: dict[str, str] = {
        "gmcast.listen_addr": f"tcp://{ip}:{GCOMM_PORT}",
        "ist.recv_addr": f"{ip}:{IST_PORT}",
        "gcache.size": f"{opts.gcache_mb}M",
        **WAN_EVS,
    }
    if opts.segments:
        kv["gmcast.segment"] = str(opts.segments.get(site, 0))
    kv.update(dict(opts.provider_extra))
    return ";".join(f"{k}={v}" for k, v in kv.items())


def wsrep_args(ips: list[str], site: int, opts: GaleraOptions) -> tuple[tuple[str, str], ...]:
    """The mariadbd --wsrep* options of node ``site`` (1-based index into ``ips``)."""
    ip = ips[site - 1]
    return (
        ("wsrep-on", "ON"),
        ("wsrep-provider", PROVIDER),
        ("wsrep-cluster-name", opts.cluster_name),
        ("wsrep-cluster-address", "gcomm://" + ",".join(f"{x}:{GCOMM_PORT}" for x in ips)),
        ("wsrep-node-address", ip),
        ("wsrep-node-name", f"s{site}"),
        ("wsrep-provider-options", render_provider_options(ip, site, opts)),
        ("wsrep-sst-method", "rsync"),
        # the first node gives the joiners what they lack: with parallel joins, a joiner that
        # picks another JUST-joined node as donor can get an IST without the last
        # configuration-change writeset and stop ("IST didn't contain all write sets"; Galera 4
        # counts those events, so a seeded joiner is a few seqnos behind); the trailing comma
        # lets Galera fall back to any donor when node 1 is gone
        ("wsrep-sst-donor", "s1,"),
        ("wsrep-sst-receive-address", f"{ip}:{SST_PORT}"),
        ("wsrep-slave-threads", str(opts.slave_threads)),
        ("binlog-format", "ROW"),
        ("default-storage-engine", "InnoDB"),
        ("innodb-autoinc-lock-mode", "2"),
    )


def read_grastate(place: Place, datadir: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    raw = place.read(datadir / "grastate.dat") or b""
    for line in raw.decode(errors="replace").splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
    return out


class Galera(Service):
    """A Galera cluster with one node per site (``sites`` = which sites; default all)."""

    kind = "galera"

    def __init__(self, lab: Sites, progress: Progress = quiet, *, sites: list[int] | None = None,
                 options: GaleraOptions | None = None, parallel_joins: bool = True) -> None:
        super().__init__(lab, progress)
        self.node_sites = sites or list(lab.sites)
        for s in self.node_sites:
            if s not in lab.sites:
                raise ServiceError(f"sites: {s} is not a site of this lab (1..{len(lab.sites)})")
        self.opts = options or GaleraOptions()
        check_max_connections(self.opts.max_connections)
        if self.opts.sst not in ("seed", "rsync"):
            raise ServiceError(f"sst: expected seed or rsync, got {self.opts.sst!r}")
        # Pre-seeding copies one datadir to every node, on this machine's disk or packed to the
        # hosts (an rsync SST per joiner took ~35 s on test hosts, one joiner at a time)
        self.sst = self.opts.sst
        self.parallel = parallel_joins and self.sst == "seed"
        ips = [lab.site_ip(s) for s in self.node_sites]
        self.nodes: dict[int, MariaDBServer] = {}
        for i, s in enumerate(self.node_sites, start=1):
            opts = ServerOptions(bind=lab.site_ip(s), buffer_pool_mb=self.opts.buffer_pool_mb,
                                 performance_schema=self.opts.performance_schema,
                                 max_connections=self.opts.max_connections,
                                 max_connections_reason=self.opts.max_connections_reason,
                                 extra=wsrep_args(ips, i, self.opts))
            self.nodes[s] = MariaDBServer(lab, s, "galera", opts)
        self.timings: dict[str, float] = {}

    @property
    def first(self) -> MariaDBServer:
        return self.nodes[self.node_sites[0]]

    # ---- lifecycle -----------------------------------------------------------------------
    def configure(self) -> None:
        t0 = time.monotonic()
        nodes = list(self.nodes.values())
        for node in nodes:
            node.place.remove(node.home)
        first = self.first.place
        if self.sst == "seed":
            template = first.root / "galera-template"
            first.remove(template)
            install_datadir(first, template, self.progress)
            self._galera_template(template)
            self._copy_template(template, nodes)
            first.remove(template)
        else:
            install_datadir(first, self.first.home, self.progress)
            for node in nodes[1:]:
                node.place.mkdir(node.home / "data")
        for node in nodes:
            node.write_config()  # and the home (datadir included) to mysql
        self.timings["configure_s"] = time.monotonic() - t0
        self.progress(f"galera datadirs ready ({self.sst}) in {self.timings['configure_s']:.1f} s")

    def _copy_template(self, template: Path, nodes: list[MariaDBServer]) -> None:
        """The template's datadir into every node's home: ``cp`` where the node sees the
        template's disk, else one tarball read from the first place and unpacked at the node's."""
        first = self.first.place

        def run(place: Place, argv: list[str]) -> None:
            res = place.run(argv, timeout=300)
            if not res.ok:
                raise ServiceError(f"galera template copy at {place.label}: {' '.join(argv[:2])}... "
                                   f"failed: {(res.err or res.out).strip()[-300:]}")

        blob: bytes | None = None
        for node in nodes:
            node.place.mkdir(node.home)
            if node.place is first or (node.place.shared_disk and first.shared_disk):
                run(node.place, ["cp", "-a", "--reflink=auto", str(template / "data"),
                                 str(node.home / "data")])
                continue
            if blob is None:
                run(first, ["tar", "-C", str(template), "-czf", str(template / "data.tgz"), "data"])
                blob = first.read(template / "data.tgz")
                if blob is None:
                    raise ServiceError(f"galera template: {template / 'data.tgz'} missing at {first.label}")
            node.place.write(node.home / "data.tgz", blob)
            run(node.place, ["tar", "-C", str(node.home), "-xzf", str(node.home / "data.tgz")])
            node.place.remove(node.home / "data.tgz")

    def _galera_template(self, home: Path) -> None:
        """Turn a fresh datadir into a one-node-cluster state (uuid:seqno in grastate+InnoDB)."""
        site = self.node_sites[0]
        place = self.lab.place(site)
        ip = place.address
        sock = home / "mysqld.sock"
        argv = [*template_args(home), "--wsrep-on=ON", f"--wsrep-provider={PROVIDER}",
                "--wsrep-cluster-address=gcomm://", "--wsrep-new-cluster",
                f"--wsrep-cluster-name={self.opts.cluster_name}", "--binlog-format=ROW",
                f"--wsrep-provider-options=gmcast.listen_addr=tcp://{ip}:{GCOMM_PORT};"
                f"gcache.size={self.opts.gcache_mb}M", "--innodb-autoinc-lock-mode=2"]
        srv = spawn(place, argv, log=None, tail=home / "error.log",
                    pidfile=home / "mysqld.pid", what="galera template node")
        try:
            srv.wait_ready(lambda: socket_ok(place, sock), 60, interval=0.2)
            # The socket answers before the provider is primary (slow under load): wait for it.
            srv.wait_ready(lambda: _wsrep_ready(place, sock), 60, "galera template node: wsrep_ready",
                           interval=0.2)
            # A replicated write, so the position is past the bootstrap (seqno >= 1).
            socket_query(place, sock, "CREATE TABLE IF NOT EXISTS juice.juice_seed (id INT PRIMARY KEY)")
        finally:
            srv.stop(grace_s=60)
        state = read_grastate(place, home / "data")
        if state.get("seqno", "-1") == "-1":
            raise ServiceError(f"galera template did not save its position (grastate: {state})")
        self.timings["template_seqno"] = float(state["seqno"])

    def start(self) -> None:
        t0 = time.monotonic()
        self.first.start(["--wsrep-new-cluster"])
        self.progress(f"galera node s{self.first.site} bootstrapping (--wsrep-new-cluster)")
        self._wait_synced(self.first, 90)
        self.timings["bootstrap_s"] = time.monotonic() - t0
        self.progress(f"galera node s{self.first.site} primary in {self.timings['bootstrap_s']:.1f} s")
        rest = [n for s, n in self.nodes.items() if s != self.first.site]
        if self.parallel:
            for n in rest:
                n.start()
            with ThreadPoolExecutor(max_workers=max(1, len(rest))) as ex:
                for _ in ex.map(lambda n: self._wait_synced(n, 180), rest):
                    pass
        else:
            for n in rest:
                n.start()
                self._wait_synced(n, 300)
                self.progress(f"galera node s{n.site} joined")
        self.timings["start_s"] = time.monotonic() - t0

    def _wait_synced(self, node: MariaDBServer, timeout: float) -> None:
        node.wait_ready(lambda: _synced(node), timeout, f"galera node in site {node.site}", interval=0.2)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        n = len(self.nodes)
        for node in self.nodes.values():
            node.wait_ready(lambda node=node: self.cluster_size(node) == n, timeout,  # type: ignore[misc]
                            f"galera node s{node.site}: wsrep_cluster_size != {n}", interval=0.2)
        self.progress(f"galera cluster of {n} ready: wsrep_cluster_size={n}, wsrep_ready=ON everywhere")

    def cluster_size(self, node: MariaDBServer) -> int:
        try:
            return int(node.status("wsrep_cluster_size") or 0)
        except Exception:
            return 0

    def stop(self) -> None:
        # Joiners first, the bootstrap node last (it then holds safe_to_bootstrap).
        live = [n for n in self.nodes.values() if n.process is not None]
        stop_all([n.process for n in live if n is not self.first and n.process is not None], grace_s=60)
        if self.first in live:
            self.first.stop()
        for n in live:
            n.process = None
        if live:
            self.progress(f"galera: {len(live)} node(s) stopped")

    def kill(self, site: int) -> dict[str, object]:
        """SIGKILL the node of ``site`` (the others see it leave the cluster)."""
        node = self._node(site)
        if node.process is None:
            raise ServiceError(f"galera node in site {site} is not running")
        pid = node.process.kill()
        node.process = None
        return {"pid": pid}

    def restart(self, site: int, timeout: float = 300.0) -> dict[str, object]:
        """Start the node of ``site`` again: it rejoins the running cluster (IST, or a full
        rsync SST when its state was lost) and is back when it is Synced and sees every node."""
        node = self._node(site)
        if node.process is not None:
            raise ServiceError(f"galera node in site {site} is already running")
        t0 = time.monotonic()
        node.start()
        self._wait_synced(node, timeout)
        n = len(self.nodes)
        node.wait_ready(lambda: self.cluster_size(node) == n, timeout,
                        f"galera node s{site}: wsrep_cluster_size != {n}", interval=0.2)
        return {"pid": _pid(node),
                "rejoin_s": round(time.monotonic() - t0, 3), "cluster_size": self.cluster_size(node)}

    def _node(self, site: int) -> MariaDBServer:
        if site not in self.nodes:
            raise ServiceError(f"site: galera has no node in site {site} (nodes: {sorted(self.nodes)})")
        return self.nodes[site]

    def endpoint(self, site: int) -> Endpoints:
        local = site if site in self.nodes else self.first.site
        ep = endpoint_of(self.lab, local)
        return Endpoints(read=ep, write=ep)

    def records(self) -> list[ServerRecord]:
        return [n.record(self.kind) for n in self.nodes.values()]

    def deviations(self) -> list[Deviation]:
        return mariadb_deviations(self.first.options, self.kind) + galera_deviations(self.opts)

    def logs(self) -> list[tuple[Place, Path]]:
        return [(n.place, n.log) for n in self.nodes.values()]


def _synced(node: MariaDBServer) -> bool:
    try:
        rows = dict((str(k), str(v)) for k, v in node.query(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready','wsrep_local_state_comment')"))
    except Exception:
        return False
    return rows.get("wsrep_ready") == "ON" and rows.get("wsrep_local_state_comment") == "Synced"


def _wsrep_ready(place: Place, sock: Path) -> bool:
    try:
        rows = socket_query(place, sock, "SHOW GLOBAL STATUS LIKE 'wsrep_ready'")
    except Exception:
        return False
    return bool(rows) and str(rows[0][1]) == "ON"
