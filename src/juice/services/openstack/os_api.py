"""What the OpenStack services Juice deploys beside Keystone share (placement, nova, glance,
neutron).

    gunicorn_argv("10.210.1.2:8778", 2, pidfile, "placement.wsgi.api:application", "placement")
    cat = Catalog(lab, ks)                 # admin token from Keystone's first site
    cat.service_user("placement", password)  # user in project "service", role admin (idempotent)
    cat.register("placement", "placement", url)  # service + public/internal/admin endpoints, every region
    authtoken("http://10.210.1.2:5000/v3", "glance", password)   # its [keystone_authtoken] (a dict)
    ini_section("keystone_authtoken", items)  # ["[keystone_authtoken]", "auth_type = password", ...]
    class Glance(GunicornApi, Service): ...     # stop, kill, pids, records of a gunicorn-served API

Their tools run at a site's place (``process.run_to_end``, bounded, the output appended to a
log whose tail goes into the ServiceError when it fails); the catalog calls are made from
inside Keystone's first site (``openstack.http.request``). Only MySQL-protocol databases are
supported (MariaDB, Galera): nova and placement are deployed on them in the studies.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from juice import onhost
from juice.errors import ServiceError
from juice.lab.place import Place
from juice.openstack.http import issue_token, request
from juice.services.base import Progress, ServerRecord, Sites
from juice.services.openstack.keystone import VENV, Keystone
from juice.services.process import SiteServer, children

SERVICE_PROJECT = "service"
# Catalog changes are look-then-create: two services registering at once (placement and
# nova come up side by side) would both create project "service". One at a time.
_CATALOG_LOCK = threading.Lock()


def venv_bin(name: str) -> Path:
    """An executable of the OpenStack venv (its path at any place; ``check_venv`` checks it)."""
    return VENV / "bin" / name


def check_venv(place: Place, *names: str) -> None:
    """Every ``names`` executable of the OpenStack venv is at ``place`` (one command);
    ServiceError naming the place and the first missing one otherwise."""
    paths = [str(venv_bin(n)) for n in names]
    r = place.run(["sh", "-c", 'for f in "$@"; do test -x "$f" || { echo "$f"; exit 1; }; done', "sh",
                   *paths])
    if not r.ok:
        missing = r.out.strip() or paths[0]
        raise ServiceError(f"{place.label}: OpenStack venv incomplete: {missing} is missing: "
                           "run scripts/setup.sh (on a host: provision the venv there)")


def os_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of an OpenStack process (the venv first on PATH, no proxy)."""
    env = {"PATH": f"{VENV / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
           "HOME": str(home), "PYTHONUNBUFFERED": "1"}
    return {**env, **(extra or {})}


def authtoken(auth_url: str, username: str, password: str, *, region: str | None = None,
              memcached: str | None = None) -> dict[str, object]:
    """A service's ``[keystone_authtoken]``: keystonemiddleware checks tokens against Keystone at
    ``auth_url`` as the service user ``username`` (project ``service``, domain Default), and
    wants role ``service`` in a service token (``service_token_roles_required``: what nova sends
    beside a user's token has it, see ``Catalog.service_user``). ``region``: its
    ``region_name`` (nova's); ``memcached``: its ``memcached_servers`` (unset: keystonemiddleware's
    in-process token cache)."""
    return {"www_authenticate_uri": auth_url, "auth_type": "password", "auth_url": auth_url,
            "username": username, "password": password, "project_name": SERVICE_PROJECT,
            "user_domain_name": "Default", "project_domain_name": "Default",
            **({"region_name": region} if region else {}), "service_token_roles_required": True,
            **({"memcached_servers": memcached} if memcached else {})}


def ini_section(name: str, items: Mapping[str, object]) -> list[str]:
    """The lines of config section ``[name]``: ``key = value``, booleans as oslo.config reads
    them (``true``/``false``)."""
    return [f"[{name}]", *(f"{k} = {str(v).lower() if isinstance(v, bool) else v}"
                           for k, v in items.items())]


def gunicorn_argv(bind: str, workers: int, pidfile: Path, app: str, name: str, *,
                  pythonpath: Path | None = None, timeout_s: int = 300) -> list[str]:
    """gunicorn serving ``app`` (sync workers; errors and the service log on stderr)."""
    path = ["--pythonpath", str(pythonpath)] if pythonpath is not None else []
    return [str(venv_bin("gunicorn")), "--bind", bind, "--workers", str(workers), *path,
            "--worker-class", "sync", "--timeout", str(timeout_s), "--graceful-timeout", "10",
            "--pid", str(pidfile), "--error-logfile", "-", "--log-level", "info",
            "--name", name, app]


def argv_shim(module: str, attr: str = "application") -> str:
    """A WSGI module that empties sys.argv before importing ``module`` (oslo.config parses
    sys.argv when the app initializes, and a gunicorn worker inherits gunicorn's):
    ``juice.onhost.wsgi_argv`` with its ``APP`` set to ``(module, attr)``."""
    src, unset = onhost.source("wsgi_argv"), 'APP = ("", "application")'
    assert src.count(unset) == 1, "juice.onhost.wsgi_argv: its APP line is not the one set here"
    return src.replace(unset, f"APP = ({module!r}, {attr!r})")


class Catalog:
    """Keystone's identity API as its admin, from Keystone's first site (idempotent calls)."""

    def __init__(self, lab: Sites, ks: Keystone) -> None:
        self.lab, self.ks, self.site = lab, ks, ks.first
        self.base = ks.auth_url(ks.first)
        self.token = issue_token(lab, self.site, ks.admin_credentials())

    def api(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200,)) -> Any:
        r = request(self.lab, self.site, method, self.base + path, body=body,
                    headers={"X-Auth-Token": self.token})
        if r.status not in ok:
            raise ServiceError(f"keystone {method} {path}: {r.status} {r.body[:200]!r}")
        return r.json()

    def _one(self, path: str, key: str, create: str, body: dict[str, Any]) -> str:
        found = self.api("GET", path)[key]
        if found:
            return str(found[0]["id"])
        return str(self.api("POST", create, body, ok=(201,))[key[:-1]]["id"])

    def service_user(self, name: str, password: str) -> str:
        """User ``name`` (domain Default) with role admin on project ``service``; the password
        is (re)set, so a redeployment's new password holds. Returns the user id."""
        with _CATALOG_LOCK:
            return self._service_user(name, password)

    def _service_user(self, name: str, password: str) -> str:
        project = self._one(f"/projects?name={SERVICE_PROJECT}", "projects", "/projects",
                            {"project": {"name": SERVICE_PROJECT, "domain_id": "default"}})
        users = self.api("GET", f"/users?name={name}&domain_id=default")["users"]
        if users:
            uid = str(users[0]["id"])
            self.api("PATCH", f"/users/{uid}", {"user": {"password": password}})
        else:
            uid = str(self.api("POST", "/users", {"user": {
                "name": name, "password": password, "domain_id": "default",
                "default_project_id": project}}, ok=(201,))["user"]["id"])
        roles = self.api("GET", "/roles?name=admin")["roles"]
        if not roles:
            raise ServiceError("keystone: no admin role (was keystone-manage bootstrap run?)")
        self.api("PUT", f"/projects/{project}/users/{uid}/roles/{roles[0]['id']}", ok=(200, 204))
        # role "service" too (as devstack and kolla grant it): a service token (what nova sends
        # with the user's token to neutron) is refused by keystonemiddleware without it
        # ([keystone_authtoken] service_token_roles_required, true by default now)
        service = self.api("GET", "/roles?name=service")["roles"] or [
            self.api("POST", "/roles", {"role": {"name": "service"}}, ok=(201,))["role"]]
        self.api("PUT", f"/projects/{project}/users/{uid}/roles/{service[0]['id']}", ok=(200, 204))
        return uid

    def regions(self) -> list[str]:
        return sorted(str(r["id"]) for r in self.api("GET", "/regions")["regions"])

    def register(self, name: str, type_: str, url: str) -> str:
        """Service ``name`` of ``type_`` with public/internal/admin endpoints at ``url`` in
        every region (endpoints already there with another URL are replaced)."""
        with _CATALOG_LOCK:
            return self._register(name, type_, url)

    def _register(self, name: str, type_: str, url: str) -> str:
        sid = self._one(f"/services?type={type_}", "services", "/services",
                        {"service": {"name": name, "type": type_, "enabled": True}})
        eps = self.api("GET", f"/endpoints?service_id={sid}")["endpoints"]
        have = {(e["region_id"], e["interface"]): e for e in eps}
        for region in self.regions():
            for iface in ("public", "internal", "admin"):
                old = have.get((region, iface))
                if old is not None and old["url"] == url:
                    continue
                if old is not None:
                    self.api("DELETE", f"/endpoints/{old['id']}", ok=(204,))
                self.api("POST", "/endpoints", {"endpoint": {
                    "service_id": sid, "interface": iface, "region_id": region, "url": url}},
                    ok=(201,))
        return sid


def wait_http(lab: Sites, site: int, url: str, ok: Sequence[int] = (200,),
              timeout: float = 5.0) -> bool:
    """True when ``GET url`` from ``site`` answers one of ``ok`` (False on any error)."""
    try:
        return request(lab, site, "GET", url, timeout=timeout).status in ok
    except Exception:
        return False


class GunicornApi(SiteServer):
    """The lifecycle of an OpenStack API served by gunicorn at one site (``SiteServer``): its
    master (``server``) and the workers the master forks, stopped and killed together. A service
    mixes it in and has ``progress``; it names itself (``NAME`` in messages, ``record_kind`` in
    its server record), its port (``PORT``) and its worker count (``worker_count``)."""

    NAME: ClassVar[str]
    PORT: ClassVar[int]
    progress: Progress

    @property
    def record_kind(self) -> str:
        return self.NAME

    @property
    def worker_count(self) -> int:
        raise NotImplementedError

    def stop(self) -> None:
        if self.server is None:
            return
        workers = children(self.place, self.server.pid) if self.server.running() else []
        self.stop_server(grace_s=20)
        self.place.terminate([(w, None) for w in workers], grace_s=5)
        self.progress(f"{self.NAME}: stopped")

    def kill(self, site: int) -> dict[str, Any]:
        if site != self.site or self.server is None or not self.server.running():
            raise ServiceError(f"no running {self.NAME} in site {site}")
        workers = children(self.place, self.server.pid)
        pid = self.server.kill(workers)
        self.server = None
        return {"pid": pid, "workers": workers}

    def pids(self) -> list[int]:
        """The gunicorn master and its workers (what a leftover check looks for)."""
        if self.server is None or self.server.pid is None:
            return []
        return [self.server.pid, *children(self.place, self.server.pid)]

    def records(self) -> list[ServerRecord]:
        return self.server_records(self.record_kind, port=self.PORT, datadir=self.home,
                                   extra={"workers": self.worker_count})
