"""Placement: the real openstack-placement 16 (OpenStack venv) under gunicorn in one site.

    pl = Placement(lab, db, ks, progress, site=1, workers=2)   # pure: nothing started
    pl.up()                   # database + db sync + catalog, gunicorn, bounded health wait
    pl.url()                  # "http://10.210.1.2:8778"
    pl.resource_providers(1)  # [{"uuid": ..., "name": ...}, ...] as the placement admin sees them
    pl.stop()                 # gunicorn master by recorded pid (TERM, then KILL), then workers

Its database ``placement`` lives on Juice's database service ``db`` (MariaDB or Galera), made
through the service's admin user and migrated by ``placement-manage db sync``. It authenticates
requests with keystonemiddleware against Juice's real Keystone (service user ``placement`` in
project ``service``, role admin, password generated per deployment) and is registered in the
catalog as service type ``placement`` in every region. The WSGI app
(``placement.wsgi.api:application``) reads its config from ``OS_PLACEMENT_CONFIG_DIR`` and
parses no command line, so no argv shim is needed (nova-api needs one).

Files: ``<workdir>/s<site>/placement/{placement.conf (0600), placement.log, gunicorn.pid,
manage.log}`` (a second server of the deployment, ``Placements``: ``placement-s<site>.log``, no
manage.log).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from juice.errors import ServiceError, UserError
from juice.lab.place import Place
from juice.openstack.http import issue_token, request
from juice.services.base import Progress, ServerRecord, Service, Sites, quiet
from juice.services.databases.schema import create_database
from juice.services.deviations import Deviation, dev
from juice.services.openstack.keystone import VENV, Keystone, venv_versions
from juice.services.openstack.nova_settings import placement_deviations
from juice.services.openstack.os_api import (
    Catalog,
    GunicornApi,
    authtoken,
    check_venv,
    gunicorn_argv,
    ini_section,
    os_env,
    wait_http,
)
from juice.services.process import Server, port_open, run_to_end

PORT = 8778
DB_NAME = "placement"
USER = "placement"
APP = "placement.wsgi.api:application"


# [placement] allocation_conflict_retry_count: placement's server-side retries of an allocation
# write after a resource-provider generation conflict (its default: 10). Juice runs 1 (no
# server-side retry; the client gets 409 placement.concurrent_update and nova's report client
# retries the claim in a new request), because placement 16 retries inside the same database
# transaction, with nothing rolled back: under MariaDB's REPEATABLE READ the retry checks
# capacity against the transaction's first snapshot (without the concurrent claim that caused
# the conflict) while passing the generation check with a freshly read generation; under READ
# COMMITTED the failed attempt's own uncommitted allocation makes the provider look already over
# capacity and the claim passes as "no worse" ("... reduces existing overage from 3 to 3").
# Either way a claim on a full provider is accepted (docs/server-settings.md,
# benchmarks/placement_race.py).
CONFLICT_RETRIES = 1
CONFLICT_RETRIES_DEFAULT = 10
CONFLICT_RETRIES_WHY = (
    "placement retries a conflicting allocation write inside the same transaction, whose stale "
    "snapshot (and own failed insert) lets a claim on a full provider through: with 2 workers, 3 "
    "concurrent 1-VCPU claims on 2 VCPUs were all accepted in 21 of 160 rounds at 10, 0 of 100 at 1 "
    "(benchmarks/placement_race.py); with 1 the 409 goes to nova, which retries")


def render_placement_conf(*, db_url: str, auth_url: str, password: str, debug: bool = False,
                          max_pool_size: int | None = None, max_overflow: int | None = None,
                          conflict_retries: int | None = CONFLICT_RETRIES) -> str:
    """placement.conf: the database, keystonemiddleware (service user ``placement``), logs on
    stderr (gunicorn's log file captures them), ``[placement] allocation_conflict_retry_count``
    (None: placement's default; see CONFLICT_RETRIES)."""
    return "\n".join([
        "# rendered by juice",
        "[DEFAULT]",
        "use_stderr = true",
        f"debug = {str(debug).lower()}",
        "",
        "[api]",
        "auth_strategy = keystone",
        "",
        *(["[placement]", f"allocation_conflict_retry_count = {conflict_retries}", ""]
          if conflict_retries is not None else []),
        "[placement_database]",
        f"connection = {db_url}",
        *([f"max_pool_size = {max_pool_size}"] if max_pool_size is not None else []),
        *([f"max_overflow = {max_overflow}"] if max_overflow is not None else []),
        "",
        *ini_section("keystone_authtoken", authtoken(auth_url, USER, password)),
        "",
    ])


class Placement(GunicornApi, Service):
    """openstack-placement in ``site`` on ``db``, authenticated by ``ks`` (see module doc)."""

    kind = "placement"

    NAME = "placement"
    PORT = PORT
    DIR = "placement"

    def __init__(self, lab: Sites, db: Service, ks: Keystone, progress: Progress = quiet, *,
                 site: int = 1, workers: int = 2, debug: bool = False,
                 max_pool_size: int | None = None, max_overflow: int | None = None,
                 primary: Placement | None = None, db_site: int | None = None,
                 conflict_retries: int | None = CONFLICT_RETRIES) -> None:
        """``primary``: another Placement of the same deployment (this one then shares its
        database, service user and catalog entry: no db sync, no registration); ``db_site``: the
        site whose database endpoint it writes through (default its own: Galera's local node);
        ``conflict_retries``: ``[placement] allocation_conflict_retry_count`` (None: placement's
        default, 10, which over-allocates under concurrent claims: see CONFLICT_RETRIES)."""
        super().__init__(lab, progress)
        if site not in lab.sites:
            raise UserError(f"placement.site: {site} is not a site of this lab (1..{len(lab.sites)})")
        if not 1 <= workers <= 64:
            raise UserError(f"placement.workers: expected 1..64, got {workers}")
        self.db, self.ks, self.site, self.workers, self.debug = db, ks, site, workers, debug
        self.pool = (max_pool_size, max_overflow)
        self.conflict_retries = conflict_retries
        self.primary, self.db_site = primary, site if db_site is None else db_site
        self._password: str = primary._password if primary is not None else secrets.token_urlsafe(24)
        self.server: Server | None = None
        self.timings: dict[str, float] = {}
        self.front: str | None = None  # a load balancer's URL in front (the catalog's, clients')

    @property
    def log(self) -> Path:
        # a second server's log gets its site in the name (a run's logs/ is one flat directory)
        return self.home / ("placement.log" if self.primary is None else f"placement-s{self.site}.log")

    def url(self) -> str:
        """What clients and the catalog use: the load balancer's ``front``, else the server."""
        return self.front or self.server_url()

    def server_url(self) -> str:
        return f"http://{self.lab.site_ip(self.site)}:{PORT}"

    def configure(self) -> None:
        t0 = time.monotonic()
        place = self.place
        check_venv(place, "placement-manage", "gunicorn")
        if port_open(place, place.address, PORT):
            raise ServiceError(f"placement in site {self.site}: port {PORT} is already taken "
                               "(another placement still running?)")
        place.remove(self.home)
        place.mkdir(self.home)
        if self.primary is None:
            create_database(self.lab, self.db, self.site, DB_NAME, self.progress)
        ep = replace(self.db.endpoint(self.db_site).write, database=DB_NAME)
        place.write(self.home / "placement.conf", render_placement_conf(
            db_url=ep.url() + "?charset=utf8mb4", auth_url=self.ks.auth_url(self.site),
            password=self._password, debug=self.debug, max_pool_size=self.pool[0],
            max_overflow=self.pool[1], conflict_retries=self.conflict_retries), mode=0o600)
        if self.primary is not None:  # the primary synced the schema and registered the service
            self.timings["configure_s"] = time.monotonic() - t0
            return
        self.progress("placement-manage db sync...")
        self.timings["db_sync_s"] = run_to_end(
            place, [VENV / "bin" / "placement-manage", "--config-file", self.home / "placement.conf",
                    "db", "sync"],
            log=self.home / "manage.log", what="placement-manage db sync", timeout=600,
            env=os_env(self.home))
        cat = Catalog(self.lab, self.ks)
        cat.service_user(USER, self._password)
        cat.register("placement", "placement", self.url())
        self.timings["configure_s"] = time.monotonic() - t0
        self.progress(f"placement: db synced in {self.timings['db_sync_s']:.1f} s, in the catalog")

    def start(self) -> None:
        pidfile = self.home / "gunicorn.pid"
        argv = gunicorn_argv(f"{self.lab.site_ip(self.site)}:{PORT}", self.workers, pidfile, APP,
                             "placement")
        self.spawn_server(argv, log=self.log, what=f"placement in site {self.site}",
                          env=os_env(self.home, {"OS_PLACEMENT_CONFIG_DIR": str(self.home)}), cwd=self.home)

    def wait_healthy(self, timeout: float = 120.0) -> None:
        """GET / answers 200 (the version document needs no token)."""
        t0 = time.monotonic()
        self.wait_server(lambda: wait_http(self.lab, self.site, self.server_url() + "/"), timeout,
                         interval=0.25, not_started=f"placement in site {self.site}: not started")
        self.timings["healthy_s"] = time.monotonic() - t0
        self.progress(f"placement answers in site {self.site} ({self.timings['healthy_s']:.1f} s)")

    def _get(self, path: str, site: int | None = None, token: str | None = None) -> Any:
        """GET ``path`` of placement's API as Keystone's admin from ``site`` (default
        placement's): the decoded body; ServiceError naming the path unless 200."""
        token = token or issue_token(self.lab, self.ks.first, self.ks.admin_credentials())
        r = request(self.lab, self.site if site is None else site, "GET", self.url() + path,
                    headers={"X-Auth-Token": token, "OpenStack-API-Version": "placement 1.14"})
        if r.status != 200:
            raise ServiceError(f"placement GET {path}: {r.status} {r.body[:200]!r}")
        return r.json()

    def resource_providers(self, site: int | None = None) -> list[dict[str, Any]]:
        """Every resource provider, through the API as Keystone's admin, from ``site``."""
        rps: list[dict[str, Any]] = self._get("/resource_providers", site)["resource_providers"]
        return rps

    def inventories(self, rp_uuid: str) -> dict[str, Any]:
        inv: dict[str, Any] = self._get(f"/resource_providers/{rp_uuid}/inventories")["inventories"]
        return inv

    def capacity(self, limit: int = 50) -> dict[str, Any]:
        """Placement's view of capacity: per resource provider (at most ``limit``; beyond that
        only the count) its inventories (total, reserved, allocation_ratio) and its usages."""
        rps = self.resource_providers()
        out: dict[str, Any] = {"providers": len(rps), "listed": []}
        if len(rps) > limit:
            return out
        token = issue_token(self.lab, self.ks.first, self.ks.admin_credentials())
        for rp in rps:
            row: dict[str, Any] = {"name": rp["name"], "uuid": rp["uuid"], "generation": rp["generation"]}
            for part in ("inventories", "usages"):
                row[part] = self._get(f"/resource_providers/{rp['uuid']}/{part}", token=token)[part]
            out["listed"].append(row)
        return out

    def deviations(self) -> list[Deviation]:
        out = placement_deviations(self.workers, *self.pool)
        if self.conflict_retries is not None and self.conflict_retries != CONFLICT_RETRIES_DEFAULT:
            out.append(dev("placement", "[placement] allocation_conflict_retry_count", self.conflict_retries,
                           CONFLICT_RETRIES_DEFAULT, CONFLICT_RETRIES_WHY))
        return out

    @property
    def worker_count(self) -> int:
        return self.workers

    def logs(self) -> list[tuple[Place, Path]]:
        manage = [(self.place, self.home / "manage.log")] if self.primary is None else []
        return [(self.place, self.log), *manage]

    def facts(self) -> dict[str, Any]:
        version = venv_versions(self.place, ["openstack-placement"])["openstack-placement"]
        return {"placement_version": version, "site": self.site, "workers": self.workers, "url": self.url()}


class Placements(Service):
    """Several placement servers of one deployment, one per site, started and stopped together
    (seed 004 ran one on each controller, each writing through its own Galera node). The first
    is the primary (schema, service user, catalog entry); a load balancer in front of all of
    them is the catalog's URL (``front``)."""

    kind = "placement"

    def __init__(self, members: list[Placement], progress: Progress = quiet) -> None:
        super().__init__(members[0].lab, progress)
        self.members = members

    def configure(self) -> None:
        for m in self.members:  # the primary first: the others use its schema and service user
            m.configure()

    def start(self) -> None:
        for m in self.members:
            m.start()

    def wait_healthy(self, timeout: float = 120.0) -> None:
        for m in self.members:
            m.wait_healthy(timeout)

    def stop(self) -> None:
        for m in reversed(self.members):
            m.stop()

    def deviations(self) -> list[Deviation]:
        return self.members[0].deviations()  # the same settings on every server

    def records(self) -> list[ServerRecord]:
        return [r for m in self.members for r in m.records()]

    def pids(self) -> list[int]:
        return [p for m in self.members for p in m.pids()]

    def logs(self) -> list[tuple[Place, Path]]:
        return [x for m in self.members for x in m.logs()]
