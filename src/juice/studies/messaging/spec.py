"""The messaging study spec (``workload: messaging``): oslo.messaging RPC over real buses.

Example (``examples/messaging.yaml``)::

    workload: messaging
    name: messaging-quick
    sites: 3
    delay_ms: [0, 50]                 # one-way between every pair of sites (one lab each)
    buses:
      - {kind: rabbitmq, nodes: 1}                       # one broker, in site 1
      - {kind: rabbitmq, nodes: 3, queues: quorum}       # a 3-node cluster, a node per site
      - {kind: rabbitmq-federation}                      # a broker per site, federated
      - {kind: nats, topology: cluster}                  # one NATS cluster over the sites
      - {kind: nats, topology: gateways}                 # a NATS cluster per site + gateways
    cases:
      - {tc: tc1, clients: [10, 100], servers: 3, rate: 200}
      - {tc: tc2, targets: [10, 100], rate: 200}
      - {tc: tc3, servers: [10, 100], rate: 20}
      - {tc: tc1, label: locality, clients: 6, servers: 6, clients_in: [1], rate: [100, 400]}
      - {tc: tc5, clients: 10, servers: 3, rate: 100, duration_s: 40,
         faults: [{at_s: 10, kill: rabbitmq, site: 2, restart_after_s: 10}]}

The test cases follow ombt-orchestrator's (seed 003):

=====  ==========================================================================================
tc1    one shared target: ``clients`` producers call/cast one topic served by ``servers``
tc2    ``targets`` distinct targets, one server and one client each
tc3    one fanout: ``clients`` producers (default 1) fan out to ``servers`` consumers
tc4    ``targets`` fanouts, each with ``servers`` consumers and one producer
tc5    tc1 under a fault schedule (``faults``: kill a broker node, cut a site off, change the WAN)
=====  ==========================================================================================

``rate`` is the intended rate of sends (fanout: of publications) over all producers: the load is
open loop, with Poisson arrivals by default (``arrivals: uniform`` for evenly spaced sends, as
ombt; independent processes sending evenly in lock-step would correlate their arrivals at the
bus). ``warmup_s`` of sending before the measured window is left out of the figures.
``work_ms`` is each server's handling time per message (a sleep, in one of its
``executor_thread_pool_size`` = 4 threads): servers slower than the load build a backlog.
``clients_in`` / ``servers_in`` list the sites the producers / servers are spread
over (round robin; default all sites). A case runs on every bus at every delay unless it names
``buses`` (their ``name``, default label e.g. ``rabbitmq×3``, ``nats-gateways``) and/or
``delay_ms`` (a subset of the spec's). ``clients``, ``servers``, ``targets`` and ``rate`` take a
number or a list (lists are crossed: the scale axes).

Bus kinds: ``rabbitmq`` (``nodes`` nodes, one per site from site 1 round robin, clustered;
``queues`` one of the oslo.messaging 18 flavours below), ``rabbitmq-federation`` (one broker per
site joined by the federation plugin), ``nats`` (``topology`` cluster or gateways; the
oslo.messaging transport is Juice's own, not upstream's). qdrouterd (the seed's router mesh) is
not supported: it is in no registry reachable here and oslo.messaging dropped its driver in 15.0.

Queue flavours: ``classic``; ``mirrored`` (classic mirrored through an ha-mode:all policy);
``quorum`` (rabbit_quorum_queue); ``quorum-transient`` (+ rabbit_transient_quorum_queue);
``queue-manager`` (use_queue_manager: stable reply/fanout queue names); ``stream-fanout``
(fanouts through a stream, on quorum + transient quorum, prefetch 10); ``recommended``
(upstream's advice: quorum + transient quorum + use_queue_manager + stream fanout, with
rabbit_qos_prefetch_count 10).

``provider:`` (``juice.lab.provider``) puts site k on the k-th of a list of SSH hosts (or
reserved ones): the buses' nodes and the agents run there, with the same results
(docs/multi-host.md); a static list needs at least one host per site.

Bounds: ``sites`` 1..9; ``delay_ms`` 0..500; ``nodes`` 1..9; agents per point (servers +
clients over all targets) 1..20,000; ``rate`` 0.1..100,000 /s; ``duration_s`` 1..3,600;
``length`` 0..1,000,000 bytes; ``timeout_s`` 1..600; ``repetitions`` 1..100;
``agents_per_process`` 1..5,000; ``pool`` 1..1,000; ``runner.warmup_runs`` 0..10 (default 0):
discarded runs of each bus deployment's first point before its measured runs
(``juice.spec.warmup``).
"""

from __future__ import annotations

from collections.abc import Hashable
from itertools import product
from typing import Annotated, ClassVar, Literal

from annotated_types import Ge, Le
from pydantic import Field, field_validator, model_validator

from juice.faults.spec import Fault
from juice.sla.criteria import MessagingSla
from juice.spec.base import NAME_RE, FiniteFloat, PositiveInt, Seconds, Strict, no_duplicates
from juice.spec.study import StudySpec
from juice.spec.warmup import SweepRunner

MAX_AGENTS = 20_000
FLAVOURS = ("classic", "mirrored", "quorum", "quorum-transient", "queue-manager", "stream-fanout",
            "recommended")
TCS = ("tc1", "tc2", "tc3", "tc4", "tc5")

Site = Annotated[int, Ge(1), Le(9)]
Count = Annotated[PositiveInt, Le(MAX_AGENTS)]
Rate = Annotated[FiniteFloat, Ge(0.1), Le(100_000)]
Delay = Annotated[FiniteFloat, Ge(0), Le(500)]


def _axis(v: object) -> list[object]:
    return v if isinstance(v, list) else [v]


class Bus(Strict):
    """One bus deployment (see the module doc)."""

    kind: Literal["rabbitmq", "rabbitmq-federation", "nats"]
    name: str | None = Field(default=None, pattern=NAME_RE, description="what cases and reports call it")
    nodes: Annotated[PositiveInt, Le(9)] = Field(default=1, description="rabbitmq: cluster nodes")
    queues: Literal["classic", "mirrored", "quorum", "quorum-transient", "queue-manager", "stream-fanout",
                    "recommended"] = "classic"
    topology: Literal["cluster", "gateways"] = Field(default="cluster", description="nats only")

    @field_validator("kind", mode="before")
    @classmethod
    def _known(cls, v: object) -> object:
        if v in ("qdrouterd", "amqp1", "router"):
            raise ValueError("qdrouterd (the seed's router mesh) is not supported: Qpid Dispatch Router "
                             "is in no registry reachable here and oslo.messaging dropped its AMQP 1.0 "
                             "driver in 15.0; use rabbitmq-federation or nats (topology: gateways) for a "
                             "locality-aware mesh")
        return v

    @model_validator(mode="after")
    def _fields_of_kind(self) -> Bus:
        if self.kind != "rabbitmq" and self.nodes != 1:
            raise ValueError("nodes: only for kind rabbitmq (federation and nats have one per site)")
        if self.kind == "nats" and self.queues != "classic":
            raise ValueError("queues: only for the rabbitmq kinds")
        if self.kind != "nats" and self.topology != "cluster":
            raise ValueError("topology: only for kind nats (cluster or gateways)")
        return self

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.kind == "rabbitmq":
            return f"rabbitmq×{self.nodes}" + ("" if self.queues == "classic" else f" {self.queues}")
        if self.kind == "rabbitmq-federation":
            return "rabbitmq-federation" + ("" if self.queues == "classic" else f" {self.queues}")
        return f"nats-{self.topology}"


class Case(Strict):
    """One test case; list-valued fields are scale axes (crossed)."""

    tc: Literal["tc1", "tc2", "tc3", "tc4", "tc5"]
    label: str | None = Field(default=None, pattern=NAME_RE)
    method: Literal["call", "cast"] = "call"
    clients: list[Count] = Field(default=[1], min_length=1)
    servers: list[Count] = Field(default=[1], min_length=1)
    targets: list[Count] = Field(default=[1], min_length=1)
    rate: list[Rate] = Field(default=[100.0], min_length=1)
    duration_s: Annotated[Seconds, Ge(1), Le(3600)] = 10.0
    length: Annotated[int, Ge(0), Le(1_000_000)] = 64
    timeout_s: Annotated[Seconds, Ge(1), Le(600)] = 30.0
    work_ms: Annotated[Seconds, Le(10_000)] = Field(
        default=0.0, description="each server's handling time per message (sleep): a slow consumer")
    clients_in: list[Site] | None = None
    servers_in: list[Site] | None = None
    faults: list[Fault] = Field(default=[], max_length=100)
    buses: list[str] | None = Field(default=None, description="only on these buses (their names)")
    delay_ms: list[Delay] | None = Field(default=None, description="only at these delays")

    @field_validator("clients", "servers", "targets", "rate", mode="before")
    @classmethod
    def _lists(cls, v: object) -> object:
        return _axis(v)

    @field_validator("clients", "servers", "targets", "rate", "clients_in", "servers_in")
    @classmethod
    def _once(cls, v: list[Hashable] | None) -> list[Hashable] | None:
        if v is not None:
            no_duplicates(v)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Case:
        tc = self.tc
        if tc == "tc2" and self.clients != [1]:
            raise ValueError("clients: tc2 has one client per target; scale `targets` instead")
        if tc == "tc2" and self.servers != [1]:
            raise ValueError("servers: tc2 has one server per target; scale `targets` instead")
        if tc in ("tc1", "tc3", "tc5") and self.targets != [1]:
            raise ValueError(f"targets: {tc} has one target; use tc2 (calls) or tc4 (fanouts)")
        if tc == "tc4" and self.clients != [1]:
            raise ValueError("clients: tc4 has one producer per fanout")
        if tc in ("tc3", "tc4") and self.method != "call":
            raise ValueError(f"method: {tc} sends fanout casts; leave method out")
        if tc == "tc5" and not self.faults:
            raise ValueError("faults: tc5 needs a fault schedule "
                             "(e.g. [{at_s: 10, kill: rabbitmq, site: 2}])")
        if tc != "tc5" and self.faults:
            raise ValueError(f"faults: only tc5 has a fault schedule (this case is {tc})")
        for i, f in enumerate(self.faults):
            if f.at_iteration is not None:
                raise ValueError(f"faults.{i}.at_iteration: the messaging study times faults with at_s")
        for c, s, t in product(self.clients, self.servers, self.targets):
            if agents(tc, c, s, t) > MAX_AGENTS:
                raise ValueError(f"{agents(tc, c, s, t)} agents in one point (clients {c}, servers {s}, "
                                 f"targets {t}); at most {MAX_AGENTS}")
        return self

    @property
    def method_sent(self) -> str:
        return "fanout" if self.tc in ("tc3", "tc4") else self.method

    @property
    def name(self) -> str:
        return self.label or self.tc


def agents(tc: str, clients: int, servers: int, targets: int) -> int:
    """Logical agents (servers + clients) of a point."""
    if tc == "tc2":
        return 2 * targets
    if tc == "tc4":
        return targets * (servers + 1)
    return clients + servers


class MessagingSpec(StudySpec[MessagingSla]):
    """A messaging study. name, description, seed, sla, provider and ``wan: {delay_ms}`` (into
    ``delay_ms``) are the frame's (juice.spec.study); ``repetitions`` is bounded lower here."""

    WAN_INTO: ClassVar[str | None] = "delay_ms"

    workload: Literal["messaging"] = Field(description="the study")
    sites: Annotated[PositiveInt, Le(9)] = 3
    delay_ms: list[Delay] = Field(default=[0.0], min_length=1)
    buses: list[Bus] = Field(min_length=1, max_length=20)
    cases: list[Case] = Field(min_length=1, max_length=50)
    # 1..100, not the frame's 1..1,000: the messaging study's bound since before the frame
    repetitions: Annotated[PositiveInt, Le(100)] = Field(default=1, description="1..100")
    agents_per_process: Annotated[PositiveInt, Le(5000)] = 250
    pool: Annotated[PositiveInt, Le(1000)] = 32
    warmup_s: Annotated[Seconds, Le(60)] = 1.0
    arrivals: Literal["poisson", "uniform"] = "poisson"
    runner: SweepRunner = Field(default_factory=SweepRunner, description=(
        "the sweep's options: warmup_runs (default 0 here: every run starts its own agents and "
        "leaves warmup_s of sending out, so only the bus carries over; juice.spec.warmup)"))

    def lab_sites(self) -> int | None:
        return self.sites

    @field_validator("delay_ms", mode="before")
    @classmethod
    def _delays(cls, v: object) -> object:
        return _axis(v)

    @field_validator("delay_ms")
    @classmethod
    def _once(cls, v: list[float]) -> list[float]:
        no_duplicates(v)
        return v

    @model_validator(mode="after")
    def _sites(self) -> MessagingSpec:
        try:
            no_duplicates([b.label for b in self.buses])
        except ValueError as e:
            raise ValueError(f"buses.{e} (give the buses distinct `name`s)") from None
        for i, c in enumerate(self.cases):
            for field in ("clients_in", "servers_in"):
                for s in getattr(c, field) or []:
                    if s > self.sites:
                        raise ValueError(f"cases.{i}.{field}: site {s} is not in 1..{self.sites}")
            names = [b.label for b in self.buses]
            for b in c.buses or []:
                if b not in names:
                    raise ValueError(f"cases.{i}.buses: no bus named {b!r} (buses: {', '.join(names)})")
            for d in c.delay_ms or []:
                if d not in self.delay_ms:
                    raise ValueError(f"delay_ms: does not list {d:g}, which cases.{i}.delay_ms runs at")
            for j, f in enumerate(c.faults):
                site = f.partition if f.partition is not None else f.site
                if site is not None and site > self.sites:
                    raise ValueError(f"cases.{i}.faults.{j}: site {site} is not in 1..{self.sites}")
        return self
