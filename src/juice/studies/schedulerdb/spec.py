"""The scheduler–database study spec (``workload: scheduler-db``), validated by pydantic.

Example (``examples/scheduler-db.yaml``)::

    workload: scheduler-db
    name: sched2013
    backends: [mariadb, memcached]
    tracks: [historical-2013.1, historical-2013.2, modern]
    nodes: {start: 1000, stop: 19000, step: 1000}   # or an explicit list [1000, 5000]
    stats_per_node: 10
    schedulers: [1, 3, 9]
    updates: [false, true]
    clients: [pymysql]        # MySQL-protocol backends: pymysql (modern nova), mysqlclient (C MySQLdb)
    repetitions: 3
    lab: {sites: 3, delay_ms: 10}
    threshold_s: 60
    seed: 1

Axes are crossed (backend × track × N × schedulers × updates); ``only`` restricts the
combinations measured (each entry a partial point, e.g. ``{schedulers: 9, updates: true}``
keeps the 9-scheduler points only when updates are on). Cache backends (memcached, redis)
have one data model, the ``kv`` track, whatever ``tracks`` says.

``clients`` is the Python DB-API driver the schedulers read MariaDB/Galera with: ``pymysql``
(pure Python, what nova uses today: ``mysql+pymysql``; the default) or ``mysqlclient`` (the C
MySQLdb the 2013 seed used). Points of MySQL-protocol backends carry ``client``; the others
(PostgreSQL: psycopg 3; caches) do not. Updaters always use PyMySQL.

``parse(data, source)`` raises ``UserError("<file>: <field.path>: <msg>")`` (exit code 2).

Bounds (no NaN or infinity, no bool or string for a number; see ``juice.spec.base``):

=====================  ==============  ======================================================
field                  range           why
=====================  ==============  ======================================================
``nodes`` (each)       1..200,000      compute nodes; 200K rows x stats_per_node fit the lab
``nodes.step``         1..200,000
``stats_per_node``     0..100          rows per node in the 2013 layouts
``schedulers`` (each)  1..64           reader processes at once
``repetitions``        1..1,000        reads per scheduler per point (``only`` too)
``warmup_s``           0..60 s         updates before the first read
``update_workers``     1..64           connections per updater process
``candidates``         1..200,000      at most one per node
``lab.sites``          1..9            the study's lab
``lab.delay_ms``       0..500 ms       one-way between every pair
``threshold_s``        0.1..86,400 s   the report interval the fit is compared with
``read_timeout_s``     1..86,400 s     a read slower than this fails
``seed``               0..2**31-1
=====================  ==============  ======================================================

``backends``, ``tracks`` and ``updates`` list each value once; a spec has at most 10,000
points (and at most 100,000 combinations before ``only``), ``only`` must select at least one,
and the whole spec is at most 30 days of reads (``read_bound_s``: the plan estimate's model,
at or above what ``juice plan`` prints): a longer study is several specs.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Annotated, ClassVar, Final, Literal, NotRequired, TypedDict

from annotated_types import Interval, Le
from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from juice.sla.criteria import SchedulerDbSla
from juice.spec.base import (
    MAX_PLAN_S,
    MAX_RUNS,
    NAME_RE,
    NonNegativeInt,
    OneWayMs,
    PositiveInt,
    Repetitions,
    Seconds,
    Strict,
    StrictBool,
    StrictStr,
    no_duplicates,
)
from juice.spec.study import NAME_DOC, StudySpec
from juice.util.validation import validate

Backend = Literal["mariadb", "galera", "postgres", "memcached", "redis"]
Track = Literal["historical-2013.1", "historical-2013.2", "modern", "modern-all"]
TrackOrKv = Literal["historical-2013.1", "historical-2013.2", "modern", "modern-all", "kv"]
Client = Literal["pymysql", "mysqlclient"]
SQL_BACKENDS = ("mariadb", "galera", "postgres")
MYSQL_BACKENDS = ("mariadb", "galera")
DEFAULT_CLIENT: Client = "pymysql"
CACHE_BACKENDS = ("memcached", "redis")
KV_TRACK: Final = "kv"
MAX_NODES = 200_000
MAX_SCHEDULERS = 64
MAX_COMBINATIONS = 100_000  # points before ``only`` (computed to filter them)
NodeCount = Annotated[PositiveInt, Le(MAX_NODES)]
SchedulerCount = Annotated[PositiveInt, Le(MAX_SCHEDULERS)]
DEFAULT_BACKENDS: tuple[Backend, ...] = ("mariadb", "memcached")
DEFAULT_TRACKS: tuple[Track, ...] = ("historical-2013.1",)


class NodeRange(Strict):
    """``{start, stop, step}``: stop included (1000..19000 step 1000 = 19 points)."""

    start: NodeCount = Field(default=1000, description="first node count, 1..200,000")
    stop: NodeCount = Field(default=19000, description="last node count (included), 1..200,000")
    step: NodeCount = Field(default=1000, description="1..200,000")

    @model_validator(mode="after")
    def _order(self) -> NodeRange:
        if self.stop < self.start:
            raise ValueError(f"stop ({self.stop}) must be >= start ({self.start})")
        return self

    def values(self) -> list[int]:
        return list(range(self.start, self.stop + 1, self.step))


class LabPart(Strict):
    """The lab the study runs in. Central backends use site 1 only (server, readers and
    updaters together, as the seed's single box); Galera puts a node in every site, the
    schedulers read from node 1 and the updates arrive through the other nodes."""

    sites: Annotated[PositiveInt, Le(9)] = Field(default=3, description="1..9")
    delay_ms: Annotated[OneWayMs, Le(500)] = Field(default=10.0, description="one-way, between every pair, "
                                                                             "0..500 ms")


class SdbParams(TypedDict):
    """One measured point's parameters (its manifest's ``params``; what its key hashes)."""

    backend: Backend
    track: TrackOrKv
    nodes: int
    schedulers: int
    updates: bool
    client: NotRequired[Client]  # MySQL backends only


class Point(Strict):
    """A partial point for ``only`` (None = any value); ``nodes_max`` bounds N and
    ``repetitions`` overrides the spec's for the points this entry selects."""

    backend: Backend | None = None
    track: TrackOrKv | None = None
    client: Client | None = None
    nodes: NodeCount | None = None
    nodes_max: NodeCount | None = None
    schedulers: SchedulerCount | None = None
    updates: StrictBool | None = None
    repetitions: Repetitions | None = Field(default=None, description="1..1,000")

    def matches(self, p: SdbParams) -> bool:
        if self.nodes_max is not None and p["nodes"] > self.nodes_max:
            return False
        want = self.model_dump(exclude={"nodes_max", "repetitions"})
        return all(v is None or p.get(k) == v for k, v in want.items())


def _nodes_kind(v: object) -> str:
    return "range" if isinstance(v, dict | NodeRange) else "list"


Nodes = Annotated[Annotated[list[NodeCount], Tag("list")] | Annotated[NodeRange, Tag("range")],
                  Discriminator(_nodes_kind)]


class SchedulerDbSpec(StudySpec[SchedulerDbSla]):
    """One scheduler–database study. See the module doc for the meaning and bounds of every field;
    description, seed, sla, provider and ``wan: {delay_ms: [d]}`` (into ``lab.delay_ms``, one
    delay) are the frame's (juice.spec.study). ``name`` has a default here and ``repetitions``
    means reads per scheduler per point (default 5), not runs."""

    WAN_INTO: ClassVar[str | None] = "lab.delay_ms"
    WAN_SINGLE: ClassVar[bool] = True

    workload: Literal["scheduler-db"] = Field(description="the study")
    name: StrictStr = Field(default="scheduler-db", pattern=NAME_RE, description=NAME_DOC)
    backends: list[Backend] = Field(default_factory=lambda: list(DEFAULT_BACKENDS), min_length=1)
    tracks: list[Track] = Field(default_factory=lambda: list(DEFAULT_TRACKS), min_length=1)
    nodes: Nodes = Field(default_factory=NodeRange,
                         description="node counts (1..200,000 each) or {start, stop, step}")
    stats_per_node: Annotated[NonNegativeInt, Le(100)] = Field(default=10, description="0..100")
    schedulers: list[SchedulerCount] = Field(default_factory=lambda: [1, 3, 9], min_length=1,
                                             description="schedulers reading at once, 1..64 each")
    updates: list[StrictBool] = Field(default_factory=lambda: [False, True], min_length=1)
    clients: list[Client] = Field(default_factory=lambda: [DEFAULT_CLIENT], min_length=1,
                                  description="MySQL-protocol backends: the schedulers' Python driver")
    repetitions: Repetitions = Field(default=5, description="reads per scheduler per point, 1..1,000")
    warmup_s: Annotated[Seconds, Le(60)] = Field(default=1.0, description="updates run this long before "
                                                                         "reads, 0..60 s")
    update_workers: Annotated[PositiveInt, Le(64)] = Field(default=8, description="connections per updater "
                                                                                  "process, 1..64")
    candidates: Annotated[PositiveInt, Le(MAX_NODES)] = Field(
        default=1000, description="modern: placement's max_placement_results, 1..200,000")
    only: list[Point] = Field(default_factory=list)
    lab: LabPart = Field(default_factory=LabPart)
    threshold_s: Annotated[Seconds, Interval(ge=0.1, le=86_400)] = Field(
        default=60.0, description="report interval, 0.1..86,400 s")
    read_timeout_s: Annotated[Seconds, Interval(ge=1, le=86_400)] = Field(
        default=600.0, description="a read slower than this fails, 1..86,400 s")

    def lab_sites(self) -> int | None:
        return self.lab.sites

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, v: list[int] | NodeRange) -> list[int] | NodeRange:
        if isinstance(v, list) and not v:
            raise ValueError("give at least one node count")
        return v

    @field_validator("schedulers")
    @classmethod
    def _scheds(cls, v: list[int]) -> list[int]:
        return sorted(set(v))

    @field_validator("backends", "tracks", "updates")
    @classmethod
    def _once(cls, v: list[Hashable]) -> list[Hashable]:
        no_duplicates(v)
        return v

    @field_validator("clients")
    @classmethod
    def _clients(cls, v: list[Client]) -> list[Client]:
        return list(dict.fromkeys(v))

    @model_validator(mode="after")
    def _galera_sites(self) -> SchedulerDbSpec:
        if "galera" in self.backends and self.lab.sites < 2:
            raise ValueError("lab.sites: galera needs >= 2 sites (reads on node 1, updates on the others)")
        return self

    @model_validator(mode="after")
    def _size(self) -> SchedulerDbSpec:
        """At most MAX_COMBINATIONS before ``only``, 1..MAX_RUNS points after it, and at most
        MAX_PLAN_S of work (``read_bound_s``)."""
        combos = (sum(len(self.tracks_for(b)) * len(self.clients_for(b)) for b in self.backends)
                  * len(self.node_counts()) * len(self.schedulers) * len(self.updates))
        if combos > MAX_COMBINATIONS:
            raise ValueError(f"nodes: {combos} combinations of backends, tracks, clients, node counts, "
                             f"schedulers and updates; at most {MAX_COMBINATIONS} (fewer node counts: "
                             f"a larger step)")
        points = self.points()
        if not points:
            raise ValueError("only: selects none of the points of the axes")
        if len(points) > MAX_RUNS:
            raise ValueError(f"{len(points)} points; at most {MAX_RUNS} in one spec (use only, or split it)")
        total = sum(read_bound_s(p, reps_for(self, p)) for p in points)
        if not total <= MAX_PLAN_S:
            raise ValueError(f"estimated at {total / 86400:.0f} days of reads; at most "
                             f"{MAX_PLAN_S / 86400:.0f} days in one spec: fewer node counts, "
                             f"schedulers or repetitions, or split it")
        return self

    def node_counts(self) -> list[int]:
        vals = self.nodes if isinstance(self.nodes, list) else self.nodes.values()
        return sorted(set(vals))

    def tracks_for(self, backend: str) -> list[TrackOrKv]:
        return [KV_TRACK] if backend in CACHE_BACKENDS else list(self.tracks)

    def clients_for(self, backend: str) -> list[Client | None]:
        """The ``client`` values of ``backend``'s points (None: the point has no ``client``)."""
        return list(self.clients) if backend in MYSQL_BACKENDS else [None]

    def points(self) -> list[SdbParams]:
        """Every measured point, in execution order (backend, track family, N ascending)."""
        out = []
        for b in self.backends:
            for n in self.node_counts():
                for t in self.tracks_for(b):
                    for c in self.clients_for(b):
                        for s in self.schedulers:
                            for u in self.updates:
                                p: SdbParams = {"backend": b, "track": t, "nodes": n,
                                                     "schedulers": s, "updates": u}
                                if c is not None:
                                    p["client"] = c
                                if not self.only or any(o.matches(p) for o in self.only):
                                    out.append(p)
        return out


# The plan's estimate (juice.studies.schedulerdb.study.estimate_s) depends on this module, so
# the spec bounds a point's work with the same model; tests/spec/test_bounds.py checks that
# this stays at or above the estimate.
_COST_PER_KNODE = {"historical-2013.1": 0.5, "historical-2013.2": 0.25, "modern": 0.02,
                   "modern-all": 0.2, KV_TRACK: 0.01}


def read_bound_s(p: SdbParams, reps: int, cores: int = 2) -> float:
    """Seconds of work of point ``p`` (``reps`` reads per scheduler): an upper bound of the
    plan's estimate (see above)."""
    per_read = _COST_PER_KNODE.get(p["track"], 0.5) * p["nodes"] / 1000
    contention = max(1.0, p["schedulers"] / cores)
    return reps * per_read * contention * (1.3 if p["updates"] else 1.0) + 1.55


def reps_for(spec: SchedulerDbSpec, p: SdbParams) -> int:
    """Reads per scheduler at point ``p``: the first matching ``only`` entry's override, else
    the spec's ``repetitions``."""
    for o in spec.only:
        if o.repetitions is not None and o.matches(p):
            return o.repetitions
    return spec.repetitions


def parse(data: object, source: str = "spec") -> SchedulerDbSpec:
    """Validate ``data``; UserError naming ``source`` and the field path on the first error
    (model-level validators name their field at the start of the message)."""
    return validate(SchedulerDbSpec, data, source, expected="a mapping with `workload: scheduler-db`",
                    unknown_key_hint="see examples/scheduler-db.yaml for the format")
