"""PostgreSQL 15: centralized (one server in site 1) and read-local (primary in site 1, a
hot standby in every other site fed by streaming replication).

Read-local: a client in site k reads from its own site's standby (LAN latency) and writes to
the primary in site 1 (one WAN round trip, plus the round trip to the synchronous quorum when
``sync_quorum`` > 0: ``synchronous_standby_names = 'ANY k (s2, s3, ...)'``; 0 = async).

Servers run as ``postgres`` (initdb refuses root): commands go through ``setpriv`` so the
process started in the site namespace IS the postmaster (no forking wrapper); its pid is
read from ``postmaster.pid`` all the same (``process.spawn`` with ``pidfile``). Every server
loads ``pg_stat_statements`` so the counter probe can count statements by command.
"""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psycopg

from juice.errors import ServiceError, UserError
from juice.lab.place import Place
from juice.services.base import Endpoint, Endpoints, Progress, ServerRecord, Service, Sites, quiet
from juice.services.deviations import SET_IN_SPEC, SPEC, Deviation, dev
from juice.services.process import Server, SiteServer

BIN = Path("/usr/lib/postgresql/15/bin")
PORT = 5432
USER = "juice"
PASSWORD = "juice"
DATABASE = "juice"
AS_POSTGRES = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]
LAB_NET = "10.210.0.0/16"


@dataclass(frozen=True)
class PgOptions:
    """What varies between deployments (pure data; rendered by ``render_conf``)."""

    shared_buffers_mb: int = 64
    max_connections: int | None = None  # None: PostgreSQL's default (100)
    max_connections_reason: str | None = None  # None: the spec set it
    sync_quorum: int = 0  # read-local only: standbys that must confirm each commit
    synchronous_commit: str = "on"  # with a quorum: on | remote_write | remote_apply


DEFAULT_MAX_CONNECTIONS = 100  # PostgreSQL 15's
# (setting, Juice's value, PostgreSQL 15's default, reason): what render_conf always changes.
FIXED: tuple[tuple[str, str, str, str], ...] = (
    ("shared_preload_libraries", "pg_stat_statements", "''",
     "the statement counter probe counts statements by command"),
    ("pg_stat_statements.max", "10000", "5000", "every distinct statement of a run is counted"),
    ("max_wal_senders", "64", "10", "one per hot standby: up to 45 sites read-local"),
    ("max_replication_slots", "64", "10", "goes with max_wal_senders"),
    ("hot_standby_feedback", "on", "off",
     "a standby's reads are not cancelled by the primary's vacuum (read-local)"),
    ("wal_keep_size", "256MB", "0", "a standby catches up after a WAN cut without replication slots"),
    ("fsync", "off", "on", "throw-away lab data, and every site's server shares one disk in a local "
     "lab; replication and commit round trips still happen"),
    ("full_page_writes", "off", "on", "goes with fsync off"),
)


def deviations(opts: PgOptions, server: str = "postgres") -> list[Deviation]:
    """What the servers run with that differs from PostgreSQL 15's defaults, with the reasons."""
    out = [dev(server, o, v, d, why) for o, v, d, why in FIXED]
    if opts.shared_buffers_mb != 128:
        out.append(dev(server, "shared_buffers", f"{opts.shared_buffers_mb}MB", "128MB",
                       "memory: a server per site, up to 45 on one machine (the lab's data fits)"))
    if opts.max_connections is not None and opts.max_connections != DEFAULT_MAX_CONNECTIONS:
        why = opts.max_connections_reason
        out.append(dev(server, "max_connections", opts.max_connections, DEFAULT_MAX_CONNECTIONS,
                       why or SET_IN_SPEC, source="juice" if why else SPEC))
    if opts.sync_quorum > 0:
        out.append(dev(server, "synchronous_standby_names", f"ANY {opts.sync_quorum} (...)", "''",
                       SET_IN_SPEC + " (sync_quorum)", SPEC))
        if opts.synchronous_commit != "on":
            out.append(dev(server, "synchronous_commit", opts.synchronous_commit, "on",
                           SET_IN_SPEC, SPEC))
    return out


def sync_standby_names(opts: PgOptions, standby_names: list[str]) -> str:
    """The ``synchronous_standby_names`` value ('' = asynchronous replication)."""
    if opts.sync_quorum <= 0:
        return ""
    if opts.sync_quorum > len(standby_names):
        raise ServiceError(f"sync_quorum: {opts.sync_quorum} exceeds the number of standbys "
                           f"({len(standby_names)})")
    return f"ANY {opts.sync_quorum} ({', '.join(standby_names)})"


def render_conf(listen: str, port: int, sockdir: Path, opts: PgOptions) -> str:
    """postgresql.conf additions (appended to initdb's file; later settings win)."""
    lines = [
        "# rendered by juice",
        f"listen_addresses = '{listen}'",
        f"port = {port}",
        f"unix_socket_directories = '{sockdir}'",
        *([f"max_connections = {opts.max_connections}"] if opts.max_connections is not None else []),
        f"shared_buffers = {opts.shared_buffers_mb}MB",
        "shared_preload_libraries = 'pg_stat_statements'",
        "pg_stat_statements.track = top",
        "pg_stat_statements.track_utility = on",
        "pg_stat_statements.max = 10000",
        "wal_level = replica",
        "max_wal_senders = 64",
        "max_replication_slots = 64",
        "hot_standby = on",
        "hot_standby_feedback = on",
        "wal_keep_size = 256MB",
        "fsync = off",  # lab data is throw-away; replication/commit round trips still happen
        "full_page_writes = off",
        "logging_collector = off",
        "log_min_messages = warning",
    ]
    return "\n".join(lines) + "\n"


def render_hba(net: str = LAB_NET) -> str:
    """pg_hba.conf: trust on the socket and the lab network (throw-away lab servers)."""
    return ("# rendered by juice\n"
            "local all all trust\n"
            "local replication all trust\n"
            f"host all all {net} trust\n"
            f"host replication all {net} trust\n"
            "host all all 127.0.0.1/32 trust\n")


def primary_conninfo(host: str, port: int, app_name: str) -> str:
    return f"host={host} port={port} user=postgres application_name={app_name}"


class PgServer(SiteServer):
    """One PostgreSQL server in one site. ``home`` = <workdir>/s<site>/postgres."""

    DIR = "postgres"

    def __init__(self, lab: Sites, site: int, port: int = PORT) -> None:
        self.lab, self.site, self.port = lab, site, port
        self.server: Server | None = None
        self.role = "primary"

    @property
    def what(self) -> str:
        return f"postgres ({self.role}) in site {self.site}"

    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def log(self) -> Path:
        return self.home / "server.log"

    def fresh_home(self) -> None:
        """An empty home at the place, owned by ``postgres`` (ServiceError when the place
        lacks PostgreSQL)."""
        place = self.place
        if not place.run(["test", "-x", str(BIN / "postgres")]).ok:
            raise ServiceError(f"{place.label}: {BIN / 'postgres'} is missing: run scripts/setup.sh")
        place.remove(self.home)
        place.mkdir(self.home, owner="postgres")

    def initdb(self) -> None:
        self.fresh_home()
        self._run([*AS_POSTGRES, str(BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U",
                   "postgres", "-E", "UTF8", "--no-sync"], "initdb", 120)

    def _run(self, argv: list[str], what: str, timeout: float) -> str:
        r = self.place.run(argv, timeout=timeout)
        if not r.ok:
            why = (r.err or r.out).strip().splitlines()
            raise ServiceError(f"postgres in site {self.site}: {what} failed: {why[-1] if why else r.rc}")
        return r.out

    def write_conf(self, opts: PgOptions) -> None:
        place = self.place
        conf = render_conf(place.address, self.port, self.home, opts)
        base = (place.read(self.data / "postgresql.conf") or b"").decode()
        place.write(self.data / "postgresql.conf", base + conf, mode=0o600, owner="postgres")
        place.write(self.data / "pg_hba.conf", render_hba(), mode=0o600, owner="postgres")

    def start(self) -> None:
        self.spawn_server([*AS_POSTGRES, str(BIN / "postgres"), "-D", str(self.data)], log=self.log,
                          pidfile=self.data / "postmaster.pid", what=self.what)

    def query(self, sql: str, dbname: str = "postgres") -> list[tuple[str, ...]]:
        """``sql`` as the superuser over the server's unix socket, with ``psql`` at the place:
        rows of strings (booleans ``t``/``f``, NULL empty)."""
        out = self._run([str(BIN / "psql"), "-h", str(self.home), "-p", str(self.port), "-U", "postgres",
                         "-d", dbname, "-X", "-q", "-tA", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                        f"SQL {sql[:60]!r}", 60)
        return [tuple(line.split("\t")) for line in out.splitlines()]

    def ping(self) -> bool:
        try:
            return self.query("SELECT 1") == [("1",)]
        except ServiceError:
            return False

    def wait_ready(self, timeout: float) -> None:
        """Bounded wait until it answers (pid from ``postmaster.pid``); fails early on exit."""
        self.wait_server(self.ping, timeout, not_started=f"{self.what}: not started")

    def stop(self) -> None:
        self.stop_server(grace_s=30, sig=signal.SIGINT)  # SIGINT = fast shutdown

    def endpoint(self) -> Endpoint:
        return Endpoint("postgresql", self.lab.site_ip(self.site), self.port, USER, PASSWORD,
                        DATABASE, self.site)

    def record(self, kind: str) -> ServerRecord:
        extra = {"role": self.role, "socket_dir": str(self.home)}
        if self.server is None:
            return ServerRecord(kind=kind, site=self.site, pid=0, pid_start=None, datadir=str(self.data),
                                log=str(self.log), port=self.port, extra=extra)
        return self.server.record(kind, port=self.port, datadir=self.data, extra=extra)


BOOTSTRAP_SQL = [
    f"CREATE ROLE {USER} LOGIN SUPERUSER PASSWORD '{PASSWORD}'",
    f"CREATE DATABASE {DATABASE} OWNER {USER}",
    # The counter probe's own role: its statements are excluded from the counts.
    "CREATE ROLE juice_probe LOGIN",
    "GRANT pg_read_all_stats TO juice_probe",
]


class Postgres(Service):
    """Centralized PostgreSQL in ``site`` (default 1); with ``read_local`` a hot standby in
    every other site (see the module doc)."""

    kind = "postgres"

    def __init__(self, lab: Sites, progress: Progress = quiet, *, site: int = 1,
                 read_local: bool = False, options: PgOptions | None = None) -> None:
        super().__init__(lab, progress)
        if site not in lab.sites:
            raise ServiceError(f"site: {site} is not a site of this lab (1..{len(lab.sites)})")
        self.read_local = read_local
        self.kind = "postgres-readlocal" if read_local else "postgres"
        self.opts = options or PgOptions()
        if self.opts.max_connections is not None and not 1 <= self.opts.max_connections <= 100_000:
            raise UserError(f"max_connections: expected 1..100000 (PostgreSQL ships 100), "
                            f"got {self.opts.max_connections}")
        self.primary = PgServer(lab, site)
        self.standbys: dict[int, PgServer] = {}
        if read_local:
            for s in lab.sites:
                if s != site:
                    sb = PgServer(lab, s)
                    sb.role = "standby"
                    self.standbys[s] = sb
        if self.opts.sync_quorum and not read_local:
            raise ServiceError("sync_quorum: only meaningful with read-local (standbys)")
        if self.opts.sync_quorum > len(self.standbys):
            raise ServiceError(f"sync_quorum: {self.opts.sync_quorum} exceeds the number of "
                               f"standbys ({len(self.standbys)})")
        self.timings: dict[str, float] = {}

    def servers(self) -> list[PgServer]:
        return [self.primary, *self.standbys.values()]

    def configure(self) -> None:
        t0 = time.monotonic()
        self.primary.initdb()
        self.primary.write_conf(self.opts)
        self.timings["initdb_s"] = time.monotonic() - t0

    def start(self) -> None:
        t0 = time.monotonic()
        self.primary.start()
        self.primary.wait_ready(60)
        for stmt in BOOTSTRAP_SQL:
            self.primary.query(stmt)
        self.primary.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", DATABASE)
        self.progress(f"postgres primary ready in site {self.primary.site}")
        if self.standbys:
            with ThreadPoolExecutor(max_workers=len(self.standbys)) as ex:
                list(ex.map(self._start_standby, self.standbys.values()))
            # Synchronous quorum only once the standbys exist (else the bootstrap would wait).
            names = sync_standby_names(self.opts, [f"s{s}" for s in self.standbys])
            if names:
                self.primary.query(f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
                self.primary.query(f"ALTER SYSTEM SET synchronous_commit = '{self.opts.synchronous_commit}'")
                self.primary.query("SELECT pg_reload_conf()")
        self.timings["start_s"] = time.monotonic() - t0

    def _start_standby(self, sb: PgServer) -> None:
        sb.fresh_home()
        p = self.primary
        # pg_basebackup runs IN the standby's site: the copy crosses the WAN like replication.
        sb._run([*AS_POSTGRES, str(BIN / "pg_basebackup"), "-h", p.place.address,
                 "-p", str(p.port), "-U", "postgres", "-D", str(sb.data), "-X", "stream",
                 "--checkpoint=fast", "--no-sync"], "pg_basebackup", 300)
        # initdb's postgresql.conf came along; point this copy at its own address and primary.
        sb.place.write(sb.data / "postgresql.auto.conf",
                       f"primary_conninfo = '{primary_conninfo(p.place.address, p.port, f's{sb.site}')}'\n"
                       f"listen_addresses = '{sb.place.address}'\n"
                       f"unix_socket_directories = '{sb.home}'\n", mode=0o600, owner="postgres")
        sb.place.write(sb.data / "standby.signal", "", mode=0o600, owner="postgres")
        sb.start()
        sb.wait_ready(120)
        self.progress(f"postgres standby ready in site {sb.site}")

    def wait_healthy(self, timeout: float = 60.0) -> None:
        self.primary.wait_ready(timeout)
        if not self.standbys:
            return
        want = {f"s{s}" for s in self.standbys}

        def streaming() -> bool:
            rows = self.primary.query("SELECT application_name FROM pg_stat_replication "
                                      "WHERE state = 'streaming'")
            return want <= {str(r[0]) for r in rows}
        assert self.primary.server is not None  # wait_ready above
        self.primary.server.wait_ready(streaming, timeout, "postgres standbys streaming", interval=0.2)
        for sb in self.standbys.values():
            rows = sb.query("SELECT pg_is_in_recovery()")
            if rows != [("t",)]:
                raise ServiceError(f"postgres in site {sb.site} is not a standby")
        mode = f"sync quorum ANY {self.opts.sync_quorum}" if self.opts.sync_quorum else "async"
        self.progress(f"postgres read-local ready: {len(self.standbys)} standbys streaming, {mode}")

    def stop(self) -> None:
        live = [s for s in self.servers() if s.server is not None]
        # Standbys first so the primary does not wait on them while shutting down.
        for s in sorted(live, key=lambda x: x.role == "primary"):
            s.stop()
        if live:
            self.progress(f"postgres: {len(live)} server(s) stopped")

    def endpoint(self, site: int) -> Endpoints:
        write = self.primary.endpoint()
        local = self.standbys.get(site)
        return Endpoints(read=local.endpoint() if local else write, write=write)

    def records(self) -> list[ServerRecord]:
        return [s.record(self.kind) for s in self.servers()]

    def deviations(self) -> list[Deviation]:
        return deviations(self.opts, self.kind)

    def logs(self) -> list[tuple[Place, Path]]:
        return [(s.place, s.log) for s in self.servers()]


def connect(ep: Endpoint, *, timeout: float = 10.0,
            autocommit: bool = True) -> psycopg.Connection[tuple[object, ...]]:
    """A psycopg connection to ``ep`` (open it inside the client's site, see ``client``)."""
    return psycopg.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password,
                           dbname=ep.database, connect_timeout=int(timeout), autocommit=autocommit)
