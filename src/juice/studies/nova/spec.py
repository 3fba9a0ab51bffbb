"""The nova study spec (``workload: nova``): Rally-style boots against real nova (seeds 002, 004).

Example (``examples/nova-boot.yaml``)::

    workload: nova
    name: nova-boot
    sites: 2                        # site 1: API, conductor, schedulers, DB, RabbitMQ, Keystone,
                                    # placement; computes in the other sites
    delay_ms: [0]                   # ONE-WAY between sites (an axis)
    db: [mariadb]                   # an axis: mariadb | galera (a node per site)
    galera_writers: [single]        # an axis (Galera only): single | multi (schedulers spread over
                                    # the sites, each writing through its site's node)
    schedulers: [1, 3]              # an axis: nova-scheduler processes
    host_subset_size: [1]           # an axis: [filter_scheduler] host_subset_size
    concurrency_backend: [threading]   # an axis: threading | eventlet
    max_pool_size: [10]             # an axis: [database] max_pool_size (oslo.db ships 5)
    # server: {max_overflow: 50, rpc_response_timeout: 60, rpc_conn_pool_size: 30,
    #          executor_thread_pool_size: 64, conductor_workers: 1, scheduler_workers: 1,
    #          api_workers: 1, max_connections: 151}   # upstream names; unset: shipped defaults
    computes: {processes: 4, nodes_per_process: 25, vcpus: 8, memory_mb: 16384, disk_gb: 200}
    # computes: {..., isolation: fork}   # one nova-compute per node, forked (shared: one per process)
    # computes: {..., spawn_time: {dist: table, table: seed004}}   # SIMULATED waits (seconds):
    # image_service: fake-glance    # the stand-in instead of the real glance-api (the default;
    #                               # recorded as a deviation; docs/nova-simulation.md)
    # image_download: none          # nodes never read the image (default node_cache: a node
    #                               # downloads it through glance-api at its first boot of it)
    # fakes: {image_fetch_s: {dist: uniform, low_s: 0.1, high_s: 2}}   # constant | uniform |
    #                                                  # lognormal | table (docs/nova-simulation.md;
    #                                                  # image_fetch: fake-glance's, so with it only)
    # failures: {spawn: 0.01, image_fetch: 0.02}       # SIMULATED, probabilities
    scenarios:
      - NovaServers.boot_server
      - {name: NovaServers.boot_and_delete_server, args: {min_sleep: 0, max_sleep: 0}}
    runner: {times: 40, concurrency: [5, 10, 20]}    # concurrency is an axis (closed loop)
    # runner: {times: 200, rate: [1, 2, 4], arrival: poisson}   # or open loop: boots/s (an axis)
    preload: [0]                    # an axis: VMs already running before the window
    # preload_method: rows          # api (default: booted through nova) | rows (cloned from one
    #                               # booted VM: rows + placement allocations; docs/nova-simulation.md)
    users: {tenants: 2, users_per_tenant: 2}          # Rally's users context
    # controllers_site: 1           # database (mariadb), RabbitMQ, Keystone, placement, stand-ins,
    #                               # nova-api, conductor, schedulers
    # computes: {..., sites: [2]}   # nova-compute processes, round-robin (default: the other sites)
    # driver_site: 1                # the load driver
    # profiler: redis               # OSProfiler in nova too, compared by `juice trace` (docs/trace.md)
    # provider: {kind: enoslib, static: {hosts: [...]}}   # on hosts (examples/hosts-nova.yaml)
    # haproxy: {maxconn: [4000, 16000]}   # haproxy in front of Keystone, placement, nova-api;
    #                                     # an axis: its global maxconn (docs/topology.md)
    # topology: {control_sites: [1, 2, 3], keystones: 3, rabbitmq_nodes: 3}   # production shape

Each run boots ``times`` servers (flavor ``flavor``, the stand-in image, ``networks: none``)
from one driver in ``driver_site`` as the context's users, measures every boot as Rally does
(``nova.boot_server``: POST, 1 s pre-poll delay, then a GET every ``poll_interval_s`` until
ACTIVE, at most ``boot_timeout_s``) and from nova's own notification (compute's
``instance.create.end``, no polling grid), then deletes what it made (Rally's cleanup).

Against an existing cloud (``target:``, as in the Keystone study: clouds.yaml, openrc, Rally env
or explicit fields; ``max_rps`` caps every request): give ``image`` (an id), optionally ``network``
(none | auto | an id) and an existing ``flavor.name``; no lab field. The drivers run on this
machine; what a run created (servers, users and projects named ``s_juice_<run>...``) is deleted
after it, and ``juice cleanup --target SPEC`` removes leftovers.

Bounds: ``sites`` 2..9; ``delay_ms`` 0..500; ``schedulers`` 1..16; ``host_subset_size`` 1..100;
``max_pool_size`` 1..500; ``server.max_overflow`` -1..1,000, ``rpc_response_timeout`` 1..3,600 s,
``rpc_conn_pool_size`` and ``executor_thread_pool_size`` 1..1,000, ``*_workers`` 1..64,
``max_connections`` 1..100,000; ``computes.processes`` 1..200, ``nodes_per_process`` 1..5,000 (at most
20,000 nodes; with ``isolation: fork`` as many as the hosts' memory holds: the memory plan,
juice.studies.nova.sitemap, checks each host before anything starts); ``runner.times``
1..100,000; ``concurrency`` 1..2,000;
``preload`` 0..75,000; ``repetitions`` 1..100; ``boot_timeout_s`` 10..3,600; ``poll_interval_s``
0.1..60; ``runner.warmup_runs`` 0..10 (default 1, 0 with a target: discarded runs of each
deployment's first point before its measured runs, ``juice.spec.warmup``). ``preload`` + ``times``
must fit on the nodes (every resource of a node is exact: allocation ratios 1.0, nothing
reserved) unless ``allow_over_capacity: true`` (capacity K, K+1 requests: exactly one must fail).
Simulated waits (``computes.spawn_time``, ``fakes``) are seconds, each draw capped by ``cap_s``
(default 600, at most 3,600); ``failures`` are probabilities 0..1 (docs/nova-simulation.md).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal

from annotated_types import Ge, Le
from pydantic import Field, field_validator, model_validator

from juice.errors import UserError
from juice.faults.spec import Fault, check_sites
from juice.profile.spec import Profile
from juice.services.openstack.nova_conf import (
    Computes,
    NovaOptions,
    Overflow,
    PoolSize,
    RpcPool,
    Schedulers,
    SubsetSize,
    TimeoutS,
    VifTimeoutS,
    Workers,
)
from juice.sla.criteria import NovaSla
from juice.spec import warmup as spec_warmup
from juice.spec.base import (
    FiniteFloat,
    PositiveInt,
    Strict,
    StrictStr,
    no_duplicates,
    plain_data,
)
from juice.spec.study import TargetStudySpec
from juice.spec.warmup import WarmupRuns
from juice.studies.nova.simulation import Failures, Fakes
from juice.studies.nova.topology import HAProxyOptions, Topology
from juice.studies.nova.topology import check as check_topology
from juice.util.validation import validate

SCENARIOS = ("NovaServers.boot_server", "NovaServers.boot_and_delete_server")
TARGET_FORBIDS = ("faults", "provider", "sites", "delay_ms", "db", "galera_writers", "schedulers",
                  "host_subset_size", "concurrency_backend", "max_pool_size", "preload", "preload_method",
                  "computes", "driver_site", "allow_over_capacity", "controllers_site", "server", "fakes",
                  "failures", "profiler", "configurations", "haproxy", "topology", "image_service",
                  "image_download")
SHORT = {s.split(".")[-1]: s for s in SCENARIOS}
SCENARIO_ARGS: dict[str, dict[str, object]] = {
    "NovaServers.boot_server": {},
    "NovaServers.boot_and_delete_server": {"min_sleep": 0.0, "max_sleep": 0.0, "force_delete": False},
}
Delay = Annotated[FiniteFloat, Ge(0), Le(500)]


class ScenarioRef(Strict):
    name: StrictStr = Field(max_length=200, description=f"one of {', '.join(SCENARIOS)}")
    args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        full = SHORT.get(v, v)
        if full not in SCENARIOS:
            raise ValueError(f"unknown nova scenario {v!r} (choose from {', '.join(SCENARIOS)})")
        return full

    @model_validator(mode="after")
    def _args(self) -> ScenarioRef:
        plain_data(self.args)
        allowed = SCENARIO_ARGS[self.name]
        bad = sorted(set(self.args) - set(allowed))
        if bad:
            raise ValueError(f"args: unknown argument(s) {', '.join(bad)} "
                             f"(allowed: {', '.join(allowed) or 'none'})")
        for k in ("min_sleep", "max_sleep"):
            v = self.args.get(k)
            bad_value = isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 3600
            if v is not None and bad_value:
                raise ValueError(f"args.{k}: expected seconds 0..3600, got {v!r}")
        if "force_delete" in self.args and not isinstance(self.args["force_delete"], bool):
            raise ValueError("args.force_delete: expected true or false")
        return self


class ServerOptions(Strict):
    """Server options under their upstream names, one value each (unset: the shipped default;
    docs/server-settings.md). Every nova process and role gets the same value."""

    max_overflow: Overflow | None = Field(
        default=None, description="[database] and [api_database] max_overflow (oslo.db: 50)")
    rpc_response_timeout: TimeoutS | None = Field(
        default=None, description="[DEFAULT] rpc_response_timeout, s (oslo.messaging: 60)")
    rpc_conn_pool_size: RpcPool | None = Field(
        default=None, description="[DEFAULT] rpc_conn_pool_size (oslo.messaging: 30)")
    executor_thread_pool_size: RpcPool | None = Field(
        default=None, description="[DEFAULT] executor_thread_pool_size (oslo.messaging: 64)")
    service_down_time: TimeoutS | None = Field(
        default=None, description="[DEFAULT] service_down_time, s: a service whose last heartbeat is "
        "older is down, and the scheduler skips its node (nova: 60)")
    api_workers: Workers | None = Field(
        default=None, description="nova-api gunicorn workers (Juice: 1)")
    conductor_workers: Workers | None = Field(
        default=None, description="[conductor] workers (nova: one per CPU; Juice: 1)")
    scheduler_workers: Workers | None = Field(
        default=None, description="[scheduler] workers per nova-scheduler (nova: one per CPU; Juice: 1)")
    placement_workers: Annotated[PositiveInt, Le(64)] | None = Field(
        default=None, description="placement's gunicorn workers (gunicorn: 1; Juice: 2)")
    max_connections: Annotated[PositiveInt, Le(100_000)] | None = Field(
        default=None, description="the database's max_connections (MariaDB: 151; unset: 151, or the "
        "sum of the deployment's pools when larger)")
    haproxy_timeout_server: Annotated[PositiveInt, Le(86_400)] | None = Field(
        default=None, description="haproxy's timeout server, s: how long it waits for a backend's "
        "answer before a 504 (Debian's haproxy.cfg: 50); needs haproxy on")
    vif_plugging_timeout: VifTimeoutS | None = Field(
        default=None, description="nova [DEFAULT] vif_plugging_timeout, s: how long a spawn waits for "
        "neutron's network-vif-plugged (nova: 300; 0: no wait)")
    vif_plugging_is_fatal: bool | None = Field(
        default=None, description="nova [DEFAULT] vif_plugging_is_fatal: the timeout fails the boot "
        "(nova: true)")
    neutron_api_workers: Annotated[PositiveInt, Le(64)] | None = Field(
        default=None, description="neutron-api's WSGI workers (gunicorn --workers, ASGI_WORKERS; "
        "gunicorn: 1; neutron 29 has no api_workers option under a WSGI server)")
    neutron_rpc_workers: Annotated[int, Ge(0), Le(64)] | None = Field(
        default=None, description="neutron [DEFAULT] rpc_workers (neutron: half the CPUs; read by "
        "neutron-rpc-server only)")
    keystone_workers: Annotated[PositiveInt, Le(64)] | None = Field(
        default=None, description="Keystone's gunicorn workers per site (gunicorn: 1)")
    authtoken_memcached: bool | None = Field(
        default=None, description="keystonemiddleware [keystone_authtoken] memcached_servers of "
        "nova-api, nova-compute, glance-api and neutron-api: Keystone's memcached (unset: each "
        "process's in-process token cache)")

    def set(self) -> dict[str, int]:
        """The options the spec set (what run keys hash: unset ones are left out)."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class Configuration(ServerOptions):
    """A named configuration (``configurations``): server options, plus the deployment axes a
    seed's fixes change (one value each; unset: the spec's axis)."""

    galera_writers: Literal["single", "multi"] | None = Field(
        default=None, description="Galera: single | multi (seed 004's fix: multi -> single)")
    host_subset_size: SubsetSize | None = Field(
        default=None, description="[filter_scheduler] host_subset_size (seed 004's fix: > schedulers)")
    max_pool_size: PoolSize | None = Field(
        default=None, description="[database] max_pool_size (seed 002's fix: 5 -> 100)")

    def server(self) -> dict[str, int]:
        """The server options it sets (what goes on top of ``server``)."""
        return {k: v for k, v in self.set().items() if k in ServerOptions.model_fields}


class Flavor(Strict):
    name: StrictStr = Field(default="juice-small", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    vcpus: Annotated[PositiveInt, Le(1024)] = 1
    ram_mb: Annotated[PositiveInt, Le(1_048_576)] = 512
    disk_gb: Annotated[int, Ge(0), Le(10_000)] = 1


class Users(Strict):
    tenants: Annotated[PositiveInt, Le(500)] = 1  # seed 002: up to 500
    users_per_tenant: Annotated[PositiveInt, Le(100)] = 1


class Runner(Strict):
    times: Annotated[PositiveInt, Le(100_000)] = 10
    concurrency: list[Annotated[PositiveInt, Le(2000)]] = Field(default_factory=lambda: [1], min_length=1)
    timeout_s: Annotated[FiniteFloat, Ge(10), Le(7200)] = 900.0
    rate: list[Annotated[FiniteFloat, Ge(0.01), Le(1000)]] = Field(
        default_factory=list, description="open loop instead: boots per second (an axis), 0.01..1,000")
    arrival: Literal["constant", "poisson"] = "poisson"
    max_in_flight: Annotated[PositiveInt, Le(10_000)] = Field(
        default=1000, description="open loop: arrivals beyond are dropped (counted)")
    stop_on_sla: bool = Field(default=False, description="end the load as soon as an sla: criterion "
                              "can no longer pass (juice.sla.stop)")
    # a fresh nova's first run meets cold services (first requests, connections, caches) and a
    # deployment's points always run in the spec's order (no runner.order here), so its first
    # point (e.g. the lowest concurrency) would carry that alone: one discarded run per
    # deployment (not in any run key: the key names the runner's fields one by one)
    warmup_runs: WarmupRuns = spec_warmup.field(1)

    @field_validator("concurrency", mode="before")
    @classmethod
    def _listify(cls, v: object) -> object:
        return [v] if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("concurrency", "rate")
    @classmethod
    def _once(cls, v: list[Hashable]) -> list[Hashable]:
        no_duplicates(v)
        return v

    def loads(self) -> list[tuple[int, float | None]]:
        """(concurrency, rate) per point: the concurrency axis, or (max_in_flight, rate) per rate."""
        if self.rate:
            return [(self.max_in_flight, r) for r in self.rate]
        return [(c, None) for c in self.concurrency]


def _axis(kind: object, default: Sequence[object], what: str) -> Any:  # Any: what Field() returns
    return Field(default_factory=lambda: list(default), min_length=1, description=f"an axis: {what}")


# network_service's default: the real neutron (ML2/OVN), as glance is the image service's (issue 40)
NETWORK_DEFAULT: Literal["ovn", "ovs", "fake-neutron"] = "ovn"


class NovaSpec(TargetStudySpec[NovaSla]):
    """A nova study. name, description, seed, sla, provider, target and ``wan: {delay_ms}`` (into
    ``delay_ms``) are the frame's (juice.spec.study); ``repetitions`` is bounded lower here."""

    WAN_INTO: ClassVar[str | None] = "delay_ms"

    workload: Literal["nova"] = Field(default="nova", description="the study")
    # 1..100, not the frame's 1..1,000: nova's bound since before the frame (its runs are capped
    # at 2,000 anyway)
    repetitions: Annotated[PositiveInt, Le(100)] = Field(default=1, description="1..100")
    sites: Annotated[int, Ge(2), Le(9)] = 2
    delay_ms: list[Delay] = _axis(Delay, [0.0], "one-way delay between sites, ms")
    db: list[Literal["mariadb", "galera"]] = _axis(str, ["mariadb"], "mariadb | galera")
    galera_writers: list[Literal["single", "multi"]] = _axis(
        str, ["single"], "Galera only: single (every role writes through site 1's node) | multi (the "
        "schedulers spread over the sites, each role writing through its own site's node)")
    schedulers: list[Schedulers] = _axis(int, [NovaOptions.schedulers], "nova-scheduler processes")
    host_subset_size: list[SubsetSize] = _axis(int, [NovaOptions.host_subset_size], "host_subset_size")
    concurrency_backend: list[Literal["threading", "eventlet"]] = _axis(str, ["threading"], "backend")
    max_pool_size: list[PoolSize] = _axis(int, [10], "[database] max_pool_size")
    preload: list[Annotated[int, Ge(0), Le(75_000)]] = _axis(int, [0], "VMs running before the window")
    preload_method: Literal["api", "rows"] = Field(default="api", description=(
        "api: preloaded VMs are booted through nova's API (~3 VMs/s here); rows: one is booted, the "
        "others are cloned from it as the database rows and placement allocations the API would "
        "write (juice.services.openstack.nova_preload; ~20,000 in minutes)"))
    computes: Computes = Field(default_factory=Computes)
    server: ServerOptions = Field(default_factory=ServerOptions, description=(
        "server options under their upstream names (docs/server-settings.md)"))
    configurations: dict[str, Configuration] | None = Field(default=None, description=(
        "named sets of server options on top of `server` (and of galera_writers, host_subset_size, "
        "max_pool_size, one value each), run alternately (each repetition runs every configuration "
        "in turn, each on its own deployment of the same shape): a before/after as one spec, e.g. "
        "{before: {}, after: {max_overflow: 100}}"))
    flavor: Flavor = Field(default_factory=Flavor)
    users: Users = Field(default_factory=Users)
    scenarios: list[ScenarioRef] = Field(min_length=1, max_length=10)
    runner: Runner = Field(default_factory=Runner)
    driver_site: Annotated[int, Ge(1), Le(9)] = 1
    controllers_site: Annotated[int, Ge(1), Le(9)] = Field(default=1, description=(
        "the site of the database (mariadb), RabbitMQ, Keystone, placement, the stand-ins, nova-api, "
        "conductor and schedulers (Galera: a node in every site; multi writers spread the schedulers)"))
    haproxy: HAProxyOptions | None = Field(default=None, description=(
        "haproxy (Debian's package) in front of Keystone, placement and nova-api; maxconn is an axis "
        "(docs/topology.md)"))
    topology: Topology = Field(default_factory=Topology, description=(
        "the control plane's shape: control_sites, keystones, rabbitmq_nodes (docs/topology.md)"))
    image_service: Literal["glance", "fake-glance"] = Field(default="glance", description=(
        "the image service: glance (the real glance-api 33: its database, the file store, tokens "
        "validated by Keystone, the deployment's image uploaded through its API) | fake-glance (the "
        "stand-in: answers nova's image requests, validates nothing; recorded as a deviation)"))
    network_service: Literal["ovn", "ovs", "fake-neutron"] = Field(default=NETWORK_DEFAULT, description=(
        "the network service: ovn (the real neutron 29 with ML2/OVN: ovn-central's NB/SB databases "
        "and northd, a port per boot on the tenant network made at deployment, bound by neutron to "
        "the node's host; each nova-compute process plays its hosts' ovn-controller, SIMULATED: "
        "docs/nova-simulation.md) | ovs (the real neutron 29 with ML2/OVS: neutron-api and "
        "neutron-rpc-server on RabbitMQ, no OVN; each nova-compute process plays its hosts' "
        "neutron-openvswitch-agent, SIMULATED: state reports and device RPCs) | fake-neutron (the "
        "stand-in: boots use networks none)"))
    image_download: Literal["node_cache", "none"] = Field(default="node_cache", description=(
        "node_cache: a simulated node downloads the image through glance-api (the user's token, "
        "nova's own image API) the first time it boots it and uses its copy afterwards, as a libvirt "
        "node with local disks does | none: no node reads the image (as with images on shared "
        "storage); the stand-in serves no image data: with fake-glance, always none"))
    fakes: Fakes = Field(default_factory=Fakes, description=(
        "SIMULATED latencies of fake-glance and fake-neutron (juice.studies.nova.simulation)"))
    failures: Failures = Field(default_factory=Failures, description=(
        "SIMULATED failure probabilities per stage: spawn, image_fetch, port_create"))
    faults: list[Fault] = Field(default_factory=list, max_length=100, description=(
        "events during every run (juice.faults.spec): partition a site, change the WAN, kill and "
        "restart nova-compute, rabbitmq or the database"))
    profiler: Literal["off", "redis"] = Field(default="off", description=(
        "OSProfiler in nova (its [profiler] section; off by default, as shipped): redis = a Redis in "
        "the control site, a trace per boot, read back into the run (osprofiler.json) and compared "
        "with the log-based trace by `juice trace` (docs/trace.md)"))
    log_format: Literal["text", "json"] = Field(default="text", description=(
        "the services' logs: oslo.log's text lines or its JSON lines (use_json: message templates)"))
    boot_timeout_s: Annotated[FiniteFloat, Ge(10), Le(3600)] = 300.0
    poll_interval_s: Annotated[FiniteFloat, Ge(0.1), Le(60)] = 2.0
    image: StrictStr | None = Field(default=None, pattern=r"^[0-9a-fA-F-]{32,36}$", description=(
        "with a target, required: the image id to boot (the lab boots its own image: glance's, or "
        "fake-glance's)"))
    compute_url: StrictStr | None = Field(default=None, pattern=r"^https?://[^\s]+$", description=(
        "with a target: nova's URL instead of the catalog's (e.g. a loopback forwarder)"))
    network: StrictStr = Field(default="none", pattern=r"^(none|auto|[0-9a-fA-F-]{32,36})$",
                               description="with a target: none | auto | a network id")
    allow_over_capacity: bool = Field(default=False, strict=True, description=(
        "boot more servers than the nodes hold (an accuracy test: capacity K, K+1 requests)"))
    results: StrictStr | None = Field(default=None, min_length=1, max_length=4096)
    profile: Profile = Field(default_factory=Profile)

    @field_validator("scenarios", mode="before")
    @classmethod
    def _shorthand(cls, v: object) -> object:
        return [{"name": s} if isinstance(s, str) else s for s in v] if isinstance(v, list) else v

    @field_validator("delay_ms", "db", "galera_writers", "schedulers", "host_subset_size",
                     "concurrency_backend",
                     "max_pool_size", "preload")
    @classmethod
    def _once(cls, v: list[Hashable]) -> list[Hashable]:
        no_duplicates(v)
        return v

    @field_validator("configurations")
    @classmethod
    def _configurations(cls, v: dict[str, Configuration] | None) -> dict[str, Configuration] | None:
        if v is None:
            return v
        if not 2 <= len(v) <= 8:
            raise ValueError(f"expected 2 to 8 named configurations (e.g. before and after), got {len(v)}")
        for name in v:
            if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,31}", name):
                raise ValueError(f"{name!r}: a configuration name is 1-32 of a-z 0-9 _ - (e.g. before)")
        return v

    def lab_sites(self) -> int | None:
        return self.sites if self.target is None else None

    @model_validator(mode="after")
    def _target(self) -> NovaSpec:
        if self.target is None:
            for k in ("image", "network", "compute_url"):
                if k in self.model_fields_set:
                    raise ValueError(f"{k}: only with a target (the lab boots its own image, "
                                     "networks none)")
            return self
        lab_only = [k for k in TARGET_FORBIDS if k in self.model_fields_set]
        if lab_only:
            raise ValueError(f"{lab_only[0]}: not with a target (the existing cloud has its own; Juice only "
                             "drives it)")
        if self.image is None:
            raise ValueError("image: required with a target (the id of an image the cloud can boot)")
        return self

    @model_validator(mode="after")
    def _fits(self) -> NovaSpec:
        if self.target is not None:  # the cloud's capacity is the cloud's: nothing to check here
            return self
        if (self.image_service == "fake-glance" and self.image_download != "none"
                and "image_download" in self.model_fields_set):
            raise ValueError("image_download: fake-glance serves no image data; with image_service: "
                             "fake-glance the nodes download nothing (image_download: none)")
        if self.image_service == "glance":
            for field, on in (("fakes.image_fetch_s", self.fakes.image_fetch_s is not None),
                              ("failures.image_fetch", self.failures.image_fetch > 0)):
                if on:
                    raise ValueError(f"{field}: simulates fake-glance's answers, and the images come from "
                                     "the real glance-api (image_service: glance, the default); add "
                                     "image_service: fake-glance, or remove it")
        for field, on in (("fakes.port_create_s", self.fakes.port_create_s is not None),
                          ("failures.port_create", self.failures.port_create > 0)):
            if on and self.network_service == "fake-neutron":
                raise ValueError(f"{field}: with fake-neutron the lab's boots use networks: none, so nova "
                                 "creates no port and nothing would wait or fail; remove it "
                                 "(docs/nova-simulation.md)")
            if on:
                raise ValueError(f"{field}: simulates fake-neutron's answers, and the ports come from the "
                                 "real neutron (network_service: ovn, the default); add network_service: "
                                 "fake-neutron (boots then use networks: none, no port), or remove it")
        check_sites(self.faults, self.sites)
        if self.driver_site > self.sites:
            raise ValueError(f"driver_site: {self.driver_site} is not a site (sites: {self.sites})")
        if self.controllers_site > self.sites:
            raise ValueError(f"controllers_site: {self.controllers_site} is not a site (sites: {self.sites}; "
                             f"choose 1..{self.sites} or more sites)")
        check_topology(self.topology, self.haproxy, self.sites, self.controllers_site)
        timed = [f"configurations.{n}" for n, c in (self.configurations or {}).items()
                 if c.haproxy_timeout_server is not None]
        timed = (["server"] if self.server.haproxy_timeout_server is not None else []) + timed
        if timed and self.haproxy is None:
            raise ValueError(f"{timed[0]}.haproxy_timeout_server: only with haproxy on (add `haproxy: {{}}`)")
        bad = [k for k in self.computes.sites or [] if k > self.sites]
        if bad:
            raise ValueError(f"computes.sites: {bad[0]} is not a site (sites: {self.sites}; choose "
                             f"1..{self.sites} or more sites)")
        nodes = self.computes.processes * self.computes.nodes_per_process
        per_node = self.per_node()
        if per_node < 1:
            raise ValueError("flavor: larger than a simulated node (computes.vcpus/memory_mb/disk_gb)")
        most = max(self.preload) + self.runner.times
        if most > nodes * per_node and not self.allow_over_capacity:
            raise ValueError(f"preload: {max(self.preload)} + runner.times {self.runner.times} servers do "
                             f"not fit on {nodes} nodes x {per_node} per node (more computes, a "
                             "smaller flavor, or allow_over_capacity: true)")
        runs = (len(self.delay_ms) * len(self.db) * len(self.galera_writers) * len(self.schedulers)
                * len(self.host_subset_size)
                * len(self.concurrency_backend) * len(self.max_pool_size) * len(self.preload)
                * len(self.scenarios) * len(self.runner.concurrency) * self.repetitions
                * max(len(self.configurations or {}), 1)
                * (len(self.haproxy.axis()) if self.haproxy is not None else 1))
        if runs > 2000:
            raise ValueError(f"{runs} runs: at most 2,000 in one spec (split it)")
        return self

    def compute_sites(self) -> list[int]:
        """Where the nova-compute processes go (round-robin): ``computes.sites``, or every site
        but the controllers'."""
        if self.computes.sites is not None:
            return list(self.computes.sites)
        return [k for k in range(1, self.sites + 1) if k != self.controllers_site]

    def per_node(self) -> int:
        """Servers of ``flavor`` one simulated node holds (exactly)."""
        c, f = self.computes, self.flavor
        disk = c.disk_gb // f.disk_gb if f.disk_gb else 10**9
        return min(c.vcpus // f.vcpus, c.memory_mb // f.ram_mb, disk)

    def capacity(self) -> int:
        """Servers of ``flavor`` the simulated nodes can hold (exactly)."""
        return self.computes.processes * self.computes.nodes_per_process * self.per_node()


def parse(data: Mapping[str, object], source: str) -> NovaSpec:
    spec = validate(NovaSpec, data, source,
                    expected="a mapping of keys (name, workload: nova, computes, ...)",
                    unknown_key_hint="see examples/nova-boot.yaml for the spec format")
    if not isinstance(spec, NovaSpec):  # pragma: no cover - validate returns the model
        raise UserError(f"{source}: not a nova spec")
    return spec
