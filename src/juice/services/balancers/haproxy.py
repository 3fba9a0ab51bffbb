"""haproxy: Debian's package (2.6), one load balancer in one site, in front of HTTP services.

    hp = HAProxy(lab, progress, site=1, maxconn=4000)            # pure: nothing started
    hp.add("keystone", 5000, [(1, "10.210.1.2", 5000), (2, "10.210.2.2", 5000)])
    hp.up()                          # config written, haproxy started (pid recorded), stats answer
    hp.url("keystone")               # "http://10.210.1.2:15000": what every client uses
    hp.stats()                       # ``show stat`` of the stats socket, one dict per row
    hp.info()                        # ``show info`` (MaxConn, CurrConns, CumConns, ...)
    hp.stop()                        # TERM by the recorded pid, then KILL after a grace period

One frontend per service (``add``), bound to the site's address on the service's port + 10,000
(``FRONT_OFFSET``: a backend may run in the same site on the upstream port); its backend lists
every instance of the service (``balance roundrobin``). The config is Juice's
(``render_config``, pure): Debian's shipped ``/etc/haproxy/haproxy.cfg`` ``defaults`` section
(mode http, httplog, dontlognull, timeouts connect 5 s, client 50 s, server 50 s) with what a
lab needs instead of its ``global`` section: the log goes to stdout (``-db``: foreground; the
started process IS haproxy, its pid is recorded directly), the stats socket is in the site's
directory, no chroot/user/daemon (wiring, not a tuning knob). ``maxconn`` is haproxy's GLOBAL
``maxconn``: the process-wide limit on concurrent connections (seed 002's "haproxy connections,
4,000 → 16,000": the Mirantis/Fuel deployment set it in the ``global`` section). Unset, haproxy
2.6 derives it from the process's file-descriptor limit; since haproxy 2.2 a frontend without
its own ``maxconn`` follows the global one. When it is reached haproxy stops accepting: new
connections wait in the kernel's listen queue (then time out on the client side); the frontend's
``smax`` reaches its ``slim`` and ``show info`` reports ``CurrConns`` = ``MaxConn``.
``timeout_server_s`` replaces Debian's ``timeout server`` (50 s): a backend that has not sent its
response headers by then gets the client a 504 and a log line with termination state ``sH``
(``juice.trace.lblog`` reads them).

Files: ``<root>/s<site>/haproxy/{haproxy.cfg, haproxy-s<site>.log, haproxy.sock}``.
"""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from juice import onhost
from juice.errors import ServiceError, UserError
from juice.lab.place import Place
from juice.services.base import Progress, ServerRecord, Service, Sites, quiet
from juice.services.deviations import Deviation, spec_set
from juice.services.process import Server, SiteServer, port_open
from juice.util import proc

HAPROXY = "/usr/sbin/haproxy"
FRONT_OFFSET = 10_000
MAXCONN_MAX = 1_000_000
# Debian's /etc/haproxy/haproxy.cfg ``defaults`` (haproxy itself ships no timeouts at all)
DEBIAN_DEFAULTS = ("mode http", "log global", "option httplog", "option dontlognull",
                   "timeout connect 5000", "timeout client 50000", "timeout server 50000")
DEFAULT_MAXCONN = "derived from the fd limit (ulimit -n)"
DEBIAN_TIMEOUT_SERVER_S = 50.0  # Debian's ``timeout server 50000``: the longest a backend may take
TIMEOUT_MAX_S = 86_400.0


@dataclass(frozen=True)
class Backend:
    """One instance of a service behind haproxy."""

    name: str
    host: str
    port: int


@dataclass(frozen=True)
class Frontend:
    """One service: clients connect to ``port`` (on haproxy's address); ``servers`` serve."""

    name: str
    port: int
    servers: tuple[Backend, ...] = field(default_factory=tuple)


def check_maxconn(maxconn: int | None, where: str = "haproxy.maxconn") -> None:
    """UserError when ``maxconn`` is not a connection count haproxy takes."""
    if maxconn is None:
        return
    if isinstance(maxconn, bool) or not isinstance(maxconn, int) or not 1 <= maxconn <= MAXCONN_MAX:
        raise UserError(f"{where}: expected 1..{MAXCONN_MAX:,} concurrent connections, got {maxconn!r} "
                        "(e.g. 4000 as in seed 002, or leave it unset for haproxy's default)")


def check_timeout(timeout_s: float | None, where: str = "server.haproxy_timeout_server") -> None:
    """UserError when ``timeout_s`` is not a timeout (seconds) haproxy takes."""
    if timeout_s is None:
        return
    number = isinstance(timeout_s, int | float) and not isinstance(timeout_s, bool)
    if not number or not 0 < timeout_s <= TIMEOUT_MAX_S:
        raise UserError(f"{where}: expected seconds in (0, {TIMEOUT_MAX_S:,.0f}], got {timeout_s!r} "
                        f"(Debian's haproxy.cfg ships {DEBIAN_TIMEOUT_SERVER_S:g} s; unset: that)")


def render_config(frontends: Sequence[Frontend], *, bind_ip: str, stats_socket: Path,
                  maxconn: int | None = None, timeout_server_s: float | None = None) -> str:
    """haproxy.cfg (see the module doc): global, Debian's defaults (``timeout_server_s``
    replaces its ``timeout server``), a frontend + backend per service."""
    check_maxconn(maxconn)
    check_timeout(timeout_server_s)
    if not frontends:
        raise ServiceError("haproxy: no frontend to serve (add a service first)")
    lines = ["# rendered by juice", "global", "    log stdout format raw local0 info",
             f"    stats socket {stats_socket} mode 600 level admin", "    stats timeout 30s"]
    if maxconn is not None:
        lines.append(f"    maxconn {maxconn}")
    defaults = [d if timeout_server_s is None or not d.startswith("timeout server ")
                else f"timeout server {max(1, round(timeout_server_s * 1000))}" for d in DEBIAN_DEFAULTS]
    lines += ["", "defaults", *(f"    {d}" for d in defaults)]
    for fe in frontends:
        if not fe.servers:
            raise ServiceError(f"haproxy: frontend {fe.name} has no server")
        lines += ["", f"frontend {fe.name}", f"    bind {bind_ip}:{fe.port}",
                  f"    default_backend {fe.name}", "", f"backend {fe.name}", "    balance roundrobin"]
        lines += [f"    server {b.name} {b.host}:{b.port}" for b in fe.servers]
    return "\n".join(lines) + "\n"


def parse_stat(text: str) -> list[dict[str, str]]:
    """``show stat`` CSV (header ``# pxname,svname,...``) -> one dict per proxy/server row."""
    body = text.lstrip()
    if not body.startswith("#"):
        raise ServiceError(f"haproxy: unexpected 'show stat' answer: {text[:80]!r}")
    rows = csv.DictReader(io.StringIO(body[1:].lstrip()))
    return [{k: v for k, v in r.items() if k} for r in rows if r.get("pxname")]


def parse_info(text: str) -> dict[str, str]:
    """``show info`` (``Name: value`` lines) -> a dict."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out


def fd_limit(maxconn: int | None) -> list[str]:
    """The argv prefix that gives haproxy the file descriptors ``maxconn`` needs: haproxy raises
    its soft limit to about 2 x maxconn but never the hard one, and a container's or a shell's
    hard limit (20,000 on this machine; systemd gives services 524,288) can be below it — then
    haproxy refuses to start ("Cannot raise FD limit"). ``prlimit`` (util-linux, in every Debian)
    sets both and execs haproxy in place, so the started pid is still haproxy's. Wiring, not a
    tuning knob: haproxy gets the limit it asks for, as under systemd."""
    n = fd_need(maxconn)
    return [] if n is None else ["prlimit", f"--nofile={n}:{n}", "--"]


def fd_need(maxconn: int | None) -> int | None:
    """The file descriptors Juice gives haproxy for ``maxconn`` (None: haproxy derives maxconn
    from what it has)."""
    return None if maxconn is None else min(2 * maxconn + 1024, 1 << 20)  # fs.nr_open's default


def deviations(maxconn: int | None, timeout_server_s: float | None = None) -> list[Deviation]:
    """What haproxy runs with that differs from its defaults (Debian's shipped config)."""
    out = []
    if maxconn is not None:
        out.append(spec_set("haproxy", "global maxconn", maxconn, DEFAULT_MAXCONN,
                            "seed 002 raised it from 4,000 to 16,000"))
    if timeout_server_s is not None:
        out.append(spec_set("haproxy", "defaults timeout server (s)", f"{timeout_server_s:g}",
                            f"{DEBIAN_TIMEOUT_SERVER_S:g}",
                            "how long haproxy waits for a backend's answer before its 504"))
    return out


def version(place: Place | None = None) -> str:
    """haproxy's version at ``place`` (this machine by default), e.g. ``2.6.12-1+deb12u4``, or
    ``unknown``."""
    try:
        out = (place.run([HAPROXY, "-v"], timeout=10).out if place is not None
               else proc.run([HAPROXY, "-v"], check=False, timeout=10).stdout)
    except Exception:
        return "unknown"
    words = out.split()
    return words[2] if len(words) > 2 and words[0] == "HAProxy" else "unknown"


# One command on the stats socket, as a program the place runs (argv: socket, command)
UNIX_SOCKET_PY = onhost.source("unix_socket")


class ConnSampler:
    """``show info`` every ``interval_s`` in a thread while a run goes on: the process-wide
    concurrent connections (``CurrConns``) against the global ``Maxconn``. Frontends share the
    global limit, so no frontend's own ``smax`` shows it reached; these samples do.

        with ConnSampler(hp) as s: ...     # then s.result()
    """

    def __init__(self, hp: HAProxy, interval_s: float = 1.0) -> None:
        self.hp, self.interval_s = hp, interval_s
        self.samples: list[int] = []
        self.maxconn = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="haproxy-sampler", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                info = self.hp.info()
                self.samples.append(int(info.get("CurrConns", "0")))
                self.maxconn = int(info.get("Maxconn", "0"))
            except (ServiceError, ValueError):
                pass
            self._stop.wait(self.interval_s)

    def __enter__(self) -> ConnSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def result(self) -> dict[str, Any]:
        """``samples``, ``interval_s``, ``max_curr_conns``, ``maxconn`` and ``at_limit`` (samples
        with CurrConns >= Maxconn: about that many intervals spent at the global limit)."""
        at = sum(1 for c in self.samples if self.maxconn and c >= self.maxconn)
        return {"samples": len(self.samples), "interval_s": self.interval_s,
                "max_curr_conns": max(self.samples, default=0), "maxconn": self.maxconn, "at_limit": at}


class HAProxy(SiteServer, Service):
    """One haproxy in ``site`` with a frontend per service added (see the module doc)."""

    kind = "haproxy"
    DIR = "haproxy"

    def __init__(self, lab: Sites, progress: Progress = quiet, *, site: int = 1,
                 maxconn: int | None = None, timeout_server_s: float | None = None) -> None:
        super().__init__(lab, progress)
        if site not in lab.sites:
            raise UserError(f"haproxy.site: {site} is not a site of this lab (1..{len(lab.sites)})")
        check_maxconn(maxconn)
        check_timeout(timeout_server_s)
        self.site, self.maxconn, self.timeout_server_s = site, maxconn, timeout_server_s
        self.frontends: dict[str, Frontend] = {}
        self.server: Server | None = None

    # ---- names -------------------------------------------------------------------------------
    @property
    def log(self) -> Path:
        return self.home / f"haproxy-s{self.site}.log"  # unique name: collect_logs flattens

    @property
    def socket(self) -> Path:
        return self.home / "haproxy.sock"

    def add(self, name: str, port: int, servers: Sequence[tuple[int, str, int]]) -> None:
        """A frontend ``name`` for the service on upstream ``port``; ``servers``: (site, host,
        port) of every instance. Before ``configure``."""
        if not servers:
            raise ServiceError(f"haproxy: {name} needs at least one server")
        seen: dict[int, int] = {}
        backends = []
        for site, host, p in servers:  # <name>-s<site>, -<k> for a site's k-th further instance
            seen[site] = seen.get(site, 0) + 1
            backends.append(Backend(f"{name}-s{site}" + (f"-{seen[site]}" if seen[site] > 1 else ""),
                                    host, p))
        self.frontends[name] = Frontend(name, port + FRONT_OFFSET, tuple(backends))

    def port(self, name: str) -> int:
        if name not in self.frontends:
            raise ServiceError(f"haproxy: no frontend {name} (have: {', '.join(self.frontends) or 'none'})")
        return self.frontends[name].port

    def url(self, name: str) -> str:
        """``http://<haproxy's address>:<frontend port>`` of service ``name``."""
        return f"http://{self.lab.site_ip(self.site)}:{self.port(name)}"

    # ---- lifecycle ---------------------------------------------------------------------------
    def config(self) -> str:
        return render_config(list(self.frontends.values()), bind_ip=self.place.address,
                             stats_socket=self.socket, maxconn=self.maxconn,
                             timeout_server_s=self.timeout_server_s)

    def configure(self) -> None:
        place = self.place
        if not place.run(["test", "-x", HAPROXY]).ok:
            raise ServiceError(f"{place.label}: {HAPROXY} is missing: run scripts/setup.sh "
                               "(Debian's haproxy package)")
        for fe in self.frontends.values():
            if port_open(place, place.address, fe.port):
                raise ServiceError(f"haproxy in site {self.site}: port {place.address}:{fe.port} ({fe.name}) "
                                   "is already taken (another haproxy still running?)")
        place.remove(self.home)
        place.mkdir(self.home)
        place.write(self.home / "haproxy.cfg", self.config())
        check = place.run([HAPROXY, "-c", "-q", "-f", str(self.home / "haproxy.cfg")], timeout=30)
        if not check.ok:
            why = (check.err or check.out).strip().splitlines()
            raise ServiceError(f"haproxy: its config does not parse: {why[-1] if why else check.rc}")
        self._check_fd_limit()

    def _check_fd_limit(self) -> None:
        """Before anything starts: can this place give haproxy the descriptors its maxconn needs?
        (Raising a hard limit needs CAP_SYS_RESOURCE, which a container may not have: this
        machine's is 20,000 and fixed.)"""
        argv = fd_limit(self.maxconn)
        if not argv:
            return
        probe = self.place.run([*argv, "true"], timeout=30)
        if probe.ok:
            return
        hard = self.place.run(["sh", "-c", "ulimit -Hn"], timeout=30).out.strip()
        most = f"at most {(int(hard) - 1024) // 2}" if hard.isdigit() else "a smaller one"
        said = ((probe.err or probe.out).strip().splitlines() or ["prlimit failed"])[-1]
        need = fd_need(self.maxconn)
        raise ServiceError(f"haproxy.maxconn: {self.maxconn} needs {need} file descriptors and site "
                           f"{self.site}'s hard limit ({hard or '?'}) cannot be raised there ({said}); "
                           f"use a maxconn of {most} or raise the hard limit (ulimit -Hn, LimitNOFILE)")

    def start(self) -> None:
        self.spawn_server([*fd_limit(self.maxconn), HAPROXY, "-db", "-f", str(self.home / "haproxy.cfg")],
                          log=self.log, what=f"haproxy in site {self.site}")
        self.progress(f"haproxy starting in site {self.site}: "
                      + ", ".join(f"{f.name} :{f.port} -> {len(f.servers)}" for f in self.frontends.values()))

    def _answers(self) -> bool:
        try:
            return self.server is not None and self.info().get("Pid") == str(self.server.pid)
        except ServiceError:
            return False

    def wait_healthy(self, timeout: float = 60.0) -> None:
        self.wait_server(self._answers, timeout, not_started="haproxy: not started")
        self.progress(f"haproxy ready in site {self.site} (maxconn {self.info().get('Maxconn', '?')})")

    def command(self, cmd: str) -> str:
        """One command on the stats socket (``show stat``, ``show info``), from haproxy's site."""
        r = self.place.run(["python3", "-c", UNIX_SOCKET_PY, str(self.socket), cmd], timeout=15)
        if not r.ok:
            why = (r.err or r.out).strip().splitlines()
            raise ServiceError(f"haproxy {cmd!r}: {why[-1] if why else 'no answer'}")
        return r.out

    def stats(self) -> list[dict[str, str]]:
        return parse_stat(self.command("show stat"))

    def info(self) -> dict[str, str]:
        return parse_info(self.command("show info"))

    def requests_by_server(self, name: str) -> dict[str, int]:
        """Requests each server of frontend ``name``'s backend got (``stot``), from ``show stat``."""
        return {r["svname"]: int(r.get("stot") or 0) for r in self.stats()
                if r["pxname"] == name and r["svname"] not in ("FRONTEND", "BACKEND")}

    def stop(self) -> None:
        if self.stop_server(grace_s=10):
            self.progress(f"haproxy stopped in site {self.site}")

    def kill(self, site: int) -> dict[str, object]:
        if site != self.site or self.server is None or not self.server.running():
            raise ServiceError(f"no running haproxy in site {site}")
        srv, self.server = self.server, None
        return {"pid": srv.kill()}

    def restart(self, site: int, timeout: float = 60.0) -> dict[str, object]:
        if site != self.site or self.server is not None:
            raise ServiceError(f"haproxy in site {site}: nothing killed to restart")
        self.start()
        self.wait_healthy(timeout)
        assert self.server is not None
        return {"pid": self.server.pid}

    def deviations(self) -> list[Deviation]:
        return deviations(self.maxconn, self.timeout_server_s)

    def facts(self) -> dict[str, object]:
        return {"haproxy_version": version(self.place), "site": self.site, "maxconn": self.maxconn,
                "timeout_server_s": self.timeout_server_s or DEBIAN_TIMEOUT_SERVER_S,
                "frontends": {f.name: {"port": f.port, "servers": [f"{b.host}:{b.port}" for b in f.servers]}
                              for f in self.frontends.values()}}

    def records(self) -> list[ServerRecord]:
        return self.server_records(self.kind, port=min((f.port for f in self.frontends.values()), default=0),
                                   datadir=self.home, extra={"maxconn": self.maxconn})

    def logs(self) -> list[tuple[Place, Path]]:
        return [(self.place, self.log)]
