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
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from juice.util.validation import validate

Backend = Literal["mariadb", "galera", "postgres", "memcached", "redis"]
Track = Literal["historical-2013.1", "historical-2013.2", "modern", "modern-all"]
Client = Literal["pymysql", "mysqlclient"]
SQL_BACKENDS = ("mariadb", "galera", "postgres")
MYSQL_BACKENDS = ("mariadb", "galera")
DEFAULT_CLIENT: Client = "pymysql"
CACHE_BACKENDS = ("memcached", "redis")
KV_TRACK = "kv"
MAX_NODES = 200_000
DEFAULT_BACKENDS: tuple[Backend, ...] = ("mariadb", "memcached")
DEFAULT_TRACKS: tuple[Track, ...] = ("historical-2013.1",)


class NodeRange(BaseModel):
    """``{start, stop, step}``: stop included (1000..19000 step 1000 = 19 points)."""

    model_config = ConfigDict(extra="forbid")
    start: int = Field(default=1000, ge=1, le=MAX_NODES)
    stop: int = Field(default=19000, ge=1, le=MAX_NODES)
    step: int = Field(default=1000, ge=1)

    @model_validator(mode="after")
    def _order(self) -> NodeRange:
        if self.stop < self.start:
            raise ValueError(f"stop ({self.stop}) must be >= start ({self.start})")
        return self

    def values(self) -> list[int]:
        return list(range(self.start, self.stop + 1, self.step))


class LabPart(BaseModel):
    """The lab the study runs in. Central backends use site 1 only (server, readers and
    updaters together, as the seed's single box); Galera puts a node in every site, the
    schedulers read from node 1 and the updates arrive through the other nodes."""

    model_config = ConfigDict(extra="forbid")
    sites: int = Field(default=3, ge=1, le=9)
    delay_ms: float = Field(default=10.0, ge=0, le=500, description="one-way, between every pair")


class Point(BaseModel):
    """A partial point for ``only`` (None = any value); ``nodes_max`` bounds N and
    ``repetitions`` overrides the spec's for the points this entry selects."""

    model_config = ConfigDict(extra="forbid")
    backend: Backend | None = None
    track: str | None = None
    client: Client | None = None
    nodes: int | None = None
    nodes_max: int | None = Field(default=None, ge=1)
    schedulers: int | None = None
    updates: bool | None = None
    repetitions: int | None = Field(default=None, ge=1, le=1000)

    def matches(self, p: dict[str, Any]) -> bool:
        if self.nodes_max is not None and int(p["nodes"]) > self.nodes_max:
            return False
        want = self.model_dump(exclude={"nodes_max", "repetitions"})
        return all(v is None or p.get(k) == v for k, v in want.items())


class SchedulerDbSpec(BaseModel):
    """One scheduler–database study. See the module doc."""

    model_config = ConfigDict(extra="forbid")
    workload: Literal["scheduler-db"]
    name: str = Field(default="scheduler-db", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    backends: list[Backend] = Field(default_factory=lambda: list(DEFAULT_BACKENDS), min_length=1)
    tracks: list[Track] = Field(default_factory=lambda: list(DEFAULT_TRACKS), min_length=1)
    nodes: list[int] | NodeRange = Field(default_factory=NodeRange)
    stats_per_node: int = Field(default=10, ge=0, le=100)
    schedulers: list[int] = Field(default_factory=lambda: [1, 3, 9], min_length=1)
    updates: list[bool] = Field(default_factory=lambda: [False, True], min_length=1)
    clients: list[Client] = Field(default_factory=lambda: [DEFAULT_CLIENT], min_length=1,
                                  description="MySQL-protocol backends: the schedulers' Python driver")
    repetitions: int = Field(default=5, ge=1, le=1000, description="reads per scheduler per point")
    warmup_s: float = Field(default=1.0, ge=0, le=60, description="updates run this long before reads")
    update_workers: int = Field(default=8, ge=1, le=64, description="connections per updater process")
    candidates: int = Field(default=1000, ge=1, description="modern: placement's max_placement_results")
    only: list[Point] = Field(default_factory=list)
    lab: LabPart = Field(default_factory=LabPart)
    threshold_s: float = Field(default=60.0, gt=0)
    read_timeout_s: float = Field(default=600.0, gt=0, description="a read slower than this fails")
    seed: int = 1

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, v: list[int] | NodeRange) -> list[int] | NodeRange:
        if isinstance(v, list):
            if not v:
                raise ValueError("give at least one node count")
            bad = [n for n in v if n < 1 or n > MAX_NODES]
            if bad:
                raise ValueError(f"node counts must be 1..{MAX_NODES}, got {bad[0]}")
        return v

    @field_validator("schedulers")
    @classmethod
    def _scheds(cls, v: list[int]) -> list[int]:
        bad = [s for s in v if s < 1 or s > 64]
        if bad:
            raise ValueError(f"scheduler counts must be 1..64, got {bad[0]}")
        return sorted(set(v))

    @field_validator("clients")
    @classmethod
    def _clients(cls, v: list[Client]) -> list[Client]:
        return list(dict.fromkeys(v))

    @model_validator(mode="after")
    def _galera_sites(self) -> SchedulerDbSpec:
        if "galera" in self.backends and self.lab.sites < 2:
            raise ValueError("lab.sites: galera needs >= 2 sites (reads on node 1, updates on the others)")
        return self

    def node_counts(self) -> list[int]:
        vals = self.nodes if isinstance(self.nodes, list) else self.nodes.values()
        return sorted(set(vals))

    def tracks_for(self, backend: str) -> list[str]:
        return [KV_TRACK] if backend in CACHE_BACKENDS else list(self.tracks)

    def clients_for(self, backend: str) -> list[str | None]:
        """The ``client`` values of ``backend``'s points (None: the point has no ``client``)."""
        return list(self.clients) if backend in MYSQL_BACKENDS else [None]

    def points(self) -> list[dict[str, Any]]:
        """Every measured point, in execution order (backend, track family, N ascending)."""
        out = []
        for b in self.backends:
            for n in self.node_counts():
                for t in self.tracks_for(b):
                    for c in self.clients_for(b):
                        for s in self.schedulers:
                            for u in self.updates:
                                p: dict[str, Any] = {"backend": b, "track": t, "nodes": n,
                                                     "schedulers": s, "updates": u}
                                if c is not None:
                                    p["client"] = c
                                if not self.only or any(o.matches(p) for o in self.only):
                                    out.append(p)
        return out


def reps_for(spec: SchedulerDbSpec, p: dict[str, Any]) -> int:
    """Reads per scheduler at point ``p``: the first matching ``only`` entry's override, else
    the spec's ``repetitions``."""
    for o in spec.only:
        if o.repetitions is not None and o.matches(p):
            return o.repetitions
    return spec.repetitions


def parse(data: Any, source: str = "spec") -> SchedulerDbSpec:
    """Validate ``data``; UserError naming ``source`` and the field path on the first error
    (model-level validators name their field at the start of the message)."""
    return validate(SchedulerDbSpec, data, source, expected="a mapping with `workload: scheduler-db`",
                    unknown_key_hint="see examples/scheduler-db.yaml for the format")
