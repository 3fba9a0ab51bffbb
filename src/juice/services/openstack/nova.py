"""nova's control plane: the real nova 34 (OpenStack venv) nova-api, nova-conductor and k
nova-schedulers, placed in lab sites, with cell0 + cell1 set up as nova-manage does.

    nova = Nova(lab, db, mq, ks, placement, progress, NovaOptions(schedulers=2))
    nova.up()                 # databases, cells, catalog, processes, bounded health wait
    nova.api_url()            # "http://10.210.1.2:8774/v2.1"
    nova.services()           # GET /os-services as Keystone's admin
    nova.discover_hosts()     # nova-manage cell_v2 discover_hosts --by-service (never in parallel)
    nova.stop()               # every process by recorded pid (TERM, then KILL)

Every piece runs at its site's PLACE (``juice.lab.place``: a namespace of a local lab or an SSH
host; the OpenStack venv is expected there): files are written and read there, tools run there,
processes are spawned and stopped there, logs are fetched from there.

Set-up (``configure``), from the control site, each step a bounded ``nova-manage`` run whose
output goes to ``<root>/s<control>/nova/manage.log``: databases ``nova_api``, ``nova_cell0`` and
``nova_cell1`` on Juice's database service; ``api_db sync``; ``cell_v2 map_cell0``;
``cell_v2 create_cell --name cell1`` (the RabbitMQ transport URL); ``db sync`` (cell1 and cell0).
Keystone gets the service user ``nova`` (project ``service``, role admin; it also talks to
placement, glance and neutron) and the ``compute`` endpoint.

Processes (each ``process.spawn``-ed in its site, stopped by pid):
- nova-api: gunicorn serving ``nova.wsgi.osapi_compute:application`` through an argv shim
  (oslo.config parses sys.argv), config from ``OS_NOVA_CONFIG_DIR`` (nova.conf + api-paste.ini
  copied from the venv);
- nova-conductor, and nova-scheduler x k (``NovaOptions.scheduler_placement``), each with its
  own nova.conf and service host name (``juice-conductor``, ``juice-sched-<i>``).

Files: ``<root>/s<site>/nova/<host>/{nova.conf, <host>.log, ...}`` per process (its state_path),
at the place of its site (``root``: the lab's directory there).
Compute hosts are ``nova_compute.NovaComputes``; the whole stack is ``nova_deploy.NovaDeployment``.
"""

from __future__ import annotations

import secrets
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from juice.errors import ServiceError, UserError
from juice.lab.place import Place
from juice.openstack.http import issue_token, request
from juice.services.base import Progress, ServerRecord, Service, Sites, quiet
from juice.services.buses.rabbitmq import RabbitMQ
from juice.services.databases.schema import create_database
from juice.services.deviations import Deviation, spec_set
from juice.services.openstack.keystone import VENV, Keystone, venv_versions
from juice.services.openstack.nova_conf import ConfContext, NovaOptions, backend_env, render_nova_conf
from juice.services.openstack.nova_settings import nova_deviations
from juice.services.openstack.os_api import (
    Catalog,
    argv_shim,
    check_venv,
    gunicorn_argv,
    os_env,
    venv_bin,
    wait_http,
)
from juice.services.openstack.placement import Placement
from juice.services.process import Server, children, port_open, run_to_end, spawn, stop_all
from juice.services.toolbatch import Step, run_batch

API_PORT = 8774
DATABASES = ("nova_api", "nova_cell0", "nova_cell1")
APP = "juice_nova_api_wsgi:application"


class Nova(Service):
    """nova-api + nova-conductor + k nova-schedulers (see the module doc)."""

    kind = "nova"

    def __init__(self, lab: Sites, db: Service, mq: RabbitMQ, ks: Keystone, placement: Placement,
                 progress: Progress = quiet, options: NovaOptions | None = None) -> None:
        super().__init__(lab, progress)
        self.db, self.mq, self.ks, self.placement = db, mq, ks, placement
        self.opts = options or NovaOptions()
        for s in sorted(self.opts.sites_used()):
            if s not in lab.sites:
                raise UserError(f"nova: site {s} is not a site of this lab (1..{len(lab.sites)})")
        self.site = self.opts.control_site
        self.password = secrets.token_urlsafe(24)
        # OSProfiler (opts.profiler): the backend's URL is set by the deployment that starts it
        self.profiler_url = ""
        # keystonemiddleware's memcached_servers in nova-api and nova-compute (None: unset)
        self.authtoken_memcached: str | None = None
        self.profiler_key = secrets.token_hex(16) if self.opts.profiler else ""
        self.servers: dict[str, Server] = {}   # service host name -> its process
        self.timings: dict[str, float] = {}
        self.front: str | None = None  # a load balancer's URL in front of nova-api (the catalog's)

    # ---- names -----------------------------------------------------------------------------
    def place(self, site: int) -> Place:
        return self.lab.place(site)

    def state_root(self, site: int) -> Path:
        """nova's directory at ``site``'s place: the state paths of the processes there."""
        return self.place(site).root / f"s{site}" / "nova"

    def site_of(self, host: str) -> int:
        """The site of a control-plane process (``juice-manage``: the control site)."""
        return next((s for _, h, s in self.roles() if h == host), self.site)

    def home(self, host: str) -> Path:
        return self.state_root(self.site_of(host)) / host

    def log(self, host: str) -> Path:
        return self.home(host) / f"{host}.log"

    @property
    def manage_log(self) -> Path:
        return self.state_root(self.site) / "manage.log"

    def api_url(self) -> str:
        """What clients and the catalog use: the load balancer's ``front``, else nova-api."""
        return f"{self.front}/v2.1" if self.front else self.server_url()

    def server_url(self) -> str:
        return f"http://{self.lab.site_ip(self.opts.api)}:{API_PORT}/v2.1"

    def roles(self) -> list[tuple[str, str, int]]:
        """(role, service host name, site) of every control-plane process."""
        out = [("api", "juice-api", self.opts.api), ("conductor", "juice-conductor", self.opts.conductor)]
        out += [("scheduler", f"juice-sched-{i}", s)
                for i, s in enumerate(self.opts.scheduler_placement, start=1)]
        return out

    def context(self, site: int, db_site: int | None = None) -> ConfContext:
        """The config values of a process in ``site`` (its state paths there); ``db_site``: the
        database node it writes to (``db_writers: local``), default the control site's."""
        ep = self.db.endpoint(db_site if db_site is not None else self.site).write

        def url(name: str) -> str:
            return replace(ep, database=name).url() + "?charset=utf8mb4"

        return ConfContext(transport_url=self.transport_url(), api_db_url=url("nova_api"),
                           cell_db_url=url("nova_cell1"), auth_url=self.ks.auth_url(self.site),
                           region=self.ks.region(self.site), password=self.password,
                           state_root=str(self.state_root(site)),
                           api_paste=str(self.home("juice-api") / "api-paste.ini"),
                           profiler_url=self.profiler_url, profiler_key=self.profiler_key,
                           authtoken_memcached=self.authtoken_memcached or "")

    def transport_url(self) -> str:
        """oslo.messaging's transport_url: every RabbitMQ node (the control site's first) when
        the bus is a cluster, else its one node."""
        return self.mq.urls_all(self.site) if len(self.mq.nodes) > 1 else self.mq.url(self.site)

    def cell0_url(self) -> str:
        ep = self.db.endpoint(self.site).write
        return replace(ep, database="nova_cell0").url() + "?charset=utf8mb4"

    # ---- configure: databases, cells, catalog, files ----------------------------------------
    def configure(self) -> None:
        t0 = time.monotonic()
        if self.opts.profiler and not self.profiler_url:
            raise ServiceError("nova: profiler is on but no backend was given (NovaDeployment "
                               "starts its Redis before nova)")
        for s in sorted(self.opts.sites_used()):
            check_venv(self.place(s), "gunicorn", "nova-manage", "nova-conductor", "nova-scheduler")
        if port_open(self.place(self.opts.api), self.lab.site_ip(self.opts.api), API_PORT):
            raise ServiceError(f"nova-api in site {self.opts.api}: port {API_PORT} is already taken "
                               "(another nova still running?)")
        for s in sorted(self.opts.sites_used()):
            self.place(s).remove(self.state_root(s))
            self.place(s).mkdir(self.state_root(s))
        for name in DATABASES:
            create_database(self.lab, self.db, self.site, name, self.progress)
        local = self.opts.db_writers == "local"
        for role, host, site in [("manage", "juice-manage", self.site), *self.roles()]:
            place, home = self.place(site), self.home(host)
            place.mkdir(home / "locks")
            ctx = self.context(site, site if local else None)
            place.write(home / "nova.conf", render_nova_conf(
                role, ctx, self.opts, host=host, my_ip=self.lab.site_ip(site)), mode=0o600)
        api, at = self.home("juice-api"), self.place(self.opts.api)
        paste = VENV / "etc" / "nova" / "api-paste.ini"
        r = at.run(["cp", str(paste), str(api / "api-paste.ini")])
        if not r.ok:
            raise ServiceError(f"{at.label}: copying {paste} failed: {r.err.strip() or r.rc} "
                               "(is the OpenStack venv complete there? run scripts/setup.sh)")
        at.write(api / "juice_nova_api_wsgi.py", argv_shim("nova.wsgi.osapi_compute"))
        self._cells()
        cat = Catalog(self.lab, self.ks)
        cat.service_user("nova", self.password)
        cat.register("nova", "compute", self.api_url())
        self.timings["configure_s"] = time.monotonic() - t0
        self.progress(f"nova: cells ready, in the catalog ({self.timings['configure_s']:.1f} s)")

    def manage(self, *args: str, timeout: float = 600.0) -> float:
        """One ``nova-manage`` run in the control site (bounded); returns its duration."""
        home = self.home("juice-manage")
        what = "nova-manage " + " ".join(a for a in args if "://" not in a)  # no password in errors
        return run_to_end(self.place(self.site), [venv_bin("nova-manage"), "--config-file",
                                                  home / "nova.conf", *args],
                          log=self.manage_log, what=what, timeout=timeout, env=os_env(home))

    def _cells(self) -> None:
        steps: list[tuple[str, list[str]]] = [
            ("api_db_sync", ["api_db", "sync"]),
            ("map_cell0", ["cell_v2", "map_cell0", "--database_connection", self.cell0_url()]),
            ("create_cell", ["cell_v2", "create_cell", "--name", "cell1", "--database_connection",
                             self.context(self.site).cell_db_url, "--transport-url", self.transport_url()]),
            ("db_sync", ["db", "sync"]),
        ]
        # one import of nova-manage, a process per command, one after the other (toolbatch)
        self.progress("nova-manage " + ", ".join(" ".join(a[:2]) for _, a in steps) + "...")
        home = self.home("juice-manage")
        conf = ["nova-manage", "--config-file", str(home / "nova.conf")]
        done = run_batch(self.place(self.site), VENV / "bin" / "python", "nova.cmd.manage:main",
                         [[Step(f"nova-manage {name}", [*conf, *args], self.manage_log, timeout_s=600.0)]
                          for name, args in steps], workdir=home, env=os_env(home))
        for name, _ in steps:
            self.timings[f"{name}_s"] = done[f"nova-manage {name}"]
        self.timings["manage_import_s"] = done["import"]
        self.progress(f"nova: api_db sync {self.timings['api_db_sync_s']:.1f} s, "
                      f"db sync {self.timings['db_sync_s']:.1f} s (+ {done['import']:.1f} s import)")

    # ---- start / health ---------------------------------------------------------------------
    def start(self) -> None:
        for role, host, site in self.roles():
            self._start(role, host, site)
        self.progress(f"nova: api, conductor and {len(self.opts.scheduler_placement)} scheduler(s) starting")

    def _start(self, role: str, host: str, site: int) -> None:
        home = self.home(host)
        env = os_env(home, backend_env(self.opts))
        if role == "api":
            argv = gunicorn_argv(f"{self.lab.site_ip(site)}:{API_PORT}", self.opts.api_workers,
                                 home / "gunicorn.pid", APP, "nova-api", pythonpath=home)
            env.update({"OS_NOVA_CONFIG_DIR": str(home)})
        else:
            argv = [str(venv_bin(f"nova-{role}")), "--config-file", str(home / "nova.conf")]
        self.servers[host] = spawn(self.place(site), argv, log=self.log(host),
                                   what=f"nova-{role} {host} in site {site}", env=env, cwd=home)

    def wait_healthy(self, timeout: float = 180.0) -> None:
        """nova-api answers GET / (no token), then the conductor and every scheduler are
        registered and up in GET /os-services (bounded; ServiceError with the log tail)."""
        t0 = time.monotonic()
        api = self.servers["juice-api"]
        root = self.server_url().rsplit("/", 1)[0] + "/"
        api.wait_ready(lambda: wait_http(self.lab, self.opts.api, root), timeout, interval=0.25)
        self.progress(f"nova-api answers ({time.monotonic() - t0:.1f} s)")
        for role, host, _ in self.roles()[1:]:
            srv = self.servers[host]
            left = max(1.0, timeout - (time.monotonic() - t0))
            srv.wait_ready(lambda h=host, r=role: self._service_up(f"nova-{r}", h), left,  # type: ignore[misc]
                           interval=0.5)
        self.timings["healthy_s"] = time.monotonic() - t0
        self.progress(f"nova: conductor and schedulers up ({self.timings['healthy_s']:.1f} s)")

    def _token(self) -> str:
        return issue_token(self.lab, self.ks.first, self.ks.admin_credentials())

    def services(self, site: int | None = None) -> list[dict[str, Any]]:
        """GET /os-services as Keystone's admin (from the API's site by default)."""
        s = self.opts.api if site is None else site
        r = request(self.lab, s, "GET", self.api_url() + "/os-services",
                    headers={"X-Auth-Token": self._token(), "OpenStack-API-Version": "compute 2.53"})
        if r.status != 200:
            raise ServiceError(f"nova GET /os-services: {r.status} {r.body[:200]!r}")
        out: list[dict[str, Any]] = r.json()["services"]
        return out

    def _service_up(self, binary: str, host: str) -> bool:
        try:
            return any(x["binary"] == binary and x["host"] == host and x["state"] == "up"
                       for x in self.services())
        except Exception:
            return False

    def discover_hosts(self, timeout: float = 600.0) -> float:
        """``nova-manage cell_v2 discover_hosts --by-service``: maps the compute services
        registered since the last call to cell1. Never run two at once (nova does not lock)."""
        return self.manage("cell_v2", "discover_hosts", "--by-service", timeout=timeout)

    # ---- stop / kill / records --------------------------------------------------------------
    def _workers(self, srv: Server) -> list[int]:
        """The forked workers of a running process (gunicorn's, the conductor's), at its place."""
        return children(srv.place, srv.pid) if srv.pid and srv.running() else []

    def pids(self) -> list[int]:
        """Every process of the control plane, forked workers included (pids at their places)."""
        out: list[int] = []
        for srv in self.servers.values():
            if srv.pid is not None and srv.running():
                out += [srv.pid, *self._workers(srv)]
        return out

    def stop(self) -> None:
        if not self.servers:
            return
        workers = [(srv.place, self._workers(srv)) for srv in self.servers.values()]
        stop_all(self.servers.values(), grace_s=20, sig=signal.SIGTERM)
        for place, pids in workers:
            place.terminate([(w, None) for w in pids], grace_s=5)  # only those still alive
        self.servers.clear()
        self.progress("nova: api, conductor and schedulers stopped")

    def kill(self, site: int) -> dict[str, Any]:
        """SIGKILL every control-plane process in ``site`` (and its workers)."""
        hosts = [h for _, h, s in self.roles() if s == site and h in self.servers]
        if not hosts:
            raise ServiceError(f"no running nova process in site {site}")
        killed = {}
        for h in hosts:
            srv = self.servers.pop(h)
            killed[h] = srv.kill(self._workers(srv))
        return {"pid": next(iter(killed.values())), "killed": killed}

    def deviations(self) -> list[Deviation]:
        cached = ([spec_set("nova-api, nova-compute", "[keystone_authtoken] memcached_servers",
                            self.authtoken_memcached, "(unset: in-process token cache)")]
                  if self.authtoken_memcached else [])
        return nova_deviations(self.opts) + cached

    def records(self) -> list[ServerRecord]:
        roles = {h: r for r, h, _ in self.roles()}
        return [srv.record(f"nova-{roles[h]}", port=API_PORT if roles[h] == "api" else 0,
                           datadir=self.home(h), extra={"host": h})
                for h, srv in self.servers.items()]

    def logs(self) -> list[tuple[Place, Path]]:
        return [(self.place(s), self.log(h)) for _, h, s in self.roles()] + \
            [(self.place(self.site), self.manage_log)]

    def collect_logs(self, dest: Path) -> list[Path]:
        return copy_logs(self.logs(), dest)

    def facts(self) -> dict[str, Any]:
        o = self.opts
        return {"nova_version": venv_versions(self.lab.place(o.api), ["nova"])["nova"], "api_site": o.api,
                "conductor_site": o.conductor,
                "scheduler_sites": list(o.scheduler_placement), "concurrency_backend": o.concurrency_backend,
                "host_subset_size": o.host_subset_size, "max_attempts": o.max_attempts,
                "scheduler_workers": o.scheduler_workers, "max_pool_size": o.max_pool_size,
                "max_overflow": o.max_overflow, "rpc_response_timeout": o.rpc_response_timeout,
                "rpc_conn_pool_size": o.rpc_conn_pool_size,
                "executor_thread_pool_size": o.executor_thread_pool_size,
                "service_down_time": o.service_down_time,
                "log_levels": {r: o.level(r) for r in ("api", "conductor", "scheduler", "compute")},
                "notifications_log": o.notifications_log, "db_writers": o.db_writers,
                "profiler": o.profiler,
                "timings": dict(self.timings)}


def copy_logs(logs: list[tuple[Place, Path]], dest: Path) -> list[Path]:
    """Fetch nova logs from their places into ``dest`` as ``nova-<name>`` (names are unique
    per process)."""
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for place, log in logs:
        target = dest / f"nova-{log.name}"
        if place.fetch(log, target):
            out.append(target)
    return out
