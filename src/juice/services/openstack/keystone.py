"""Keystone: the real Keystone 30 (OpenStack venv) served by gunicorn in every listed site.

    db = registry.deploy(lab, "galera")                       # any Juice database service
    ks = Keystone(lab, db, progress, KeystoneOptions(password_hash_rounds=4))
    ks.up()                                                   # bounded; stops what started on failure
    ks.auth_url(3)            # "http://10.210.3.2:5000/v3": what a client in site 3 uses
    ks.region(3)              # "Region3"
    creds = ks.admin_credentials()                            # the per-deployment admin (secret)
    ks.facts()                # versions and knobs for the run manifest (no secret)
    ks.stop()                 # gunicorns (TERM, then KILL) and their memcacheds

Seed deployment (as in the Juice study): every site runs its own Keystone; site k's
``keystone.conf`` points at ``db.endpoint(k)`` (its own database ``keystone``, created through
the service's admin user; oslo.db ``slave_connection`` = the read endpoint when it differs),
or at ``db.endpoint(options.db_site)`` in every site when set (one Galera writer).
``keystone-manage db_sync``, ``fernet_setup``, ``credential_setup`` and ``bootstrap`` run ONCE (one
import of keystone, a process per command: ``services.toolbatch``),
from site 1. All sites share ONE Fernet key repository and ONE credential key repository
(``<workdir>/keystone/``), so a token issued by one site validates at any other. The catalog
gets one region per site (``Region<k>``) with public/internal/admin identity endpoints at
``http://<site ip>:5000/v3``: bootstrap creates Region1, ``wait_healthy`` adds the others
through the API (admin token), idempotently.

With ``cache`` on, every site also runs its own memcached (``services.memcached``) and
Keystone's ``[cache]`` (backend ``dogpile.cache.pymemcache``) points at it, as devstack does.

Files: ``<workdir>/s<k>/keystone/{keystone.conf,keystone-s<k>.log,gunicorn.pid}`` (gunicorn and
Keystone log to the same file), ``<workdir>/keystone/{manage-<command>.log,openrc}`` (openrc is 0600:
the admin password is never logged nor put in ``facts``).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from juice import onhost
from juice.errors import ServiceError, UserError
from juice.lab.place import Place
from juice.openstack.creds import ADMIN_PROJECT, AdminCredentials, render_openrc
from juice.openstack.creds import read_openrc as read_openrc  # re-exported
from juice.paths import cache_dir
from juice.services.base import Endpoint, Progress, ServerRecord, Service, Sites, quiet
from juice.services.caches.memcached import Memcached
from juice.services.caches.memcached import version as memcached_version
from juice.services.databases.schema import create_database
from juice.services.deviations import Deviation
from juice.services.openstack.keystone_settings import CACHE_BACKEND as CACHE_BACKEND
from juice.services.openstack.keystone_settings import GUNICORN_GRACE, GUNICORN_TIMEOUT, keystone_deviations
from juice.services.openstack.keystone_settings import KeystoneOptions as KeystoneOptions
from juice.services.openstack.keystone_warm import SiteWarm, full_collections, prewarm
from juice.services.process import Server, children, port_open, spawn, stop_all
from juice.services.toolbatch import Step, run_batch
from juice.util import atomic

VENV = Path(os.environ.get("JUICE_OPENSTACK_VENV", str(cache_dir() / "openstack")))
PORT = 5000
DB_NAME = "keystone"
ADMIN_USER = "admin"
APP = "juice_keystone_wsgi:application"
# The WSGI module gunicorn loads (juice.onhost.keystone_wsgi: it empties sys.argv before Keystone
# reads it), and beside it what it imports: each full garbage collection of a worker, logged
# (juice.onhost.gc_probe; services.openstack.keystone_warm reads the lines).
WSGI_SHIM = onhost.source("keystone_wsgi")
GC_PROBE = onhost.source("gc_probe")


MANAGE_COMMANDS = ("db_sync", "fernet_setup", "credential_setup", "bootstrap")
# Region<k> and its identity endpoints, through the API (argv: site 1's /v3, [[region, url]...];
# the admin in OS_USERNAME/OS_PASSWORD/OS_PROJECT_NAME); idempotent, 4 regions at a time.
REGIONS_PY = onhost.source("keystone_api")


# ---- options, credentials, rendering (pure) ----------------------------------------------

def render_conf(*, db_url: str, slave_url: str | None, memcache: str | None, fernet_dir: Path,
                credential_dir: Path, opts: KeystoneOptions) -> str:
    """keystone.conf for one site (logs go to stderr, which gunicorn's log file captures)."""
    lines = [
        "# rendered by juice",
        "[DEFAULT]",
        "use_stderr = true",
        "debug = false",
        "",
        "[database]",
        f"connection = {db_url}",
    ]
    if slave_url:
        lines.append(f"slave_connection = {slave_url}")
    if opts.max_pool_size is not None:
        lines.append(f"max_pool_size = {opts.max_pool_size}")
    if opts.max_overflow is not None:
        lines.append(f"max_overflow = {opts.max_overflow}")
    lines += [
        "",
        "[token]",
        "provider = fernet",
        f"expiration = {opts.token_expiration_s}",
        "",
        "[fernet_tokens]",
        f"key_repository = {fernet_dir}",
        "max_active_keys = 3",
        "",
        "[fernet_receipts]",
        f"key_repository = {fernet_dir}",
        "",
        "[credential]",
        f"key_repository = {credential_dir}",
        "",
        "[identity]",
        "password_hash_algorithm = bcrypt",
        f"password_hash_rounds = {opts.password_hash_rounds}",
        "",
        "[cache]",
        f"enabled = {'true' if opts.cache and memcache else 'false'}",
    ]
    if opts.cache and memcache:
        lines += [f"backend = {CACHE_BACKEND}", f"memcache_servers = {memcache}"]
    return "\n".join(lines) + "\n"


ACCESS_FORMAT = "juice-access %(m)s %(U)s q=%(q)s %(s)s"


def gunicorn_args(bind: str, workers: int, pidfile: Path, shim_dir: Path,
                  access_log: bool = False) -> list[str]:
    """The gunicorn command line of one site (sync workers; long timeout: bcrypt + WAN).
    ``access_log``: one ``juice-access METHOD PATH q=QUERY STATUS`` line per request in the log."""
    access = ["--access-logfile", "-", "--access-logformat", ACCESS_FORMAT] if access_log else []
    return [str(VENV / "bin" / "gunicorn"), "--bind", bind, "--workers", str(workers),
            "--pythonpath", str(shim_dir),
            "--worker-class", "sync", GUNICORN_TIMEOUT[0], GUNICORN_TIMEOUT[1],
            GUNICORN_GRACE[0], GUNICORN_GRACE[1],
            "--pid", str(pidfile), "--error-logfile", "-", "--log-level", "info", *access,
            "--name", "keystone", APP]


def db_url_for(ep: Endpoint) -> str:
    """The oslo.db URL of Keystone's own database on the server of ``ep``."""
    url = replace(ep, database=DB_NAME).url()
    return url + ("?charset=utf8mb4" if ep.driver == "mysql" else "")


def dist_version(name: str) -> str:
    """Version of a distribution installed in the OpenStack venv (read from its dist-info)."""
    for d in sorted(VENV.glob(f"lib/python3*/site-packages/{name}-*.dist-info")):
        return d.name[len(name) + 1:].removesuffix(".dist-info")
    return "unknown"


# each distribution's version, asked of the venv's Python (juice.onhost.dists)
VERSIONS_PY = onhost.source("dists")


def venv_versions(place: Place, names: list[str]) -> dict[str, str]:
    """Versions of distributions in the OpenStack venv AT ``place`` (where the servers run;
    names as pip spells them), asked of that venv's Python; "unknown" when it cannot say."""
    r = place.run([str(VENV / "bin" / "python"), "-c", VERSIONS_PY, "versions", *names], timeout=60)
    try:
        got = json.loads(r.out) if r.ok else {}
    except ValueError:
        got = {}
    return {n: str(got.get(n, "unknown")) for n in names}


# ---- the service ---------------------------------------------------------------------------

class Keystone(Service):
    """Keystone in every site of ``options.sites`` on database service ``db``."""

    kind = "keystone"

    def __init__(self, lab: Sites, db: Service, progress: Progress = quiet,
                 options: KeystoneOptions | None = None) -> None:
        super().__init__(lab, progress)
        self.db = db
        self.opts = options or KeystoneOptions()
        self.ks_sites = list(self.opts.sites) if self.opts.sites is not None else list(lab.sites)
        for s in self.ks_sites:
            if s not in lab.sites:
                raise UserError(f"sites: {s} is not a site of this lab (1..{len(lab.sites)})")
        self.first = self.ks_sites[0]
        self._password = secrets.token_urlsafe(24)
        self.memcached = Memcached(lab, progress, sites=self.ks_sites) if self.opts.cache else None
        self.servers: dict[int, Server] = {}  # site -> its gunicorn master
        self.timings: dict[str, float] = {}
        self.warm: dict[int, SiteWarm] = {}  # site -> what the pre-warm did (keystone_warm)
        # a load balancer's URL in front of every site's Keystone (haproxy, set before
        # configure): the catalog and every client use it; health checks go to each server
        self.front: str | None = None

    # ---- names -----------------------------------------------------------------------------
    def base(self, site: int) -> Path:
        """The key repositories, the WSGI shim and keystone-manage's logs used by ``site``'s
        Keystone (one directory per machine: every site of a local lab shares site 1's)."""
        return self.lab.place(site).root / "keystone"

    @property
    def shared(self) -> Path:
        return self.base(self.first)

    def home(self, site: int) -> Path:
        return self.lab.place(site).root / f"s{site}" / "keystone"

    def log(self, site: int) -> Path:
        return self.home(site) / f"keystone-s{site}.log"  # unique name: collect_logs flattens

    def conf(self, site: int) -> Path:
        return self.home(site) / "keystone.conf"

    def _served(self, site: int) -> int:
        return site if site in self.ks_sites else self.first

    def _own_repository(self, site: int) -> bool:
        """True when ``site``'s Keystone cannot read site 1's key repositories (another machine):
        they are copied to its own."""
        return site != self.first and not self.lab.place(site).shared_disk

    def auth_url(self, site: int) -> str:
        """``http://<ip>:5000/v3`` of the Keystone a client in ``site`` uses (its own; the load
        balancer's ``front`` when there is one)."""
        return f"{self.front}/v3" if self.front else self.server_url(site)

    def server_url(self, site: int) -> str:
        """``http://<ip>:5000/v3`` of the Keystone server of ``site`` itself (never the front)."""
        return f"http://{self.lab.site_ip(self._served(site))}:{PORT}/v3"

    def region(self, site: int) -> str:
        return f"Region{self._served(site)}"

    def admin_credentials(self) -> AdminCredentials:
        return AdminCredentials(urls=tuple((s, self.auth_url(s)) for s in self.ks_sites),
                                username=ADMIN_USER, password=self._password)

    @property
    def openrc(self) -> Path:
        """The admin's openrc, on THIS machine (for the user and the CLI)."""
        return self.lab.workdir / "keystone" / "openrc"

    def facts(self) -> dict[str, Any]:
        """What a run manifest records about this deployment (never a secret)."""
        return {
            "keystone_version": dist_version("keystone"),
            "gunicorn_version": dist_version("gunicorn"),
            "memcached_version": memcached_version() if self.opts.cache else None,
            "workers": self.opts.workers,
            "cache": self.opts.cache,
            "cache_backend": CACHE_BACKEND if self.opts.cache else None,
            "password_hash_rounds": self.opts.password_hash_rounds,
            "token_expiration_s": self.opts.token_expiration_s,
            "token_provider": "fernet",
            "db_kind": self.db.kind,
            "sites": list(self.ks_sites),
            "regions": [self.region(s) for s in self.ks_sites],
            **({"front": self.front} if self.front else {}),
            "prewarm": ({str(s): w.to_dict() for s, w in sorted(self.warm.items())}
                        if self.opts.prewarm else False),
            "timings_s": {k: round(v, 2) for k, v in self.timings.items()},
        }

    # ---- configure ---------------------------------------------------------------------------
    def configure(self) -> None:
        t0 = time.monotonic()
        for site in self.ks_sites:
            place = self.lab.place(site)
            for exe in ("gunicorn", "keystone-manage"):
                if not place.run(["test", "-x", str(VENV / "bin" / exe)]).ok:
                    raise ServiceError(f"{place.label}: OpenStack venv incomplete: {VENV / 'bin' / exe} "
                                       "is missing: run scripts/setup.sh")
            if self._port_taken(site):
                raise ServiceError(f"keystone in site {site}: port {place.address}:{PORT} is already "
                                   "taken (another Keystone? `juice keystone down` first)")
        self._create_database()
        for site in self.ks_sites:
            if site == self.first or self._own_repository(site):
                place, base = self.lab.place(site), self.base(site)
                place.remove(base)
                for d in ("fernet-keys", "credential-keys"):
                    place.mkdir(base / d)
                    place.run(["chmod", "700", str(base / d)])
                place.write(base / "juice_keystone_wsgi.py", WSGI_SHIM)
                place.write(base / "juice_gc_probe.py", GC_PROBE)
        if self.memcached is not None:
            self.memcached.configure()
        for s in self.ks_sites:
            place = self.lab.place(s)
            place.remove(self.home(s))
            place.mkdir(self.home(s))
            ep = self.db.endpoint(s if self.opts.db_site is None else self.opts.db_site)
            slave = db_url_for(ep.read) if ep.read != ep.write else None
            memc = self.memcached.address(s) if self.memcached is not None else None
            place.write(self.conf(s), render_conf(
                db_url=db_url_for(ep.write), slave_url=slave, memcache=memc,
                fernet_dir=self.base(s) / "fernet-keys", credential_dir=self.base(s) / "credential-keys",
                opts=self.opts), mode=0o600)
        # keystone-manage runs before the memcacheds start: its own copy of site 1's config,
        # cache off (nothing it writes is cached yet).
        ep = self.db.endpoint(self.first)
        self.lab.place(self.first).write(self.shared / "manage.conf", render_conf(
            db_url=db_url_for(ep.write), slave_url=None, memcache=None,
            fernet_dir=self.shared / "fernet-keys", credential_dir=self.shared / "credential-keys",
            opts=replace(self.opts, cache=False)), mode=0o600)
        self.timings["configure_files_s"] = time.monotonic() - t0
        owner = ["--keystone-user", "root", "--keystone-group", "root"]
        url = self.auth_url(self.first)
        # One import of keystone-manage, a process per command (toolbatch); the key
        # repositories need no database: made while db_sync runs.
        self._manage([
            [("db_sync", ["db_sync"], 600.0, {}), ("fernet_setup", ["fernet_setup", *owner], 120.0, {}),
             ("credential_setup", ["credential_setup", *owner], 120.0, {})],
            [("bootstrap", [
                "bootstrap", "--bootstrap-username", ADMIN_USER, "--bootstrap-project-name", ADMIN_PROJECT,
                "--bootstrap-role-name", "admin", "--bootstrap-service-name", "keystone",
                "--bootstrap-region-id", self.region(self.first), "--bootstrap-admin-url", url,
                "--bootstrap-public-url", url, "--bootstrap-internal-url", url], 300.0,
              {"OS_BOOTSTRAP_PASSWORD": self._password})]])
        self._copy_keys()
        atomic.write_text(self.openrc, render_openrc(self.admin_credentials(), self.first,
                                                     self.region(self.first)), mode=0o600)
        self.timings["configure_s"] = time.monotonic() - t0

    def _copy_keys(self) -> None:
        """Site 1's key repositories to every site that cannot read them (0600 files)."""
        targets = [s for s in self.ks_sites if self._own_repository(s)]
        if not targets:
            return
        first = self.lab.place(self.first)
        listed = first.run(["find", str(self.shared / "fernet-keys"), str(self.shared / "credential-keys"),
                            "-type", "f"])
        files = {Path(line): first.read(Path(line)) for line in listed.out.split()}
        for s in targets:
            place = self.lab.place(s)
            for path, data in files.items():
                place.write(self.base(s) / path.relative_to(self.shared), data or b"", mode=0o600)
        self.progress(f"keystone: key repositories copied to {len(targets)} site(s)")

    def _port_taken(self, site: int) -> bool:
        return port_open(self.lab.place(site), self.lab.site_ip(site), PORT)

    def _create_database(self) -> None:
        """``CREATE DATABASE keystone`` on the db service, as its admin user, from site 1."""
        create_database(self.lab, self.db, self.first, DB_NAME, self.progress, who="keystone",
                        drivers=("mysql", "postgresql"))

    def _manage(self, groups: list[list[tuple[str, list[str], float, dict[str, str]]]]) -> None:
        """``keystone-manage`` commands in site 1 (bounded; a group's commands at once), with one
        import of keystone (``toolbatch``); each command's output in manage-<what>.log."""
        conf = ["keystone-manage", "--config-file", str(self.shared / "manage.conf")]
        steps = [[Step(f"keystone-manage {what}", [*conf, *args], self.shared / f"manage-{what}.log",
                       env=env, timeout_s=timeout) for what, args, timeout, env in group]
                 for group in groups]
        self.progress(f"keystone-manage {', '.join(w for g in groups for w, *_ in g)} "
                      f"(site {self.first}, {self.db.kind})...")
        done = run_batch(self.lab.place(self.first), VENV / "bin" / "python", "keystone.cmd.manage:main",
                         steps, workdir=self.shared, env=self._env())
        for what, *_ in (c for g in groups for c in g):
            self.timings[f"{what}_s"] = done[f"keystone-manage {what}"]
        self.timings["manage_import_s"] = done["import"]
        self.progress("keystone-manage done: " + ", ".join(
            f"{w} {self.timings[f'{w}_s']:.1f} s" for g in groups for w, *_ in g)
            + f" (+ {done['import']:.1f} s import)")

    def _env(self, extra: dict[str, str] | None = None, site: int | None = None) -> dict[str, str]:
        env = {"PATH": f"{VENV / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
               "HOME": str(self.base(site if site is not None else self.first)), "PYTHONUNBUFFERED": "1"}
        if site is not None:
            env["OS_KEYSTONE_CONFIG_DIR"] = str(self.home(site))
        return {**env, **(extra or {})}

    # ---- start / health ---------------------------------------------------------------------
    def start(self) -> None:
        t0 = time.monotonic()
        if self.memcached is not None:
            self.memcached.start()
            self.memcached.wait_healthy(30)
        for s in self.ks_sites:
            self._start_site(s)
        self.timings["start_s"] = time.monotonic() - t0
        self.progress(f"keystone: gunicorn ({self.opts.workers} worker(s)) starting in "
                      f"{len(self.ks_sites)} site(s)")

    def _start_site(self, s: int) -> None:
        place = self.lab.place(s)
        pidfile = self.home(s) / "gunicorn.pid"
        place.remove(pidfile)
        argv = gunicorn_args(f"{place.address}:{PORT}", self.opts.workers, pidfile, self.base(s),
                             self.opts.access_log)
        # the spawned process IS the gunicorn master
        self.servers[s] = spawn(place, argv, log=self.log(s), what=f"keystone in site {s}",
                                env=self._env(site=s), cwd=self.home(s))

    def _workers(self, site: int, srv: Server) -> list[int]:
        """The gunicorn workers of ``site`` (children of its master), asked at its place."""
        return children(self.lab.place(site), srv.pid)

    def kill(self, site: int) -> dict[str, Any]:
        """SIGKILL the gunicorn master of ``site`` and its workers (a crashed Keystone)."""
        srv = self.servers.get(site)
        if srv is None or not srv.running():
            raise ServiceError(f"no running keystone in site {site}")
        workers = self._workers(site, srv)
        pid = srv.kill(workers)
        del self.servers[site]
        return {"pid": pid, "workers": workers}

    def restart(self, site: int, timeout: float = 120.0) -> dict[str, Any]:
        """Start the Keystone of ``site`` again and wait until it answers."""
        if site not in self.ks_sites or site in self.servers:
            raise ServiceError(f"keystone in site {site}: nothing killed to restart")
        t0 = time.monotonic()
        self._start_site(site)
        self.servers[site].wait_ready(lambda: self._answers(site), timeout, interval=0.25,
                                      fail=lambda: self._crash_loop(site))
        return {"pid": self.servers[site].pid, "restart_s": round(time.monotonic() - t0, 3)}

    def _crash_loop(self, site: int) -> str | None:
        """Why waiting for ``site`` is pointless although gunicorn runs: its workers keep dying."""
        raw = self.lab.place(site).read(self.log(site), max_bytes=4 << 20)
        booted = raw.count(b"Booting worker") if raw else 0
        if booted > self.opts.workers + 3:
            return f"gunicorn workers keep dying ({booted} boots)"
        return None

    def _answers(self, site: int) -> bool:
        status, body = self.lab.place(site).http(self.server_url(site), timeout=5)
        return status == 200 and '"version"' in body

    def wait_healthy(self, timeout: float = 120.0) -> None:
        """Every site answers GET /v3 (polled in parallel, bounded), then the catalog gets
        one region per site. ServiceError names the first failing site and its log tail."""
        t0 = time.monotonic()

        def one(site: int) -> None:
            self.servers[site].wait_ready(lambda: self._answers(site), timeout, interval=0.25,
                                          fail=lambda: self._crash_loop(site))
            self.progress(f"keystone in site {site} answers ({time.monotonic() - t0:.1f} s)")

        with ThreadPoolExecutor(max_workers=len(self.ks_sites)) as ex:
            for f in [ex.submit(one, s) for s in self.ks_sites]:
                f.result()
        self.timings["healthy_s"] = time.monotonic() - t0
        self._register_regions()
        self.timings["regions_s"] = time.monotonic() - t0 - self.timings["healthy_s"]
        if self.opts.prewarm:
            t1 = time.monotonic()
            self._prewarm()
            self.timings["prewarm_s"] = time.monotonic() - t1

    def gc_counters(self) -> dict[str, int]:
        """Full garbage collections of every site's workers so far and their total pause (ms),
        from the sites' logs (``juice.onhost.gc_probe``): ``servercounters``' ``keystone.*``."""
        n, ms = 0, 0.0
        for s in self.ks_sites:
            for pauses in full_collections(self.lab.place(s).read(self.log(s), max_bytes=64 << 20)
                                           or b"").values():
                n, ms = n + len(pauses), ms + sum(pauses)
        return {"keystone.full_gcs": n, "keystone.full_gc_ms": round(ms)}

    def _prewarm(self) -> None:
        """Every site's workers through their first full garbage collection (``keystone_warm``),
        all sites at once; a site that did not get there is said, not fatal."""
        creds = self.admin_credentials()
        env = {"OS_USERNAME": creds.username, "OS_PASSWORD": creds.password,
               "OS_PROJECT_NAME": creds.project_name}

        def one(s: int) -> SiteWarm:
            return prewarm(self.lab.place(s), self.server_url(s), self.log(s),
                           self._workers(s, self.servers[s]), env, str(VENV / "bin" / "python3"))

        sites = [s for s in self.ks_sites if self.opts.prewarm_sites is None or s in self.opts.prewarm_sites]
        if not sites:
            return
        with ThreadPoolExecutor(max_workers=min(64, len(sites))) as ex:  # each bounded in time
            for s, w in zip(sites, ex.map(one, sites), strict=True):
                self.warm[s] = w
        done = [w for w in self.warm.values() if w.done]
        pauses = sorted(ms for w in done for ms in w.first_full_gc_ms.values())
        self.progress(f"keystone: pre-warmed {len(done)}/{len(self.warm)} site(s) through each worker's "
                      f"first full garbage collection ({sum(w.requests for w in self.warm.values())} "
                      f"requests" + (f"; pauses {pauses[0]:.0f}-{pauses[-1]:.0f} ms)" if pauses else ")"))
        cold = [w for w in self.warm.values() if not w.done]
        if cold:
            self.progress(f"keystone: pre-warm stopped before every worker's first full garbage collection "
                          f"in site(s) {', '.join(str(w.site) for w in cold)} ({cold[0].error or 'bounded'}; "
                          f"{cold[0].seconds} s): a first run there may include that one-time pause")

    def _register_regions(self) -> None:
        """Region<k> + public/internal/admin identity endpoints for every site (idempotent),
        through the API from site 1 (``juice.onhost.keystone_api``, run with the OpenStack venv's Python)."""
        creds = self.admin_credentials()
        want = [[self.region(s), self.auth_url(s)] for s in self.ks_sites]
        r = self.lab.place(self.first).run(
            [str(VENV / "bin" / "python3"), "-c", REGIONS_PY, "regions", self.server_url(self.first),
             json.dumps(want)],
            timeout=300, env={"OS_USERNAME": creds.username, "OS_PASSWORD": creds.password,
                              "OS_PROJECT_NAME": creds.project_name})
        if not r.ok:
            lines = (r.err or r.out).strip().splitlines()
            raise ServiceError(f"keystone: registering the regions failed: {lines[-1] if lines else r.rc}")
        self.progress(f"keystone: catalog has {len(self.ks_sites)} region(s)")

    def up(self, timeout: float = 300.0) -> Keystone:
        super().up(timeout)
        return self

    # ---- stop / records ---------------------------------------------------------------------
    def stop(self) -> None:
        """gunicorn: TERM (graceful) to every master, bounded wait, then KILL masters and any
        worker left; then the memcacheds."""
        live = {s: srv for s, srv in self.servers.items() if srv.running()}
        workers = {s: self._workers(s, srv) for s, srv in live.items()}
        stop_all(self.servers.values(), grace_s=20, sig=signal.SIGTERM)
        for s, pids in workers.items():
            self.lab.place(s).terminate([(w, None) for w in pids], grace_s=5)
        if live:
            self.progress(f"keystone: gunicorn stopped in {len(live)} site(s)")
        self.servers.clear()
        if self.memcached is not None:
            self.memcached.stop()

    def deviations(self) -> list[Deviation]:
        """Keystone's and its memcacheds' (``juice.services.deviations``)."""
        return keystone_deviations(self.opts) + (self.memcached.deviations() if self.memcached else [])

    def records(self) -> list[ServerRecord]:
        recs = [srv.record(self.kind, port=PORT, datadir=self.home(s),
                           extra={"workers": self.opts.workers, "region": self.region(s)})
                for s, srv in self.servers.items()]
        return recs + (self.memcached.records() if self.memcached is not None else [])

    def logs(self) -> list[tuple[Place, Path]]:
        first = self.lab.place(self.first)
        out = [(self.lab.place(s), self.log(s)) for s in self.ks_sites]
        out += [(first, self.shared / f"manage-{w}.log") for w in MANAGE_COMMANDS]
        return out + (self.memcached.logs() if self.memcached is not None else [])



def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (gunicorn workers of a master), from /proc."""
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(x) for x in (task / "children").read_text().split()]
    except OSError:
        pass
    return out
