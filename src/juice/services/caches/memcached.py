"""memcached: one server per listed site (default every site), bound to the site address.

    mc = Memcached(lab, progress, sites=[1])     # pure: nothing started
    mc.up()                                       # configure + start + wait_healthy (bounded)
    mc.address(1)                                 # "10.210.1.2:11211" (what a client in site 1 uses)
    mc.stats(1)["curr_items"]                     # the server's `stats`, read from inside site 1
    mc.stop()                                     # TERM, then KILL after a grace period

Each server runs at its site's place (``process.spawn``: a namespace here, an SSH host there)
as the ``memcache`` user (``nobody`` where that user does not exist), in the foreground, with
its log in ``<root>/s<site>/memcached/memcached-s<site>.log``. The started process IS
memcached: its pid is recorded directly (no pid file needed).
"""

from __future__ import annotations

import json
import pwd
from collections.abc import Sequence
from pathlib import Path

from juice import onhost
from juice.errors import ServiceError
from juice.lab.place import Place
from juice.services.base import Endpoint, Endpoints, Progress, ServerRecord, Service, Sites, quiet
from juice.services.deviations import Deviation, dev
from juice.services.process import Server, spawn, stop_all
from juice.util import proc

MEMCACHED = "/usr/bin/memcached"
PORT = 11211


def run_user(place: Place | None = None) -> str:
    """The unprivileged user memcached drops to at ``place`` (this machine by default):
    ``memcache`` (Debian), else ``nobody``."""
    if place is not None:
        return "memcache" if place.run(["id", "-u", "memcache"]).ok else "nobody"
    try:
        pwd.getpwnam("memcache")
        return "memcache"
    except KeyError:
        return "nobody"


DEFAULT_MEMORY_MB = 64  # memcached's -m


def server_args(ip: str, port: int, memory_mb: int, user: str) -> list[str]:
    """The memcached command line (foreground, TCP only on ``ip:port``, UDP off: memcached's
    default since 1.5.6). Connections (-c 1024) and threads (-t 4) are memcached's defaults."""
    return [MEMCACHED, "-u", user, "-l", ip, "-p", str(port), "-U", "0", "-m", str(memory_mb), "-v"]


def deviations(memory_mb: int) -> list[Deviation]:
    """What memcached runs with that differs from its defaults."""
    if memory_mb == DEFAULT_MEMORY_MB:
        return []
    return [dev("memcached", "-m (memory MB)", memory_mb, DEFAULT_MEMORY_MB,
                "set by the caller: the cache holds a whole data set (schedulerdb's kv backend)")]


def version() -> str:
    """memcached's version string (e.g. ``1.6.18``), or ``unknown``."""
    try:
        cp = proc.run([MEMCACHED, "-V"], check=False, timeout=10)
    except Exception:
        return "unknown"
    parts = cp.stdout.split()
    return parts[1] if len(parts) > 1 else "unknown"


# ``stats`` over the text protocol, as a program the place runs (from inside the site)
STATS_PY = onhost.source("memcached_stats")


class Memcached(Service):
    """One memcached per site in ``sites`` (default every site of the lab)."""

    kind = "memcached"

    def __init__(self, lab: Sites, progress: Progress = quiet, sites: Sequence[int] | None = None,
                 port: int = PORT, memory_mb: int = 64) -> None:
        super().__init__(lab, progress)
        self.server_sites = list(sites) if sites is not None else list(lab.sites)
        if not self.server_sites:
            raise ServiceError("sites: memcached needs at least one site")
        for s in self.server_sites:
            if s not in lab.sites:
                raise ServiceError(f"sites: {s} is not a site of this lab (1..{len(lab.sites)})")
        if not 0 < port < 65536:
            raise ServiceError(f"port: {port} is not a TCP port")
        if memory_mb < 1:
            raise ServiceError(f"memory_mb: must be >= 1, got {memory_mb}")
        self.port = port
        self.memory_mb = memory_mb
        self.user = "memcache"  # asked of the place in configure
        self.servers: dict[int, Server] = {}

    def home(self, site: int) -> Path:
        return self.lab.place(site).root / f"s{site}" / "memcached"

    def log(self, site: int) -> Path:
        return self.home(site) / f"memcached-s{site}.log"  # unique name: collect_logs flattens

    def address(self, site: int) -> str:
        """``ip:port`` of the memcached a client in ``site`` uses (its own, else the first)."""
        s = site if site in self.server_sites else self.server_sites[0]
        return f"{self.lab.site_ip(s)}:{self.port}"

    # ---- lifecycle -----------------------------------------------------------------------
    def configure(self) -> None:
        self.user = run_user(self.lab.place(self.server_sites[0]))
        for s in self.server_sites:
            place = self.lab.place(s)
            if not place.run(["test", "-x", MEMCACHED]).ok:
                raise ServiceError(f"{place.label}: {MEMCACHED} is missing: run scripts/setup.sh")
            place.remove(self.home(s))
            place.mkdir(self.home(s))
            place.write(self.home(s) / "cmdline",
                        " ".join(server_args(place.address, self.port, self.memory_mb, self.user)) + "\n")
            place.mkdir(self.home(s), owner=self.user)

    def start(self) -> None:
        for s in self.server_sites:
            self._start_site(s)
        self.progress(f"memcached starting in site(s) {','.join(map(str, self.server_sites))} "
                      f"on port {self.port}")

    def ping(self, site: int) -> bool:
        """True when OUR server in ``site`` answers (its ``stats`` pid is the one we started:
        another memcached already on the port does not count)."""
        mine = self.servers.get(site)
        try:
            return mine is not None and self.stats(site).get("pid") == str(mine.pid)
        except (OSError, ServiceError):
            return False

    def _start_site(self, s: int) -> None:
        place = self.lab.place(s)
        self.servers[s] = spawn(place, server_args(place.address, self.port, self.memory_mb, self.user),
                                log=self.log(s), what=f"memcached in site {s}")

    def kill(self, site: int) -> dict[str, object]:
        srv = self.servers.pop(site, None)
        if srv is None or not srv.running():
            raise ServiceError(f"no running memcached in site {site}")
        return {"pid": srv.kill()}

    def restart(self, site: int, timeout: float = 60.0) -> dict[str, object]:
        if site not in self.server_sites or site in self.servers:
            raise ServiceError(f"memcached in site {site}: nothing killed to restart")
        self._start_site(site)
        self.servers[site].wait_ready(lambda: self.ping(site), timeout)
        return {"pid": self.servers[site].pid}

    def wait_healthy(self, timeout: float = 60.0) -> None:
        for s, srv in self.servers.items():
            srv.wait_ready(lambda s=s: self.ping(s), timeout, interval=0.1)  # type: ignore[misc]
        self.progress(f"memcached ready in {len(self.server_sites)} site(s)")

    def stats(self, site: int) -> dict[str, str]:
        """The ``stats`` of the memcached serving ``site``, queried from inside that site."""
        s = site if site in self.server_sites else self.server_sites[0]
        r = self.lab.place(site).run(["python3", "-c", STATS_PY, self.lab.site_ip(s), str(self.port)],
                                     timeout=15)
        if not r.ok:
            why = (r.err or r.out).strip().splitlines()
            raise ServiceError(f"memcached stats from site {site}: {why[-1] if why else 'no output'}")
        return {str(k): str(v) for k, v in json.loads(r.out).items()}

    def stop(self) -> None:
        if not self.servers:
            return
        # TERM all first (memcached exits at once), then wait/kill (bounded).
        stop_all(self.servers.values(), grace_s=10)
        n = len(self.servers)
        self.servers.clear()
        self.progress(f"memcached stopped in {n} site(s)")

    def endpoint(self, site: int) -> Endpoints:
        host, port = self.address(site).rsplit(":", 1)
        s = site if site in self.server_sites else self.server_sites[0]
        ep = Endpoint("memcached", host, int(port), "", site=s)
        return Endpoints(read=ep, write=ep)

    def deviations(self) -> list[Deviation]:
        return deviations(self.memory_mb)

    def records(self) -> list[ServerRecord]:
        return [srv.record(self.kind, port=self.port, datadir=self.home(s))
                for s, srv in self.servers.items()]

    def logs(self) -> list[tuple[Place, Path]]:
        return [(self.lab.place(s), self.log(s)) for s in self.server_sites]

