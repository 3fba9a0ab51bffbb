"""MariaDB: one server process (also the building block of Galera) and the centralized
deployment — a single server in site 1 that clients of every site reach across the WAN.

The server runs as the ``mysql`` user (``--user=mysql``; its dirs are chowned), with
``--no-defaults`` and every option on the command line (rendered by ``server_args``, a pure
function), so nothing from /etc/mysql leaks in. Its datadir, socket, pid file and log live
in ``<lab.workdir>/s<site>/<name>/``.

Every other option is MariaDB 10.11's shipped default unless listed by ``deviations``
(``juice.services.deviations``): ``max_connections`` stays 151 unless the spec or the
deployment (the sum of its clients' pools, with the reason) sets it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from juice.errors import ServiceError, UserError
from juice.lab.place import Place
from juice.services.base import Endpoint, Endpoints, Progress, ServerRecord, Service, Sites, quiet
from juice.services.deviations import SET_IN_SPEC, SPEC, Deviation, dev
from juice.services.process import Server, spawn

MARIADBD = "/usr/sbin/mariadbd"
INSTALL_DB = "/usr/bin/mariadb-install-db"
CLIENT = "/usr/bin/mariadb"
PORT = 3306
USER = "juice"
PASSWORD = "juice"
DATABASE = "juice"
DEFAULT_MAX_CONNECTIONS = 151  # MariaDB 10.11's
DEFAULT_BUFFER_POOL_MB = 128
LOG_FILE_MB = 48
# (option, Juice's value, MariaDB 10.11's default, reason): what server_args always changes.
FIXED: tuple[tuple[str, str, str, str], ...] = (
    ("character_set_server", "utf8mb4", "latin1",
     "OpenStack's databases are utf8mb4 (Debian's own my.cnf and devstack set it; --no-defaults "
     "skips that file)"),
    ("collation_server", "utf8mb4_general_ci", "latin1_swedish_ci", "goes with character_set_server"),
    ("skip_name_resolve", "ON", "OFF",
     "lab addresses have no DNS names: a reverse lookup per new connection would wait on the resolver"),
    ("innodb_flush_log_at_trx_commit", "2", "1",
     "throw-away lab data, and every site's server shares one disk in a local lab: an fsync per "
     "commit would measure that disk, not the WAN or the control plane"),
    ("innodb_log_file_size", f"{LOG_FILE_MB}M", "96M",
     "disk: one redo log per server, up to 45 servers on one machine"),
)


@dataclass(frozen=True)
class ServerOptions:
    """What varies between MariaDB servers (pure data; rendered by ``server_args``).
    ``max_connections`` None: MariaDB's default (151); ``max_connections_reason`` None: the
    spec set it, else why Juice did (e.g. the deployment's pools)."""

    bind: str
    port: int = PORT
    buffer_pool_mb: int = DEFAULT_BUFFER_POOL_MB
    max_connections: int | None = None
    max_connections_reason: str | None = None
    performance_schema: bool = False  # MariaDB's default (OFF); ON only when a spec asks for it
    extra: tuple[tuple[str, str], ...] = ()  # further --key=value options (e.g. wsrep)


def check_max_connections(value: int | None, field: str = "max_connections") -> None:
    """UserError naming ``field`` unless ``value`` is None or 1..100000 (MariaDB's range)."""
    if value is not None and (isinstance(value, bool) or not 1 <= value <= 100_000):
        raise UserError(f"{field}: expected 1..100000 connections (MariaDB ships 151), got {value!r}")


def deviations(opts: ServerOptions, server: str = "mariadb") -> list[Deviation]:
    """What the server runs with that differs from MariaDB 10.11's defaults, with the reasons."""
    out = [dev(server, o, v, d, why) for o, v, d, why in FIXED]
    if opts.buffer_pool_mb != DEFAULT_BUFFER_POOL_MB:
        out.append(dev(server, "innodb_buffer_pool_size", f"{opts.buffer_pool_mb}M",
                       f"{DEFAULT_BUFFER_POOL_MB}M",
                       "memory: a server per site, up to 45 on one machine (the lab's data fits)"))
    if opts.max_connections is not None and opts.max_connections != DEFAULT_MAX_CONNECTIONS:
        why = opts.max_connections_reason
        out.append(dev(server, "max_connections", opts.max_connections, DEFAULT_MAX_CONNECTIONS,
                       why or SET_IN_SPEC, source="juice" if why else SPEC))
    if opts.performance_schema:
        out.append(dev(server, "performance_schema", "ON", "OFF",
                       f"{SET_IN_SPEC} (keystone.write_attribution: statements by table)", source=SPEC))
    return out


def server_args(opts: ServerOptions, home: Path) -> list[str]:
    """The mariadbd command line (``--no-defaults``: every option is explicit)."""
    args = [
        MARIADBD, "--no-defaults", "--user=mysql",
        f"--datadir={home / 'data'}", f"--socket={home / 'mysqld.sock'}",
        f"--pid-file={home / 'mysqld.pid'}", f"--log-error={home / 'error.log'}",
        f"--bind-address={opts.bind}", f"--port={opts.port}",
        f"--innodb-buffer-pool-size={opts.buffer_pool_mb}M",
        f"--innodb-log-file-size={LOG_FILE_MB}M", "--innodb-flush-log-at-trx-commit=2",
        *([f"--max-connections={opts.max_connections}"] if opts.max_connections is not None else []),
        "--skip-name-resolve", "--character-set-server=utf8mb4",
        "--collation-server=utf8mb4_general_ci",
        f"--performance-schema={'ON' if opts.performance_schema else 'OFF'}",
        "--skip-log-bin",
    ]
    args += [f"--{k}={v}" if v != "" else f"--{k}" for k, v in opts.extra]
    return args


def render_mycnf(opts: ServerOptions, home: Path) -> str:
    """The same options as a my.cnf ``[mariadbd]`` section (written for humans/debugging)."""
    lines = ["# rendered by juice; the server runs with --no-defaults and these options", "[mariadbd]"]
    for arg in server_args(opts, home)[1:]:
        if arg == "--no-defaults":
            continue
        lines.append(arg.removeprefix("--"))
    return "\n".join(lines) + "\n"


def bootstrap_sql(user: str = USER, password: str = PASSWORD, database: str = DATABASE) -> str:
    """Users and database every Juice MariaDB gets (clients connect over TCP from any site)."""
    return (
        f"CREATE DATABASE IF NOT EXISTS `{database}`;\n"
        f"CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{password}';\n"
        f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'%' WITH GRANT OPTION;\n"
        "FLUSH PRIVILEGES;\n"
    )


def template_args(home: Path) -> list[str]:
    """A short-lived server on ``home``'s datadir, socket only (networking off)."""
    return [MARIADBD, "--no-defaults", "--user=mysql", f"--datadir={home / 'data'}",
            f"--socket={home / 'mysqld.sock'}", f"--pid-file={home / 'mysqld.pid'}",
            f"--log-error={home / 'error.log'}", f"--tmpdir={home / 'tmp'}", "--skip-networking",
            "--skip-log-bin",
            "--innodb-buffer-pool-size=32M", f"--innodb-log-file-size={LOG_FILE_MB}M",
            "--performance-schema=OFF"]


def install_db_args(home: Path) -> list[str]:
    """``mariadb-install-db`` for ``home/data``, with a private temporary directory: bootstraps
    running at once on one host collide on their temporary tables in a shared /tmp
    ("Unknown table 'mysql.tmp_user_sys'", then "Aborting"; seen with 2 of 6 at once)."""
    return [INSTALL_DB, f"--datadir={home / 'data'}", "--user=mysql",
            "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve",
            f"--tmpdir={home / 'tmp'}"]


def require_binaries(place: Place) -> None:
    """ServiceError naming what the place lacks to run MariaDB (a host not prepared)."""
    missing = [b for b in (MARIADBD, INSTALL_DB, CLIENT) if not place.run(["test", "-x", b]).ok]
    if missing:
        raise ServiceError(f"{place.label}: {', '.join(missing)} missing: prepare it with scripts/setup.sh")


def install_datadir(place: Place, home: Path, progress: Progress = quiet) -> None:
    """A fresh datadir with the Juice user at ``place``, made by a short-lived server on a
    socket only (networking off).

    Used once per deployment; Galera copies the result to every node (pre-seeding).
    """
    require_binaries(place)
    for sub in ("data", "tmp"):
        place.mkdir(home / sub)
    place.mkdir(home, owner="mysql")
    t0 = time.monotonic()
    r = place.run(install_db_args(home), timeout=180)
    if not r.ok:
        out = (r.err + r.out).strip().splitlines()
        raise ServiceError(f"{place.label}: mariadb-install-db failed: {' | '.join(out[-3:]) or 'no output'}")
    # Create users/database with networking off, then shut down cleanly.
    sock = home / "mysqld.sock"
    srv = spawn(place, template_args(home), log=None, tail=home / "error.log",
                pidfile=home / "mysqld.pid", what=f"mariadb template server in {place.label}")
    try:
        srv.wait_ready(lambda: socket_ok(place, sock), 60, interval=0.2)
        for stmt in bootstrap_sql().strip().splitlines():
            socket_query(place, sock, stmt)
    finally:
        srv.stop(grace_s=30)
    progress(f"initialized MariaDB datadir in {time.monotonic() - t0:.1f} s")


def socket_ok(place: Place, sock: Path) -> bool:
    """True when the server on ``sock`` at ``place`` answers root."""
    return place.run([CLIENT, f"--socket={sock}", "-u", "root", "-N", "-B", "-e", "SELECT 1"],
                     timeout=10).ok


def socket_query(place: Place, sock: Path, sql: str, timeout: float = 60.0) -> list[tuple[str, ...]]:
    """Run ``sql`` (one statement or a script of many, read from stdin: no argument-length
    limit) as root over a server's unix socket at ``place`` with the ``mariadb`` client (batch
    mode: rows of strings, NULL as "NULL"); ServiceError when it fails."""
    r = place.run([CLIENT, f"--socket={sock}", "-u", "root", "-N", "-B"], input=sql, timeout=timeout)
    if not r.ok:
        why = (r.err or r.out).strip().splitlines()
        raise ServiceError(f"{place.label}: SQL {sql[:60]!r} failed: {why[-1] if why else 'no output'}")
    return [tuple(line.split("\t")) for line in r.out.splitlines()]


def connect(ep: Endpoint, *, timeout: float = 10.0, autocommit: bool = True) -> pymysql.Connection:  # type: ignore[type-arg]
    """A PyMySQL connection to ``ep`` (a client must run inside the right site namespace
    to see the lab network; tests and benchmarks do that with ``juice.lab.setns``)."""
    return pymysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password,
                           database=ep.database or None, connect_timeout=int(timeout),
                           read_timeout=int(max(timeout, 30)), write_timeout=int(max(timeout, 30)),
                           autocommit=autocommit)


@dataclass
class MariaDBServer:
    """One mariadbd in one site. ``home`` = <root>/s<site>/<name> at the site's place; its pid
    comes from ``mysqld.pid`` (``process.spawn`` with ``pidfile``)."""

    lab: Sites
    site: int
    name: str = "mariadb"
    opts: ServerOptions | None = None
    process: Server | None = None
    extra_record: dict[str, str] = field(default_factory=dict)

    @property
    def place(self) -> Place:
        return self.lab.place(self.site)

    @property
    def home(self) -> Path:
        return self.place.root / f"s{self.site}" / self.name

    @property
    def log(self) -> Path:
        return self.home / "error.log"

    @property
    def options(self) -> ServerOptions:
        return self.opts or ServerOptions(bind=self.lab.site_ip(self.site))

    def write_config(self) -> None:
        self.place.mkdir(self.home, owner="mysql")
        self.place.write(self.home / "my.cnf", render_mycnf(self.options, self.home), owner="mysql")

    def start(self, extra_args: list[str] | None = None) -> None:
        argv = server_args(self.options, self.home) + (extra_args or [])
        self.process = spawn(self.place, argv, log=self.home / "stdout.log", tail=self.log,
                             pidfile=self.home / "mysqld.pid", what=f"mariadbd in site {self.site}")

    def wait_ready(self, check: Callable[[], bool], timeout: float, what: str | None = None,
                   interval: float = 0.2) -> None:
        """Bounded wait for ``check`` (its pid file first); fails early if mariadbd exits."""
        if self.process is None:
            raise ServiceError(f"mariadbd in site {self.site}: not started")
        self.process.wait_ready(check, timeout, what, interval=interval)

    def ping(self) -> bool:
        """True when the server answers over its own socket (root, no network needed)."""
        return socket_ok(self.place, self.home / "mysqld.sock")

    def query(self, sql: str, timeout: float = 60.0) -> list[tuple[str, ...]]:
        """Run ``sql`` over the server's socket as root (admin queries, health checks, counters)."""
        return socket_query(self.place, self.home / "mysqld.sock", sql, timeout)

    def status(self, variable: str) -> str | None:
        rows = self.query(f"SHOW GLOBAL STATUS LIKE '{variable}'")
        return str(rows[0][1]) if rows else None

    def stop(self, grace_s: float = 60.0) -> None:
        if self.process is not None:
            self.process.stop(grace_s=grace_s)
            self.process = None

    def record(self, kind: str) -> ServerRecord:
        extra = {"socket": str(self.home / "mysqld.sock"), **self.extra_record}
        if self.process is None:
            return ServerRecord(kind=kind, site=self.site, pid=0, pid_start=None,
                                datadir=str(self.home / "data"), log=str(self.log),
                                port=self.options.port, extra=extra)
        return self.process.record(kind, port=self.options.port, datadir=self.home / "data", extra=extra)


def _pid(server: MariaDBServer) -> int | None:
    """The running pid of ``server`` (None when it is not running)."""
    return server.process.pid if server.process is not None else None


def endpoint_of(lab: Sites, site: int, port: int = PORT) -> Endpoint:
    return Endpoint("mysql", lab.site_ip(site), port, USER, PASSWORD, DATABASE, site)


class MariaDBCentral(Service):
    """A single MariaDB in ``site`` (default 1); every site's clients use it."""

    kind = "mariadb"

    def __init__(self, lab: Sites, progress: Progress = quiet, *, site: int = 1,
                 buffer_pool_mb: int = DEFAULT_BUFFER_POOL_MB, max_connections: int | None = None,
                 max_connections_reason: str | None = None,
                 performance_schema: bool = False) -> None:
        super().__init__(lab, progress)
        if site not in lab.sites:
            raise ServiceError(f"site: {site} is not a site of this lab (1..{len(lab.sites)})")
        check_max_connections(max_connections)
        self.server = MariaDBServer(lab, site, "mariadb",
                                    ServerOptions(bind=lab.site_ip(site), buffer_pool_mb=buffer_pool_mb,
                                                  max_connections=max_connections,
                                                  max_connections_reason=max_connections_reason,
                                                  performance_schema=performance_schema))

    def deviations(self) -> list[Deviation]:
        return deviations(self.server.options, self.kind)

    def configure(self) -> None:
        self.server.place.remove(self.server.home)
        install_datadir(self.server.place, self.server.home, self.progress)
        self.server.write_config()

    def start(self) -> None:
        self.server.start()
        self.progress(f"mariadbd starting in site {self.server.site} on {self.server.options.bind}")

    def wait_healthy(self, timeout: float = 60.0) -> None:
        self.server.wait_ready(self.server.ping, timeout)
        self.progress(f"mariadbd ready: {self.server.options.bind}:{self.server.options.port}")

    def stop(self) -> None:
        if self.server.process is not None:
            self.server.stop()
            self.progress(f"mariadbd in site {self.server.site} stopped")

    def kill(self, site: int) -> dict[str, object]:
        if site != self.server.site or self.server.process is None:
            raise ServiceError(f"no running mariadb in site {site} (it runs in site {self.server.site})")
        pid = self.server.process.kill()
        self.server.process = None
        return {"pid": pid}

    def restart(self, site: int, timeout: float = 300.0) -> dict[str, object]:
        if site != self.server.site or self.server.process is not None:
            raise ServiceError(f"mariadb in site {site}: nothing killed to restart")
        t0 = time.monotonic()
        self.start()
        self.wait_healthy(timeout)
        return {"pid": _pid(self.server),
                "restart_s": round(time.monotonic() - t0, 3)}

    def endpoint(self, site: int) -> Endpoints:
        ep = endpoint_of(self.lab, self.server.site)
        return Endpoints(read=ep, write=ep)

    def records(self) -> list[ServerRecord]:
        return [self.server.record(self.kind)]

    def logs(self) -> list[tuple[Place, Path]]:
        return [(self.server.place, self.server.log)]

