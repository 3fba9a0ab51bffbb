"""Glance: the real glance 33 (OpenStack venv) glance-api under gunicorn in one site.

    gl = Glance(lab, db, ks, progress, site=1, workers=2, image_mb=1)   # pure: nothing started
    gl.up()                 # database + db_sync + catalog, gunicorn, bounded health wait,
                            # then the image uploaded through the API (IMAGE_ID, active)
    gl.url()                # "http://10.210.1.2:9292"
    gl.image(IMAGE_ID)      # the image record as Keystone's admin sees it (GET /v2/images/<id>)
    gl.stop()               # gunicorn master by recorded pid (TERM, then KILL), then workers

How it runs: glance 32 removed the standalone (eventlet) ``glance-api`` server (glance 33's
``glance-api`` prints "Standalone glance-api is no longer supported. Deploy Glance under a WSGI
server using glance.wsgi.api:application" and exits 1). Glance's docs recommend a WSGI server
(uWSGI behind Apache HTTPD is what its gate tests); the OpenStack venv has gunicorn, as placement
and nova-api run here, so glance-api is ``gunicorn glance.wsgi.api:application`` (sync workers:
one request per worker process at a time, as uWSGI's processes with one thread each). The app
reads ``glance-api.conf`` from ``OS_GLANCE_CONFIG_DIR`` and parses no command line (no argv shim).

Its database ``glance`` lives on Juice's database service (MariaDB or Galera), made through the
service's admin user and migrated by ``glance-manage db_sync``. Images are stored by the ``file``
store (``enabled_backends = fs:file``) under the place's state directory, with glance's reserved
staging and tasks stores beside it. Requests are authenticated by keystonemiddleware against
Juice's real Keystone (paste flavor ``keystone``; service user ``glance`` in project ``service``,
role admin, password per deployment), and glance is registered in the catalog as service type
``image`` in every region: nova's ``[glance]`` finds it there (region and interfaces, as for
placement), so nova-api and the computes call the real API with the user's token.

The image: ``image_mb`` MiB of deterministic bytes (``image_bytes``), disk_format raw, public,
created with the fixed id ``IMAGE_ID`` and uploaded through ``PUT /v2/images/<id>/file`` as
Keystone's admin when the server is healthy (``wait_healthy``), then read back active with the
expected size and checksum. A second Glance of the same deployment is not supported (one server).

Files: ``<root>/s<site>/glance/{glance-api.conf (0600), glance-api-paste.ini (the venv's),
glance-api.log, gunicorn.pid, glance-manage.log, images/, staging/, tasks/, locks/}``.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from juice.errors import ServiceError, UserError
from juice.lab.place import Place
from juice.openstack.http import issue_token, request
from juice.services.base import Progress, Service, Sites, quiet
from juice.services.databases.schema import create_database
from juice.services.deviations import Deviation, dev, spec_set
from juice.services.openstack.keystone import VENV, Keystone, venv_versions
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

PORT = 9292
DB_NAME = "glance"
USER = "glance"
APP = "glance.wsgi.api:application"
KIND = "glance-api"  # its processes' name (resource profile, records)
IMAGE_ID = str(uuid.uuid5(uuid.NAMESPACE_DNS, "juice.glance.image"))
IMAGE_NAME = "juice-image"
WORKERS = 2  # gunicorn's own default is 1; devstack runs max(2, CPUs / 4) uWSGI processes
DB_POOL = 5 + 50  # per worker: oslo.db's max_pool_size + max_overflow ([database] sets neither)


def image_bytes(mb: int) -> bytes:
    """The image's content: ``mb`` MiB of deterministic bytes (the same checksum every run)."""
    return hashlib.shake_256(b"juice.glance.image").digest(mb << 20)


def render_glance_conf(*, db_url: str, auth_url: str, password: str, home: Path,
                       debug: bool = False, authtoken_memcached: str | None = None) -> str:
    """glance-api.conf: the database, the ``file`` store (and the reserved staging and tasks
    stores) under ``home``, keystonemiddleware (service user ``glance``), the paste pipeline
    with authtoken (flavor ``keystone``), logs on stderr (gunicorn's log file captures them)."""
    return "\n".join([
        "# rendered by juice",
        "[DEFAULT]",
        "use_stderr = true",
        f"debug = {str(debug).lower()}",
        "enabled_backends = fs:file",
        "",
        "[database]",
        f"connection = {db_url}",
        "",
        "[glance_store]",
        "default_backend = fs",
        "",
        "[fs]",
        f"filesystem_store_datadir = {home / 'images'}",
        "",
        "[os_glance_staging_store]",
        f"filesystem_store_datadir = {home / 'staging'}",
        "",
        "[os_glance_tasks_store]",
        f"filesystem_store_datadir = {home / 'tasks'}",
        "",
        "[paste_deploy]",
        "flavor = keystone",
        f"config_file = {home / 'glance-api-paste.ini'}",
        "",
        "[oslo_concurrency]",
        f"lock_path = {home / 'locks'}",
        "",
        *ini_section("keystone_authtoken",
                     authtoken(auth_url, USER, password, memcached=authtoken_memcached)),
        "",
    ])


class Glance(GunicornApi, Service):
    """glance-api in ``site`` on ``db``, authenticated by ``ks`` (see the module doc)."""

    kind = KIND

    NAME = "glance-api"
    PORT = PORT
    DIR = "glance"

    def __init__(self, lab: Sites, db: Service, ks: Keystone, progress: Progress = quiet, *,
                 site: int = 1, workers: int = WORKERS, image_mb: int = 1, debug: bool = False,
                 db_site: int | None = None, authtoken_memcached: str | None = None) -> None:
        """``db_site``: the site whose database endpoint it writes through (default its own);
        ``authtoken_memcached``: keystonemiddleware's memcached_servers (None: unset)."""
        super().__init__(lab, progress)
        if site not in lab.sites:
            raise UserError(f"glance.site: {site} is not a site of this lab (1..{len(lab.sites)})")
        self.authtoken_memcached = authtoken_memcached
        if not 1 <= workers <= 64:
            raise UserError(f"glance.workers: expected 1..64, got {workers}")
        if not 1 <= image_mb <= 4096:
            raise UserError(f"glance.image_mb: expected 1..4096 MiB, got {image_mb}")
        self.db, self.ks, self.site, self.workers, self.debug = db, ks, site, workers, debug
        self.image_mb = image_mb
        self.db_site = site if db_site is None else db_site
        self._password = secrets.token_urlsafe(24)
        self.server: Server | None = None
        self.timings: dict[str, float] = {}

    @property
    def log(self) -> Path:
        return self.home / "glance-api.log"

    def url(self) -> str:
        return f"http://{self.lab.site_ip(self.site)}:{PORT}"

    @property
    def image_id(self) -> str:
        return IMAGE_ID

    def configure(self) -> None:
        t0 = time.monotonic()
        place = self.place
        check_venv(place, "glance-manage", "gunicorn")
        if port_open(place, place.address, PORT):
            raise ServiceError(f"glance-api in site {self.site}: port {PORT} is already taken "
                               "(another glance still running?)")
        place.remove(self.home)
        for d in ("images", "staging", "tasks", "locks"):
            place.mkdir(self.home / d)
        create_database(self.lab, self.db, self.site, DB_NAME, self.progress, who="glance")
        ep = replace(self.db.endpoint(self.db_site).write, database=DB_NAME)
        place.write(self.home / "glance-api.conf", render_glance_conf(
            db_url=ep.url() + "?charset=utf8mb4", auth_url=self.ks.auth_url(self.site),
            password=self._password, home=self.home, debug=self.debug,
            authtoken_memcached=self.authtoken_memcached), mode=0o600)
        paste = VENV / "etc" / "glance" / "glance-api-paste.ini"
        r = place.run(["cp", str(paste), str(self.home / "glance-api-paste.ini")])
        if not r.ok:
            raise ServiceError(f"{place.label}: copying {paste} failed: {r.err.strip() or r.rc} "
                               "(is the OpenStack venv complete there? run scripts/setup.sh)")
        self.progress("glance-manage db_sync...")
        self.timings["db_sync_s"] = run_to_end(
            place, [VENV / "bin" / "glance-manage", "--config-file", self.home / "glance-api.conf",
                    "db_sync"],
            log=self.home / "glance-manage.log", what="glance-manage db_sync", timeout=600,
            env=os_env(self.home))
        cat = Catalog(self.lab, self.ks)
        cat.service_user(USER, self._password)
        cat.register("glance", "image", self.url())
        self.timings["configure_s"] = time.monotonic() - t0
        self.progress(f"glance: db synced in {self.timings['db_sync_s']:.1f} s, in the catalog")

    def start(self) -> None:
        argv = gunicorn_argv(f"{self.lab.site_ip(self.site)}:{PORT}", self.workers,
                             self.home / "gunicorn.pid", APP, KIND)
        # one access-log line per request (method, path, status, bytes, duration in µs): glance
        # under a WSGI server logs no request line of its own
        argv[-1:-1] = ["--access-logfile", "-", "--access-logformat",
                       'glance-api %(h)s "%(r)s" %(s)s %(B)s %(D)sus']
        self.spawn_server(argv, log=self.log, what=f"glance-api in site {self.site}",
                          env=os_env(self.home, {"OS_GLANCE_CONFIG_DIR": str(self.home)}), cwd=self.home)

    def wait_healthy(self, timeout: float = 120.0) -> None:
        """GET /healthcheck answers 200 (oslo.middleware's, no token), then the image is
        uploaded through the API and read back active."""
        t0 = time.monotonic()
        self.wait_server(lambda: wait_http(self.lab, self.site, self.url() + "/healthcheck"), timeout,
                         interval=0.25, not_started=f"glance-api in site {self.site}: not started")
        self.timings["healthy_s"] = time.monotonic() - t0
        self.progress(f"glance-api answers in site {self.site} ({self.timings['healthy_s']:.1f} s)")
        self.register_image()

    # ---- the image API (as Keystone's admin unless a token is given) --------------------------
    def _token(self) -> str:
        return issue_token(self.lab, self.ks.first, self.ks.admin_credentials())

    def call(self, method: str, path: str, *, token: str | None = None, body: Any = None,
             data: bytes | None = None, site: int | None = None,
             ok: tuple[int, ...] = (200,)) -> Any:
        """One request to glance's API from ``site`` (default glance's): the decoded JSON body
        (None when empty); ServiceError naming the path unless its status is in ``ok``."""
        headers = {"X-Auth-Token": token or self._token()}
        s = self.site if site is None else site
        if data is not None:
            headers["Content-Type"] = "application/octet-stream"
            status, _, raw = self.lab.place(s).request(method, self.url() + path, data,
                                                        {"Accept": "application/json", **headers}, 300.0)
        else:
            r = request(self.lab, s, method, self.url() + path, body=body, headers=headers)
            status, raw = r.status, r.body
        if status not in ok:
            raise ServiceError(f"glance {method} {path}: {status} {raw[:200]!r}")
        return json.loads(raw) if raw.strip() else None

    def register_image(self) -> dict[str, Any]:
        """The deployment's image (``IMAGE_ID``): created and uploaded through the API, then
        read back active with its size and checksum (ServiceError otherwise)."""
        t0 = time.monotonic()
        token = self._token()
        content = image_bytes(self.image_mb)
        self.call("POST", "/v2/images", token=token, ok=(201,), body={
            "id": IMAGE_ID, "name": IMAGE_NAME, "disk_format": "raw", "container_format": "bare",
            "visibility": "public", "min_disk": 0, "min_ram": 0})
        self.call("PUT", f"/v2/images/{IMAGE_ID}/file", token=token, data=content, ok=(204,))
        img: dict[str, Any] = self.call("GET", f"/v2/images/{IMAGE_ID}", token=token)
        want = hashlib.md5(content, usedforsecurity=False).hexdigest()
        if img.get("status") != "active" or img.get("size") != len(content) or img.get("checksum") != want:
            raise ServiceError(f"glance: image {IMAGE_ID} after upload: status {img.get('status')}, "
                               f"size {img.get('size')} (expected {len(content)}), checksum "
                               f"{img.get('checksum')} (expected {want})")
        self.timings["image_upload_s"] = time.monotonic() - t0
        self.progress(f"glance: image {IMAGE_ID} ({self.image_mb} MiB) active "
                      f"({self.timings['image_upload_s']:.1f} s)")
        return img

    def image(self, image_id: str = IMAGE_ID, token: str | None = None) -> dict[str, Any]:
        img: dict[str, Any] = self.call("GET", f"/v2/images/{image_id}", token=token)
        return img

    def images(self, token: str | None = None) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.call("GET", "/v2/images", token=token)["images"]
        return found

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request glance-api answered (its access log)."""
        raw = self.place.read(self.log)
        text = raw.decode(errors="replace") if raw is not None else ""
        return [(m.group(1), m.group(2), int(m.group(3)))
                for m in re.finditer(r'glance-api \S+ "(\w+) (\S+) [^"]*" (\d+)', text)]

    # ---- lifecycle --------------------------------------------------------------------------
    def deviations(self) -> list[Deviation]:
        cached = ([spec_set(KIND, "[keystone_authtoken] memcached_servers", self.authtoken_memcached,
                            "(unset: in-process token cache)")] if self.authtoken_memcached else [])
        if self.workers == 1:
            return cached
        return [dev(KIND, "gunicorn --workers", self.workers, 1,
                    "glance-api serves one request per worker process (sync workers, as uWSGI "
                    "processes of one thread); devstack runs at least 2"), *cached]

    @property
    def worker_count(self) -> int:
        return self.workers

    def logs(self) -> list[tuple[Place, Path]]:
        return [(self.place, self.log), (self.place, self.home / "glance-manage.log")]

    def facts(self) -> dict[str, Any]:
        version = venv_versions(self.place, ["glance"])["glance"]
        return {"glance_version": version, "site": self.site, "workers": self.workers,
                "url": self.url(), "store": "file", "image_id": IMAGE_ID, "image_mb": self.image_mb}
