"""The whole nova stack in one call: database, RabbitMQ, Keystone, placement, glance (real;
fake-glance when asked), neutron with ML2/OVN and ovn-central (real; fake-neutron when asked),
nova's control plane and the simulated compute hosts — torn down in reverse.

    dep = NovaDeployment(lab, progress, NovaStack(computes=ComputeOptions(Computes(nodes_per_process=20))))
    dep.up()                       # bounded; on failure everything started is stopped
    cli = dep.client(2)            # NovaClient logged in as Keystone's admin, from site 2
    flavor = cli.ensure_flavor("juice-small", vcpus=1, ram_mb=512, disk_gb=1)
    sid = cli.boot("juice-vm-1", flavor, dep.image_id, network=dep.network_id)
    cli.wait_status(sid, "ACTIVE")
    dep.collect_logs(rundir / "logs"); dep.facts()
    dep.stop()                     # computes, nova, fakes, placement, Keystone, RabbitMQ, database

Placement of each piece is a parameter (``NovaStack``); the defaults put the database, the bus,
Keystone, placement, glance, the fakes and nova's control plane in site 1 and the computes in
site 2. The image service is the real glance-api (``juice.services.openstack.glance``: its
database, the file store, the deployment's image uploaded through its API; nova finds it in the
catalog) unless ``image_service="fake-glance"`` asks for the stand-in (recorded as a deviation).
The network service is the real neutron (``network_service="ovn"``: ``juice.services.openstack.
neutron`` with ML2/OVN, ``juice.services.openstack.ovn``; the tenant network boots ask for is
``network_id``; each nova-compute process plays its hosts' ovn-controller, simulated, its
deviations recorded), or with ``network_service="ovs"`` neutron with ML2/OVS and the real
neutron-rpc-server (``juice.services.openstack.neutron_ovs``; each nova-compute process plays its
hosts' neutron-openvswitch-agent, simulated, its deviations recorded), unless
``network_service="fake-neutron"`` asks for the stand-in (boots then use ``networks: none``;
recorded as a deviation).
Keystone runs in one site (``keystone_sites``: one per listed site, each with its region and its
site's database node), with its cache in a memcached per site (as devstack and kolla deploy it:
without it Keystone 30 sends about 500 queries to the database to validate one admin token,
~0.45 s of CPU, for every API call nova's services and Juice make) and cheap password hashing
(4 rounds): it is not what the nova study measures. ``bus_sites`` lists one RabbitMQ node per
entry (a cluster when several; nova's transport_url then lists every node). With ``haproxy``
on, Debian's haproxy runs in ``haproxy_site`` with one frontend per service (Keystone: every
Keystone; placement; nova-api) and the catalog, nova's and placement's ``[keystone_authtoken]``
and the study's clients all go through it (``juice.services.balancers.haproxy``; ``haproxy_maxconn``: its
global maxconn). The database keeps MariaDB's ``max_connections`` (151) unless the stack sets
one or its pools may open more (``NovaStack.db_limit``: the sum, recorded with how it was counted
among the deployment's deviations).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from juice.errors import UserError
from juice.openstack.nova import NovaClient
from juice.services import kinds
from juice.services.balancers.haproxy import HAProxy, check_maxconn, check_timeout
from juice.services.base import Progress, Service, Sites, quiet
from juice.services.buses.rabbitmq import PROMETHEUS, RabbitMQ
from juice.services.caches.redis import Redis
from juice.services.databases.mariadb import DEFAULT_MAX_CONNECTIONS, check_max_connections
from juice.services.deviations import Deviation, spec_set
from juice.services.deviations import of as deviations_of
from juice.services.openstack.fake_openstack import IMAGE_ID, FakeServices
from juice.services.openstack.fake_openstack import PORTS as FAKE_PORTS
from juice.services.openstack.glance import DB_POOL as GLANCE_POOL
from juice.services.openstack.glance import IMAGE_ID as GLANCE_IMAGE_ID
from juice.services.openstack.glance import Glance
from juice.services.openstack.keystone import PORT as KEYSTONE_PORT
from juice.services.openstack.keystone import Keystone, KeystoneOptions
from juice.services.openstack.keystone_settings import db_connections as keystone_connections
from juice.services.openstack.neutron import DB_POOL as NEUTRON_POOL
from juice.services.openstack.neutron import Neutron
from juice.services.openstack.neutron_ovs import NeutronOVS
from juice.services.openstack.nova import API_PORT, Nova
from juice.services.openstack.nova_compute import NovaComputes
from juice.services.openstack.nova_conf import ComputeOptions, NovaOptions
from juice.services.openstack.nova_settings import db_connections
from juice.services.openstack.ovn import OVN
from juice.services.openstack.placement import PORT as PLACEMENT_PORT
from juice.services.openstack.placement import Placement, Placements

__all__ = ["IMAGE_ID", "IMAGE_SERVICES", "NovaDeployment", "NovaStack"]

IMAGE_SERVICES = ("glance", "fake-glance")  # NovaStack.image_service: the real one, the stand-in
# NovaStack.network_service: the real neutron with ML2/OVN (ovn-central + simulated chassis), the stand-in
# ovs: the real neutron with ML2/OVS (neutron-rpc-server; each compute process its hosts' simulated
# neutron-openvswitch-agent, juice.services.openstack.neutron_ovs)
NETWORK_SERVICES = ("ovn", "ovs", "fake-neutron")


@dataclass(frozen=True)
class NovaStack:
    """Where everything runs and its knobs (nova's own in ``nova`` and ``computes``)."""

    db: str = "mariadb"                  # a Juice database kind (MySQL protocol: mariadb, galera)
    db_site: int = 1                     # mariadb's site (galera: a node in every site)
    bus_sites: tuple[int, ...] = (1,)    # RabbitMQ nodes (clustered when several)
    keystone_site: int = 1
    keystone_sites: tuple[int, ...] | None = None  # one Keystone per site (default: keystone_site)
    haproxy: bool = False                # haproxy in front of Keystone, placement and nova-api
    haproxy_site: int | None = None      # default: nova's control site
    haproxy_maxconn: int | None = None   # haproxy's global maxconn (None: haproxy's default)
    haproxy_timeout_server_s: float | None = None  # haproxy's timeout server (None: Debian's 50 s)
    placement_site: int = 1
    placement_workers: int = 2
    # more placement servers, one per site (with haproxy in front): each writes through its own
    # site's database endpoint when nova's roles do (db_writers local), else through nova's control site's
    placement_sites: tuple[int, ...] = ()
    fakes_site: int = 1
    image_service: str = "glance"        # glance (real glance-api 33) | fake-glance (the stand-in)
    glance_site: int | None = None       # default: fakes_site
    glance_workers: int = 2              # glance-api's gunicorn workers
    # ovn: the real neutron-server (ML2/OVN) + ovn-central in neutron_site, each compute process
    # its hosts' simulated ovn-controller; fake-neutron: the stand-in (boots with networks none)
    network_service: str = "ovn"
    neutron_site: int | None = None      # default: fakes_site
    neutron_workers: int = 1             # neutron-api's workers (gunicorn; ASGI_WORKERS)
    neutron_rpc_workers: int | None = None  # neutron.conf [DEFAULT] rpc_workers (None: unset)
    keystone_workers: int = 1            # Keystone's gunicorn workers per site
    # keystonemiddleware's [keystone_authtoken] memcached_servers in nova-api, nova-compute,
    # glance-api and neutron-api: Keystone's memcached (False: unset, in-process token caches)
    authtoken_memcached: bool = False
    image_mb: int = 1                    # the size of the deployment's image (MiB)
    # node_cache: a node downloads the image through glance-api at its first boot of it, then uses
    # its copy (a libvirt node with local disks); none: no node reads it (always, with fake-glance)
    image_download: str = "node_cache"
    # SIMULATED waits/failures of fake-glance and fake-neutron (FakeServices' simulation)
    fakes_simulation: dict[str, dict[str, Any]] = field(default_factory=dict)
    nova: NovaOptions = field(default_factory=NovaOptions)
    computes: ComputeOptions = field(default_factory=ComputeOptions)
    db_max_connections: int | None = None  # the database's max_connections (None: see db_limit)

    def __post_init__(self) -> None:
        if self.db not in ("mariadb", "galera"):
            raise UserError(f"db: nova and placement run on mariadb or galera, not {self.db!r}")
        if self.image_service not in IMAGE_SERVICES:
            raise UserError(f"image_service: expected glance or fake-glance, got {self.image_service!r}")
        if self.network_service not in NETWORK_SERVICES:
            raise UserError(f"network_service: expected ovn, ovs or fake-neutron, "
                            f"got {self.network_service!r}")
        if self.network_service != "fake-neutron" and "neutron" in self.fakes_simulation:
            raise UserError("fakes_simulation.neutron: simulated port waits and failures are fake-neutron's; "
                            "with the real neutron they would not happen (network_service: fake-neutron)")
        if self.image_download not in ("node_cache", "none"):
            raise UserError(f"image_download: expected node_cache or none, got {self.image_download!r}")
        if self.image_service == "glance" and "glance" in self.fakes_simulation:
            raise UserError("fakes_simulation.glance: simulated image waits and failures are fake-glance's; "
                            "with the real glance they would not happen (image_service: fake-glance)")
        check_max_connections(self.db_max_connections)
        check_maxconn(self.haproxy_maxconn)
        check_timeout(self.haproxy_timeout_server_s)
        if self.keystone_sites is not None and (not self.keystone_sites
                                                 or len(set(self.keystone_sites)) < len(self.keystone_sites)):
            raise UserError(f"keystone_sites: one Keystone per site, at least one site; got "
                            f"{list(self.keystone_sites)}")
        if not self.haproxy and (self.haproxy_maxconn is not None or self.haproxy_site is not None
                                 or self.haproxy_timeout_server_s is not None):
            raise UserError("haproxy_maxconn, haproxy_site, haproxy_timeout_server_s: only with haproxy on "
                            "(haproxy=True)")
        extra = [k for k in self.placement_sites if k != self.placement_site]
        if extra and not self.haproxy:
            raise UserError("placement_sites: several placement servers need haproxy in front (haproxy=True)")
        if len(set(self.placement_sites)) < len(self.placement_sites):
            raise UserError(f"placement_sites: one placement per site; got {list(self.placement_sites)}")

    def placement_servers(self) -> list[int]:
        """Every placement server's site, placement_site first."""
        return [self.placement_site, *(k for k in self.placement_sites if k != self.placement_site)]

    def neutron_processes(self) -> int:
        """neutron's processes with a database pool: the API workers (+ with ML2/OVS
        neutron-rpc-server's RPC workers (``neutron_rpc_workers``; unset:
        neutron's default, half the CPUs, counted as 1) and its state-report worker; 0 with fake-neutron)."""
        if self.network_service == "fake-neutron":
            return 0
        rpc = (1 if self.neutron_rpc_workers is None else self.neutron_rpc_workers) + 1
        return self.neutron_workers + (rpc if self.network_service == "ovs" else 0)

    def keystone(self) -> KeystoneOptions:
        """Keystone's options: its sites, cache on, cheap hashing (not what is measured); no
        pre-warm: a worker's one-time ~0.15 s collection pause is noise beside boots of seconds."""
        return KeystoneOptions(cache=True, password_hash_rounds=4, prewarm=False,
                               workers=self.keystone_workers,
                               sites=self.keystone_sites or (self.keystone_site,),
                               db_site=None if self.nova.db_writers == "local" else self.nova.control_site)

    def db_limit(self) -> tuple[int | None, str | None]:
        """(max_connections, reason) of the database: the spec's (reason None); else the sum
        of the deployment's pools when it exceeds MariaDB's 151 (with how it was counted);
        else (None, None): MariaDB's default."""
        if self.db_max_connections is not None:
            return self.db_max_connections, None
        glance = self.glance_workers * GLANCE_POOL if self.image_service == "glance" else 0
        needed, how = db_connections(self.nova,
                                     placement_workers=self.placement_workers * len(self.placement_servers()),
                                     keystone=keystone_connections(self.keystone(),
                                                                   len(self.keystone().sites or ())),
                                     glance=glance,
                                     neutron=self.neutron_processes() * NEUTRON_POOL)
        if needed <= DEFAULT_MAX_CONNECTIONS:
            return None, None
        return needed, f"{how} (more than MariaDB's {DEFAULT_MAX_CONNECTIONS})"


# What each service needs running before it starts. nova waits for placement: its scheduler
# and computes find placement through the catalog when they start. Keystone waits for haproxy
# when there is one (the catalog calls go through it).
NEEDS: dict[str, tuple[str, ...]] = {
    "haproxy": (), "database": (), "rabbitmq": (), "keystone": ("database", "haproxy"),
    "placement": ("database", "keystone"), "fakes": ("keystone",),
    "glance": ("database", "keystone"),
    "nova": ("database", "rabbitmq", "keystone", "placement"),
    "ovn": (), "neutron": ("database", "rabbitmq", "keystone", "ovn"),
    "computes": ("nova", "placement", "fakes", "glance", "neutron"),
}
PROFILER_NEEDS: dict[str, tuple[str, ...]] = {  # with OSProfiler on: its Redis before nova
    **NEEDS, "profiler": (), "nova": (*NEEDS["nova"], "profiler")}


def run_in_order(step: Callable[[str], None], needs: dict[str, tuple[str, ...]],
                 abort: threading.Event) -> None:
    """Call ``step(name)`` for every name of ``needs``, each in its own thread as soon as the
    steps it needs have returned. The first error (or Ctrl-C here) sets ``abort`` (steps not
    begun yet are skipped), waits for the steps under way (each is bounded) and is raised."""
    done: set[str] = set()
    running: dict[Future[None], str] = {}
    error: BaseException | None = None
    with ThreadPoolExecutor(max_workers=len(needs), thread_name_prefix="nova-up") as ex:
        try:
            while len(done) < len(needs) and error is None:
                for name, deps in needs.items():
                    if name not in done and name not in running.values() and set(deps) <= done:
                        running[ex.submit(step, name)] = name
                if not running:
                    raise ValueError(f"needs: nothing can start after {sorted(done)}")
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in finished:
                    name = running.pop(f)
                    if f.exception() is not None and error is None:
                        error = f.exception()
                    done.add(name)
        except BaseException as e:  # Ctrl-C while waiting
            error = e
        if error is not None:
            abort.set()
            wait(running)  # the steps under way are bounded; nothing new starts
            raise error


class NovaDeployment:
    """Composes the services of ``NovaStack`` (see the module doc)."""

    def __init__(self, lab: Sites, progress: Progress = quiet, stack: NovaStack | None = None) -> None:
        self.lab, self.progress = lab, progress
        self.stack = s = stack or NovaStack()
        limit, why = s.db_limit()
        self.db: Service = kinds.build(lab, s.db, progress, max_connections=limit,
                                          max_connections_reason=why,
                                          **({"site": s.db_site} if s.db == "mariadb" else {}))
        self.mq = RabbitMQ(lab, progress, nodes=list(s.bus_sites), plugins=[PROMETHEUS])  # rates per run
        self.ks = Keystone(lab, self.db, progress, s.keystone())
        # db_writers local: every placement writes through its own site's node; single: through
        # nova's control site's, as nova and Keystone do (facts()["db_writers"])
        writer = None if s.nova.db_writers == "local" else s.nova.control_site
        self.placement = Placement(lab, self.db, self.ks, progress, site=s.placement_site,
                                   workers=s.placement_workers, db_site=writer)
        self.placements = Placements([self.placement, *(
            Placement(lab, self.db, self.ks, progress, site=k, workers=s.placement_workers,
                      primary=self.placement, db_site=writer)
            for k in s.placement_servers()[1:])], progress)
        # the real glance-api, unless the stand-in is asked for (fake-glance then runs with fake-neutron)
        self.glance: Glance | None = None
        if s.image_service == "glance":
            self.glance = Glance(lab, self.db, self.ks, progress, site=s.glance_site or s.fakes_site,
                                 workers=s.glance_workers, image_mb=s.image_mb, db_site=writer,
                                 authtoken_memcached=self._authtoken_cache(s.glance_site or s.fakes_site))
        # the real neutron (ML2/OVN) when asked for, else fake-neutron
        self.ovn: OVN | None = None
        self.neutron: Neutron | None = None
        if s.network_service == "ovn":
            self.ovn = OVN(lab, progress, site=s.neutron_site or s.fakes_site)
            self.neutron = Neutron(lab, self.db, self.mq, self.ks, self.ovn, progress,
                                   site=s.neutron_site or s.fakes_site, api_workers=s.neutron_workers,
                                   db_site=writer, rpc_workers=s.neutron_rpc_workers,
                                   authtoken_memcached=self._authtoken_cache(s.neutron_site or s.fakes_site))
        if s.network_service == "ovs":  # ML2/OVS: + neutron-rpc-server, the agents simulated
            self.neutron = NeutronOVS(lab, self.db, self.mq, self.ks, progress,
                                      site=s.neutron_site or s.fakes_site, api_workers=s.neutron_workers,
                                      db_site=writer, rpc_workers=s.neutron_rpc_workers,
                                      authtoken_memcached=self._authtoken_cache(
                                          s.neutron_site or s.fakes_site))
        fake_kinds = tuple(k for k in FAKE_PORTS if (k != "glance" or self.glance is None)
                           and (k != "neutron" or self.neutron is None))
        self.fakes: FakeServices | None = None
        if fake_kinds:
            self.fakes = FakeServices(lab, self.ks, progress, site=s.fakes_site,
                                      simulation=s.fakes_simulation, kinds=fake_kinds)
        self.nova = Nova(lab, self.db, self.mq, self.ks, self.placement, progress, s.nova)
        self.nova.authtoken_memcached = self._authtoken_cache(s.nova.control_site)
        # OSProfiler's backend (s.nova.profiler): a Redis in nova's control site
        self.redis: Redis | None = None
        if s.nova.profiler == "redis":
            self.redis = Redis(lab, progress, site=s.nova.control_site, maxmemory_mb=1024)
            self.nova.profiler_url = f"redis://{self.redis.address(s.nova.control_site)}"
        download = self.glance is not None and s.image_download == "node_cache"  # fake-glance serves none
        self.computes = NovaComputes(lab, self.nova, progress, s.computes, image_download=download)
        if self.ovn is not None:  # each compute process plays its hosts' ovn-controller
            self.computes.ovn_sb = self.ovn.sb_url()
        if isinstance(self.neutron, NeutronOVS):  # ... or their neutron-openvswitch-agent
            self.computes.ovs_agent = self.neutron.agent_config
        self.lb = self._haproxy() if s.haproxy else None
        self.started: list[Service] = []
        self.timings: dict[str, float] = {}
        self._lock = threading.Lock()

    def _authtoken_cache(self, site: int) -> str | None:
        """keystonemiddleware's ``memcached_servers`` for a service in ``site``: Keystone's
        memcached (``authtoken_memcached``), else None (its in-process cache, as shipped)."""
        if not self.stack.authtoken_memcached:
            return None
        if self.ks.memcached is None:
            raise UserError("authtoken_memcached: needs Keystone's memcached (Keystone's cache on)")
        return self.ks.memcached.address(site)

    def _haproxy(self) -> HAProxy:
        """haproxy with a frontend per service, every instance behind it; the services' URLs
        (catalog, clients, ``[keystone_authtoken]``) point at it."""
        s = self.stack
        lb = HAProxy(self.lab, self.progress, site=s.haproxy_site or s.nova.control_site,
                     maxconn=s.haproxy_maxconn, timeout_server_s=s.haproxy_timeout_server_s)
        ip = self.lab.site_ip
        lb.add("keystone", KEYSTONE_PORT, [(k, ip(k), KEYSTONE_PORT) for k in self.ks.ks_sites])
        lb.add("placement", PLACEMENT_PORT, [(k, ip(k), PLACEMENT_PORT) for k in s.placement_servers()])
        lb.add("nova-api", API_PORT, [(s.nova.api, ip(s.nova.api), API_PORT)])
        self.ks.front = lb.url("keystone")
        for pl in self.placements.members:
            pl.front = lb.url("placement")
        self.nova.front = lb.url("nova-api")
        return lb

    def needs(self) -> dict[str, tuple[str, ...]]:
        """``NEEDS`` of this stack (without haproxy when it is off; OSProfiler's Redis before
        nova when it is on)."""
        base = PROFILER_NEEDS if self.redis is not None else NEEDS
        absent = {n for n, svc in (("haproxy", self.lb), ("glance", self.glance), ("fakes", self.fakes),
                                   ("ovn", self.ovn), ("neutron", self.neutron)) if svc is None}
        return {k: tuple(d for d in v if d not in absent) for k, v in base.items() if k not in absent}

    def services(self) -> list[tuple[str, Service]]:
        """In dependency order (a service needs only those before it; stop order is the
        reverse of the order they started in)."""
        prof: list[tuple[str, Service]] = [("profiler", self.redis)] if self.redis is not None else []
        return [*([("haproxy", self.lb)] if self.lb is not None else []),
                ("database", self.db), ("rabbitmq", self.mq), *prof, ("keystone", self.ks),
                ("placement", self.placements),
                *([("glance", self.glance)] if self.glance is not None else []),
                *([("fakes", self.fakes)] if self.fakes is not None else []),
                *([("ovn", self.ovn)] if self.ovn is not None else []),
                *([("neutron", self.neutron)] if self.neutron is not None else []),
                ("nova", self.nova),
                ("computes", self.computes)]

    def up(self, timeout: float = 900.0) -> NovaDeployment:
        """Every service as soon as what it needs is healthy (``NEEDS``: the database and
        RabbitMQ start together, placement, the fakes and nova's cells side by side), each
        bounded; on any failure (or Ctrl-C) nothing more starts, what is starting finishes its
        bounded step, and everything started is stopped in reverse before the error propagates."""
        t0 = time.monotonic()
        svc = dict(self.services())
        abort = threading.Event()

        def bring_up(name: str) -> None:
            if abort.is_set():
                return
            t = time.monotonic()
            self.progress(f"nova stack: {name}...")
            with self._lock:
                self.started.append(svc[name])
            svc[name].configure()
            svc[name].start()
            svc[name].wait_healthy(max(60.0, timeout - (time.monotonic() - t0)))
            self.timings[f"{name}_s"] = round(time.monotonic() - t, 2)
            self.timings[f"{name}_ready_at_s"] = round(time.monotonic() - t0, 2)

        try:
            run_in_order(bring_up, self.needs(), abort)
        except BaseException:
            self.stop()
            raise
        self.timings["up_s"] = round(time.monotonic() - t0, 2)
        self.progress(f"nova stack up in {self.timings['up_s']:.0f} s "
                      f"({self.stack.computes.nodes} simulated nodes)")
        return self

    def stop(self) -> None:
        """Stop what started, in reverse order (each stop is bounded; errors do not stop the rest)."""
        errors: list[BaseException] = []
        while self.started:
            svc = self.started.pop()
            try:
                svc.stop()
            except Exception as e:  # keep tearing down; report the first error afterwards
                errors.append(e)
        if errors:
            raise errors[0]

    def __enter__(self) -> NovaDeployment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def image_id(self) -> str:
        """The image boots use: the one uploaded to glance, or fake-glance's."""
        return GLANCE_IMAGE_ID if self.glance is not None else IMAGE_ID

    @property
    def network_id(self) -> str | None:
        """The network boots ask for: the tenant network made in the real neutron (None with
        fake-neutron: boots ask for ``networks: none``)."""
        return self.neutron.network_id if self.neutron is not None else None

    def client(self, site: int) -> NovaClient:
        """A nova REST client in ``site``, logged in as Keystone's admin."""
        return NovaClient.login(self.lab, site, self.nova.api_url(), self.ks.admin_credentials())

    def pids(self) -> list[int]:
        """Every process of the stack known now (for leftover checks)."""
        out = [r.pid for _, svc in self.services() for r in svc.records() if r.pid]
        return sorted(set(out + self.nova.pids() + self.placements.pids() + self.computes.pids()))

    def collect_logs(self, dest: Path) -> list[Path]:
        out: list[Path] = []
        for name, svc in self.services():
            out += svc.collect_logs(dest / name)
        return out

    def deviations(self) -> list[Deviation]:
        """Every service's settings that differ from the shipped defaults."""
        return deviations_of(svc for _, svc in self.services()) + self.stand_ins()

    def stand_ins(self) -> list[Deviation]:
        """The stand-ins asked for instead of real services (image_service: fake-glance,
        network_service: fake-neutron)."""
        out = []
        if self.glance is None:
            out.append(spec_set("image service", "image_service", "fake-glance (stand-in)", "glance",
                                "fake-glance answers nova's image requests from a stdlib server: no token "
                                "validated, no database, no image stored or downloaded"))
        if self.neutron is None:
            out.append(spec_set("network service", "network_service", "fake-neutron (stand-in)", "ovn",
                                "fake-neutron answers nova's network requests from a stdlib server with "
                                "empty lists: boots use networks none, no port is created, bound or waited "
                                "for"))
        return out

    def facts(self) -> dict[str, Any]:
        return {"db": self.stack.db, "nova": self.nova.facts(), "computes": self.computes.facts(),
                "placement": {**self.placement.facts(), "sites": self.stack.placement_servers()},
                "image_service": "glance" if self.glance is not None else "fake-glance (stand-in)",
                **({"glance": self.glance.facts()} if self.glance is not None else {}),
                "network_service": ("fake-neutron (stand-in)" if self.neutron is None else "neutron (ML2/OVS)"
                                    if isinstance(self.neutron, NeutronOVS) else "neutron (ML2/OVN)"),
                **({"neutron": self.neutron.facts()} if self.neutron is not None else {}),
                "timings": dict(self.timings),
                **({"haproxy": self.lb.facts()} if self.lb is not None else {}),
                "keystone_sites": list(self.ks.ks_sites), "rabbitmq_nodes": len(self.mq.nodes),
                "db_writers": self._writers()}

    def _writers(self) -> dict[str, Any]:
        """Which database node each role writes through (by site): one for every role with
        ``db_writers: single``, each role's own site's with ``local``."""
        if self.stack.nova.db_writers == "local":
            return {"mode": "local", "nova": "own site", "placement": self.stack.placement_servers(),
                    "keystone": list(self.ks.ks_sites)}
        one = self.stack.nova.control_site
        return {"mode": "single", "nova": one, "placement": one, "keystone": one}
