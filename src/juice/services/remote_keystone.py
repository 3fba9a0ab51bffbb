"""Keystone (a gunicorn per site, one shared Fernet repository) and its memcacheds on SSH hosts.

    ks = RemoteKeystone(lab, db, progress, KeystoneOptions(cache=True))   # db: RemoteDatabase
    ks.up(timeout=300)
    ks.auth_url(2), ks.region(2), ks.admin_credentials()                  # as the local Keystone
    ks.stop()

The local service's files and command lines (``keystone.render_conf``, ``gunicorn_args``,
``memcached.server_args``), deployed through the host agents: ``keystone-manage`` runs on
site 1's host (db_sync, fernet_setup, credential_setup, then one ``bootstrap`` per region:
the catalog gets every site's endpoint), the key repositories are copied from there to every
other host, and each host starts its memcached and gunicorn (recorded by pid). The hosts need
the OpenStack venv at the same path as here (``scripts/setup.sh``).
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from juice.errors import ServiceError
from juice.services.base import Endpoints, Progress, ServerRecord, Service, quiet
from juice.services.keystone import (
    ADMIN_USER,
    DB_NAME,
    PORT,
    VENV,
    WSGI_SHIM,
    KeystoneOptions,
    db_url_for,
    gunicorn_args,
    render_conf,
)
from juice.services.keystone_creds import ADMIN_PROJECT, AdminCredentials
from juice.services.memcached import MEMCACHED
from juice.services.memcached import PORT as MEMCACHED_PORT
from juice.services.memcached import run_user as memcached_user
from juice.services.memcached import server_args as memcached_args

KEY_DIRS = ("fernet-keys", "credential-keys")


if TYPE_CHECKING:
    from juice.lab.remote import RemoteLab


class RemoteKeystone(Service):
    kind = "keystone"

    def __init__(
        self, lab: Any, db: Any, progress: Progress = quiet, options: KeystoneOptions | None = None
    ) -> None:
        super().__init__(lab, progress)
        self.r: RemoteLab = lab
        self.db = db
        self.opts = options or KeystoneOptions()
        self.ks_sites = list(lab.sites)
        self._password = secrets.token_urlsafe(24)
        self.procs: dict[tuple[str, int], Any] = {}
        self.timings: dict[str, float] = {}

    # ---- where ---------------------------------------------------------------------------------
    @property
    def shared(self) -> Path:
        return Path(self.r.root) / "keystone"

    def home(self, site: int) -> Path:
        return Path(self.r.root) / f"s{site}" / "keystone"

    def auth_url(self, site: int) -> str:
        return f"http://{self.lab.site_ip(site)}:{PORT}/v3"

    def region(self, site: int) -> str:
        return f"Region{site}"

    def admin_credentials(self) -> AdminCredentials:
        return AdminCredentials(
            urls=tuple((s, self.auth_url(s)) for s in self.ks_sites),
            username=ADMIN_USER,
            password=self._password,
        )

    def facts(self) -> dict[str, Any]:
        return {
            "keystone_sites": self.ks_sites,
            "workers": self.opts.workers,
            "cache": self.opts.cache,
            "password_hash_rounds": self.opts.password_hash_rounds,
            "token_provider": "fernet",
            "db_kind": self.db.kind,
            "regions": [self.region(s) for s in self.ks_sites],
            "where": "ssh hosts",
            "timings_s": {k: round(v, 2) for k, v in self.timings.items()},
        }

    def _env(self, site: int | None = None) -> dict[str, str]:
        env = {
            "PATH": f"{VENV / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(self.shared),
            "PYTHONUNBUFFERED": "1",
        }
        if site is not None:
            env["OS_KEYSTONE_CONFIG_DIR"] = str(self.home(site))
        return env

    # ---- configure -------------------------------------------------------------------------------
    def configure(self) -> None:
        t0 = time.monotonic()
        memc = self.opts.cache

        def files(site: int, s: Any) -> None:
            need = [str(VENV / "bin" / "keystone-manage"), str(VENV / "bin" / "gunicorn")] + (
                [MEMCACHED] if memc else []
            )
            res = s.run([["test", "-x", p] for p in need], keep_going=True)
            missing = [p for p, r in zip(need, res, strict=True) if r["rc"] != 0]
            if missing:
                raise ServiceError(f"{', '.join(missing)} missing: prepare the host with scripts/setup.sh")
            ep = self.db.endpoint(site).write
            conf = render_conf(
                db_url=db_url_for(ep),
                slave_url=None,
                memcache=f"{self.lab.site_ip(site)}:{MEMCACHED_PORT}" if memc else None,
                fernet_dir=self.shared / "fernet-keys",
                credential_dir=self.shared / "credential-keys",
                opts=self.opts,
            )
            s.put(f"s{site}/keystone/keystone.conf", conf, mode=0o600)
            s.put("keystone/juice_keystone_wsgi.py", WSGI_SHIM)
            for d in KEY_DIRS:
                s.call("mkdir", path=f"keystone/{d}")
            if site == self.ks_sites[0]:
                s.put(
                    "keystone/manage.conf",
                    render_conf(
                        db_url=db_url_for(ep),
                        slave_url=None,
                        memcache=None,
                        fernet_dir=self.shared / "fernet-keys",
                        credential_dir=self.shared / "credential-keys",
                        opts=KeystoneOptions(
                            cache=False,
                            workers=self.opts.workers,
                            password_hash_rounds=self.opts.password_hash_rounds,
                        ),
                    ),
                    mode=0o600,
                )

        self.r.hosts.each("keystone: configure", files)
        self.db.create_database(DB_NAME)
        owner = ["--keystone-user", "root", "--keystone-group", "root"]
        self._manage("db_sync", ["db_sync"], 600)
        self._manage("fernet_setup", ["fernet_setup", *owner], 120)
        self._manage("credential_setup", ["credential_setup", *owner], 120)
        for site in self.ks_sites:  # one region per site, with that site's endpoint
            url = self.auth_url(site)
            self._manage(
                f"bootstrap {self.region(site)}",
                [
                    "bootstrap",
                    "--bootstrap-username",
                    ADMIN_USER,
                    "--bootstrap-project-name",
                    ADMIN_PROJECT,
                    "--bootstrap-role-name",
                    "admin",
                    "--bootstrap-service-name",
                    "keystone",
                    "--bootstrap-region-id",
                    self.region(site),
                    "--bootstrap-admin-url",
                    url,
                    "--bootstrap-public-url",
                    url,
                    "--bootstrap-internal-url",
                    url,
                ],
                300,
                env={"OS_BOOTSTRAP_PASSWORD": self._password},
            )
        self._copy_keys()
        self.timings["configure_s"] = time.monotonic() - t0

    def _manage(self, what: str, args: list[str], timeout: float, env: dict[str, str] | None = None) -> None:
        t0 = time.monotonic()
        first = self.ks_sites[0]
        self.progress(f"keystone-manage {what} (site {first}'s host)...")
        argv = [
            str(VENV / "bin" / "keystone-manage"),
            "--config-file",
            str(self.shared / "manage.conf"),
            *args,
        ]
        self.r[first].run(
            [{"argv": argv, "env": {**self._env(), **(env or {})}, "timeout": timeout}],
            what=f"keystone-manage {what}",
        )
        self.timings[f"{what.split()[0]}_s"] = (
            self.timings.get(f"{what.split()[0]}_s", 0.0) + time.monotonic() - t0
        )

    def _copy_keys(self) -> None:
        """The key repositories made on site 1's host, copied to every other host (0600)."""
        first = self.r[self.ks_sites[0]]
        keys: dict[str, bytes] = {}
        for d in KEY_DIRS:
            names = first.run([["ls", "-1", str(self.shared / d)]])[0]["out"].split()
            for n in names:
                data = first.get(f"keystone/{d}/{n}")
                if data is None:
                    raise ServiceError(f"keystone: {d}/{n} vanished on site {self.ks_sites[0]}'s host")
                keys[f"keystone/{d}/{n}"] = data

        def put(_site: int, s: Any) -> None:
            for rel, data in keys.items():
                s.put(rel, data, mode=0o600)

        self.r.hosts.each("keystone: key repositories", put, sites=self.ks_sites[1:])

    # ---- start / health --------------------------------------------------------------------------
    def start(self) -> None:
        t0 = time.monotonic()

        def one(site: int, s: Any) -> None:
            ip = self.lab.site_ip(site)
            if self.opts.cache:
                self.procs[("memcached", site)] = s.spawn(
                    memcached_args(ip, MEMCACHED_PORT, 64, memcached_user()),
                    log=f"s{site}/memcached/memcached.log",
                )
            argv = gunicorn_args(
                f"{ip}:{PORT}",
                self.opts.workers,
                self.home(site) / "gunicorn.pid",
                self.shared,
                self.opts.access_log,
            )
            self.procs[("keystone", site)] = s.spawn(
                argv,
                log=f"s{site}/keystone/keystone-s{site}.log",
                env=self._env(site),
                cwd=f"s{site}/keystone",
            )

        self.r.hosts.each("keystone: start", one)
        self.timings["start_s"] = time.monotonic() - t0

    def wait_healthy(self, timeout: float = 120.0) -> None:
        t0 = time.monotonic()

        def one(site: int, s: Any) -> None:
            deadline = time.monotonic() + timeout
            while True:
                status, body = s.http_status(self.auth_url(site))
                if status == 200 and '"version"' in body:
                    return
                proc = self.procs[("keystone", site)]
                if not s.alive(proc) or time.monotonic() > deadline:
                    log = (s.get(f"s{site}/keystone/keystone-s{site}.log", 1 << 20) or b"").decode(
                        errors="replace"
                    )
                    tail = [x for x in log.splitlines() if x.strip()][-2:]
                    why = "exited" if not s.alive(proc) else f"no answer after {timeout:.0f} s"
                    raise ServiceError(f"keystone in site {site} {why}: {' | '.join(tail) or body}")
                time.sleep(0.25)

        self.r.hosts.each("keystone: health", one)
        self.timings["healthy_s"] = time.monotonic() - t0
        self.progress(f"keystone answers in {len(self.ks_sites)} site(s) ({self.timings['healthy_s']:.1f} s)")

    def records(self) -> list[ServerRecord]:
        return []  # the host agents hold the pids (they stop them at lab teardown)

    def log_files(self) -> list[Path]:
        return []  # on the hosts: collect_logs fetches them

    def endpoint(self, site: int) -> Endpoints:
        raise ServiceError("keystone has no database endpoint (auth_url gives its address)")

    def collect_logs(self, dest: Path) -> list[Path]:
        out = []
        for site in self.ks_sites:
            raw = self.r[site].get(f"s{site}/keystone/keystone-s{site}.log")
            if raw is not None:
                dest.mkdir(parents=True, exist_ok=True)
                (dest / f"keystone-s{site}.log").write_bytes(raw)
                out.append(dest / f"keystone-s{site}.log")
        return out

    def stop(self) -> None:
        def one(site: int, s: Any) -> None:
            s.kill([p for (_, k), p in self.procs.items() if k == site], grace_s=15)

        try:
            self.r.hosts.each("keystone: stop", one)
        except Exception as e:  # the lab teardown stops them anyway (the agents hold the pids)
            self.progress(f"keystone: stop failed ({e}); the lab teardown stops it")
        self.procs.clear()
