"""Neutron: the real neutron 29 (OpenStack venv) with ML2/OVN in one site, its own database on
Juice's database service, RabbitMQ as deployed, keystonemiddleware against the lab's Keystone.

    ovn = OVN(lab, progress, site=1)
    net = Neutron(lab, db, mq, ks, ovn, progress, site=1, api_workers=1)   # pure
    ovn.up(); net.up()        # database + upgrade heads + catalog, neutron-api, the tenant network
    net.url()                 # "http://10.210.1.2:9696"
    net.network_id            # the tenant network made at deployment (juice-net, subnet juice-subnet)
    net.api("GET", "/v2.0/ports")   # as Keystone's admin, from neutron's site
    net.stop()                # gunicorn master by recorded pid, then its workers

neutron 29 has no eventlet ``neutron-server`` any more: its API is the WSGI application
``neutron.wsgi.api:application`` (devstack runs it under uWSGI; Juice under gunicorn, as
placement and nova-api), reading its files from ``OS_NEUTRON_CONFIG_DIR`` /
``OS_NEUTRON_CONFIG_FILES`` (neutron.conf;ml2_conf.ini) behind an argv shim (oslo.config parses
sys.argv). Each API worker runs the ML2/OVN mechanism driver's post-fork initialisation: its
NB and SB IDL connections, its hash-ring node (the OVSDB events are handled by one worker each),
the agents (the chassis) cache. The OVN maintenance worker (``neutron-ovn-maintenance-worker``:
the NB/DB consistency check, the periodic repairs) and ``neutron-rpc-server`` (agents' RPC: ML2/OVN
has none on the boot path) are not started: recorded as deviations.

ML2: mechanism driver ``ovn``, type drivers ``geneve`` and ``flat``, tenant networks ``geneve``
(VNIs 1..65536), security groups on (OVN ACLs), port security; the L3 service plugin
``ovn-router`` as every ML2/OVN deployment has it (nova lists a server's floating IPs). Port
status changes are sent to nova as ``network-vif-plugged`` external events by neutron's nova
notifier (``[nova]``: the neutron service user's credentials against the lab's Keystone), as
shipped (``notify_nova_on_port_status_changes``, ``send_events_interval`` 2 s).

At deployment (``wait_healthy``) Juice creates, as Keystone's admin, the tenant network
``juice-net`` (geneve, shared with every project) with subnet ``juice-subnet``
(``10.64.0.0/12``: room for a million ports, DHCP on: OVN's native DHCP, no agent).

Files: ``<root>/s<site>/neutron/{neutron.conf (0600), ml2_conf.ini, api-paste.ini,
juice_neutron_api_wsgi.py, neutron-api.log, gunicorn.pid, manage.log}``.
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
from juice.services.base import Progress, Service, Sites, quiet
from juice.services.buses.rabbitmq import RabbitMQ
from juice.services.databases.schema import create_database
from juice.services.deviations import Deviation, dev, spec_set
from juice.services.openstack.keystone import VENV, Keystone, venv_versions
from juice.services.openstack.os_api import (
    Catalog,
    GunicornApi,
    argv_shim,
    authtoken,
    check_venv,
    gunicorn_argv,
    os_env,
    wait_http,
)
from juice.services.openstack.ovn import OVN
from juice.services.process import Server, port_open, run_to_end, spawn

PORT = 9696
DB_NAME = "neutron"
USER = "neutron"
APP = "juice_neutron_api_wsgi:application"
NETWORK = "juice-net"
SUBNET = "juice-subnet"
CIDR = "10.64.0.0/12"
DB_POOL = 5 + 50  # oslo.db's max_pool_size + max_overflow, per API worker (neutron keeps them)


# gunicorn refuses a request line over 4,094 bytes (its default), and nova lists the ports of many
# servers in one GET (device_id=...&device_id=...: 5,704 bytes for a cleanup of 120 servers, an
# HTTP 500 from nova-api); devstack's uWSGI takes 64 KiB (buffer-size 65535). 0: no limit.
LIMIT_REQUEST_LINE = ("--limit-request-line", "0", "4094",
                      "nova lists many servers' ports in one GET: over 4,094 bytes gunicorn refused it "
                      "(devstack's uWSGI takes 64 KiB)")


def _section(name: str, items: dict[str, Any]) -> list[str]:
    return ["", f"[{name}]", *(f"{k} = {str(v).lower() if isinstance(v, bool) else v}"
                               for k, v in items.items())]


def render_neutron_conf(*, db_url: str, transport_url: str, auth_url: str, region: str, password: str,
                        state: str, api_workers: int, debug: bool = False,
                        rpc_workers: int | None = None, authtoken_memcached: str | None = None) -> str:
    """neutron.conf: ML2 core plugin, the database, RabbitMQ, keystonemiddleware and the nova
    notifier (both as the service user ``neutron``), logs on stderr. ``rpc_workers`` (None:
    neutron's default, half the CPUs) and keystonemiddleware's ``memcached_servers`` (None: its
    in-process token cache) only when given."""
    auth = {"auth_type": "password", "auth_url": auth_url, "username": USER, "password": password,
            "project_name": "service", "user_domain_name": "Default", "project_domain_name": "Default"}
    lines = ["# rendered by juice", "[DEFAULT]"] + [f"{k} = {v}" for k, v in {
        "core_plugin": "ml2", "service_plugins": "ovn-router", "auth_strategy": "keystone",
        "transport_url": transport_url, "api_workers": api_workers, "host": "juice-neutron",
        "state_path": state, "use_stderr": "true", "debug": str(debug).lower(),
        **({"rpc_workers": rpc_workers} if rpc_workers is not None else {})}.items()]
    lines += _section("database", {"connection": db_url})
    lines += _section("keystone_authtoken",
                      authtoken(auth_url, USER, password, memcached=authtoken_memcached))
    lines += _section("nova", {**auth, "region_name": region})
    lines += _section("oslo_concurrency", {"lock_path": f"{state}/locks"})
    return "\n".join(lines) + "\n"


def render_ml2_conf(*, nb: str, sb: str) -> str:
    """ml2_conf.ini: ML2/OVN, geneve tenant networks, flat provider networks."""
    lines = ["# rendered by juice"]
    lines += _section("ml2", {"mechanism_drivers": "ovn", "type_drivers": "geneve,flat",
                              "project_network_types": "geneve", "extension_drivers": "port_security",
                              "overlay_ip_version": 4})
    lines += _section("ml2_type_geneve", {"vni_ranges": "1:65536", "max_header_size": 38})
    lines += _section("ml2_type_flat", {"flat_networks": "*"})
    lines += _section("securitygroup", {"enable_security_group": True})
    lines += _section("ovn", {"ovn_nb_connection": nb, "ovn_sb_connection": sb,
                              "ovn_metadata_enabled": False})
    return "\n".join(lines) + "\n"


class Neutron(GunicornApi, Service):
    """neutron-api (ML2/OVN) in ``site`` on ``db`` (see the module doc)."""

    kind = "neutron"

    NAME = "neutron"
    PORT = PORT

    def __init__(self, lab: Sites, db: Service, mq: RabbitMQ, ks: Keystone, ovn: OVN | None,
                 progress: Progress = quiet, *, site: int = 1, api_workers: int = 1,
                 debug: bool = False, db_site: int | None = None, rpc_workers: int | None = None,
                 authtoken_memcached: str | None = None) -> None:
        """``db_site``: the site whose database endpoint it writes through (default its own);
        ``rpc_workers``: neutron.conf's (None: unset); ``authtoken_memcached``: keystonemiddleware's
        ``memcached_servers`` (None: unset, its in-process cache)."""
        super().__init__(lab, progress)
        if site not in lab.sites:
            raise UserError(f"neutron.site: {site} is not a site of this lab (1..{len(lab.sites)})")
        if not 1 <= api_workers <= 64:
            raise UserError(f"neutron.api_workers: expected 1..64, got {api_workers}")
        if rpc_workers is not None and not 0 <= rpc_workers <= 64:
            raise UserError(f"neutron.rpc_workers: expected 0..64, got {rpc_workers}")
        self.rpc_workers, self.authtoken_memcached = rpc_workers, authtoken_memcached
        self.db, self.mq, self.ks, self.ovn = db, mq, ks, ovn
        self.site, self.api_workers, self.debug = site, api_workers, debug
        self.db_site = site if db_site is None else db_site
        self.password = secrets.token_urlsafe(24)
        self.server: Server | None = None
        self.timings: dict[str, float] = {}
        self.network_id = ""
        self.subnet_id = ""

    @property
    def place(self) -> Place:
        return self.lab.place(self.site)

    @property
    def home(self) -> Path:
        return self.place.root / f"s{self.site}" / "neutron"

    @property
    def log(self) -> Path:
        return self.home / "neutron-api.log"

    def url(self) -> str:
        return f"http://{self.lab.site_ip(self.site)}:{PORT}"

    def _env(self) -> dict[str, str]:
        # ASGI_WORKERS: how neutron 29 learns its API worker count outside uWSGI/mod_wsgi (the
        # OVN hash ring refuses to route OVSDB events without it); TMPDIR: its workers' start-time
        # and election files (named after gunicorn's pid) stay in the service's directory
        return os_env(self.home, {"OS_NEUTRON_CONFIG_DIR": str(self.home),
                                  "OS_NEUTRON_CONFIG_FILES": "neutron.conf;ml2_conf.ini",
                                  "ASGI_WORKERS": str(self.api_workers), "TMPDIR": str(self.home)})

    def configure(self) -> None:
        t0 = time.monotonic()
        place = self.place
        check_venv(place, "gunicorn", "neutron-db-manage")
        if port_open(place, place.address, PORT):
            raise ServiceError(f"neutron in site {self.site}: port {PORT} is already taken "
                               "(another neutron still running?)")
        place.remove(self.home)
        place.mkdir(self.home / "locks")
        create_database(self.lab, self.db, self.site, DB_NAME, self.progress, who="neutron")
        ep = replace(self.db.endpoint(self.db_site).write, database=DB_NAME)
        mq = self.mq.urls_all(self.site) if len(self.mq.nodes) > 1 else self.mq.url(self.site)
        place.write(self.home / "neutron.conf", render_neutron_conf(
            db_url=ep.url() + "?charset=utf8mb4", transport_url=mq, auth_url=self.ks.auth_url(self.site),
            region=self.ks.region(self.site), password=self.password, state=str(self.home),
            api_workers=self.api_workers, debug=self.debug, rpc_workers=self.rpc_workers,
            authtoken_memcached=self.authtoken_memcached), mode=0o600)
        place.write(self.home / "ml2_conf.ini", self.ml2_conf())
        paste = VENV / "etc" / "neutron" / "api-paste.ini"
        r = place.run(["cp", str(paste), str(self.home / "api-paste.ini")])
        if not r.ok:
            raise ServiceError(f"{place.label}: copying {paste} failed: {r.err.strip() or r.rc} "
                               "(is the OpenStack venv complete there? run scripts/setup.sh)")
        place.write(self.home / "juice_neutron_api_wsgi.py", argv_shim("neutron.wsgi.api"))
        self.progress("neutron-db-manage upgrade heads...")
        self.timings["db_upgrade_s"] = run_to_end(
            place, [VENV / "bin" / "neutron-db-manage", "--config-file", self.home / "neutron.conf",
                    "--config-file", self.home / "ml2_conf.ini", "upgrade", "heads"],
            log=self.home / "manage.log", what="neutron-db-manage upgrade heads", timeout=900,
            env=self._env())
        cat = Catalog(self.lab, self.ks)
        cat.service_user(USER, self.password)
        cat.register("neutron", "network", self.url())
        self.timings["configure_s"] = round(time.monotonic() - t0, 2)
        self.progress(f"neutron: database upgraded in {self.timings['db_upgrade_s']:.1f} s, in the catalog")

    def ml2_conf(self) -> str:
        """ml2_conf.ini's text (ML2/OVN here; ``neutron_ovs.NeutronOVS``: ML2/OVS)."""
        assert self.ovn is not None, "ML2/OVN needs ovn-central"
        return render_ml2_conf(nb=self.ovn.nb_url(), sb=self.ovn.sb_url())

    def start(self) -> None:
        argv = gunicorn_argv(f"{self.lab.site_ip(self.site)}:{PORT}", self.api_workers,
                             self.home / "gunicorn.pid", APP, "neutron-api", pythonpath=self.home)
        argv[1:1] = [LIMIT_REQUEST_LINE[0], LIMIT_REQUEST_LINE[1]]
        self.server = spawn(self.place, argv, log=self.log, what=f"neutron-api in site {self.site}",
                            env=self._env(), cwd=self.home)

    def wait_healthy(self, timeout: float = 180.0) -> None:
        """GET / answers 200, then the tenant network and subnet exist (made here)."""
        assert self.server is not None, "start() first"
        t0 = time.monotonic()
        self.server.wait_ready(lambda: wait_http(self.lab, self.site, self.url() + "/"), timeout,
                               interval=0.25)
        self.timings["healthy_s"] = round(time.monotonic() - t0, 2)
        self.network_id, self.subnet_id = self.ensure_network()
        self.progress(f"neutron answers in site {self.site} ({self.timings['healthy_s']:.1f} s), "
                      f"network {NETWORK} {self.network_id}")

    def token(self) -> str:
        return issue_token(self.lab, self.ks.first, self.ks.admin_credentials())

    def api(self, method: str, path: str, body: Any = None, *, ok: tuple[int, ...] = (200,),
            token: str | None = None, site: int | None = None) -> Any:
        """One call to neutron's API as Keystone's admin (or with ``token``) from ``site``
        (default neutron's): the decoded body; ServiceError naming the call otherwise."""
        r = request(self.lab, self.site if site is None else site, method, self.url() + path, body=body,
                    headers={"X-Auth-Token": token or self.token()}, timeout=60)
        if r.status not in ok:
            raise ServiceError(f"neutron {method} {path}: {r.status} {r.body[:300]!r}")
        return r.json() if r.body else None

    def ensure_network(self) -> tuple[str, str]:
        """The tenant network ``juice-net`` and its subnet (created when missing): their ids."""
        tok = self.token()
        nets = self.api("GET", f"/v2.0/networks?name={NETWORK}", token=tok)["networks"]
        net = nets[0] if nets else self.api("POST", "/v2.0/networks", {"network": {
            "name": NETWORK, "shared": True, "admin_state_up": True}}, ok=(201,), token=tok)["network"]
        subs = self.api("GET", f"/v2.0/subnets?name={SUBNET}&network_id={net['id']}", token=tok)["subnets"]
        sub = subs[0] if subs else self.api("POST", "/v2.0/subnets", {"subnet": {
            "name": SUBNET, "network_id": net["id"], "ip_version": 4, "cidr": CIDR,
            "enable_dhcp": True}}, ok=(201,), token=tok)["subnet"]
        return str(net["id"]), str(sub["id"])

    def agents(self) -> list[dict[str, Any]]:
        """GET /v2.0/agents: with ML2/OVN, one "OVN Controller agent" per chassis."""
        out: list[dict[str, Any]] = self.api("GET", "/v2.0/agents")["agents"]
        return out

    @property
    def worker_count(self) -> int:
        return self.api_workers

    @property
    def record_kind(self) -> str:
        return "neutron-api"

    def logs(self) -> list[tuple[Place, Path]]:
        return [(self.place, self.log), (self.place, self.home / "manage.log")]

    def deviations(self) -> list[Deviation]:
        return [
            *self.spec_deviations(),
            dev("neutron", "neutron-ovn-maintenance-worker", "not started", "started (devstack, kolla)",
                "its periodic NB/DB consistency repairs and agents' liveness bump are not on the boot path; "
                "one process less per deployment"),
            dev("neutron", "neutron-rpc-server", "not started", "started (devstack, kolla)",
                "ML2/OVN has no L2 agent on RabbitMQ: ports are bound and set up through OVN's databases"),
            dev("neutron", "WSGI server", "gunicorn (sync workers)", "uWSGI (devstack)",
                "the WSGI server Juice runs placement and nova-api under"),
            dev("neutron-api gunicorn", LIMIT_REQUEST_LINE[0], LIMIT_REQUEST_LINE[1], LIMIT_REQUEST_LINE[2],
                LIMIT_REQUEST_LINE[3]),
        ]

    def spec_deviations(self) -> list[Deviation]:
        """The options a spec set (neutron_api_workers, neutron_rpc_workers, authtoken_memcached)."""
        out = []
        if self.api_workers != 1:
            out.append(spec_set("neutron-api gunicorn", "--workers (ASGI_WORKERS)", self.api_workers, 1))
        if self.rpc_workers is not None:
            out.append(spec_set("neutron", "[DEFAULT] rpc_workers", self.rpc_workers,
                                "half the CPUs", "read by neutron-rpc-server only"))
        if self.authtoken_memcached:
            out.append(spec_set("neutron", "[keystone_authtoken] memcached_servers",
                                self.authtoken_memcached, "(unset: in-process token cache)"))
        return out

    def facts(self) -> dict[str, Any]:
        version = venv_versions(self.place, ["neutron"])["neutron"]
        return {"neutron_version": version, "site": self.site, "api_workers": self.api_workers,
                "url": self.url(), "ml2": "ovn", "network_id": self.network_id, "subnet_id": self.subnet_id,
                **({"ovn": self.ovn.facts()} if self.ovn is not None else {})}
