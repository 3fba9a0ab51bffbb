"""The experiment spec of the Keystone study (seed 000): one YAML file, typed, strict.

Every list is an axis; the run matrix is their product (see ``juice.studies.keystone.matrix``)::

    name: quickstart
    workload: keystone            # the default; `scheduler-db` selects the other study
    seed: 1
    repetitions: 1
    rdbms: [mariadb, galera]      # mariadb | galera | postgres | postgres-readlocal | cockroach
    sites: [3]
    wan:
      delay_ms: [0, 50]           # ONE-WAY, uniform between every pair of sites
      # zones: [{count: 3, intra_ms: 10, inter_ms: 75}]   # hierarchical zones
      # matrices: [[[0, 10], [10, 0]]]                    # full one-way matrices
    load: [light]                 # light = one driver in site 1; high = one driver per site
    scenarios:
      - authenticate_user_and_validate_token
      - {name: create_user_update_password, args: {}, contexts: {users: {tenants: 1, users_per_tenant: 1}}}
    runner: {times: 20, concurrency: 2}          # closed loop, like Rally's `constant`
    # runner: {order: interleaved}   # the default; as-written | shuffled (juice.sweep.order)
    # runner: {rate: 50, times: 500, arrival: poisson}   # open loop
    keystone: {cache: [true], workers: 1, password_hash_rounds: 4}   # write_attribution: true
    # keystone: {max_pool_size: 5, max_overflow: 50}   # [database] pools (oslo.db's defaults)
    # database: {max_connections: [151, 500]}          # an axis: the server's max_connections

Servers run with their shipped defaults unless set here (docs/server-settings.md): MariaDB and
Galera keep ``max_connections`` 151, PostgreSQL 100, Keystone's pools oslo.db's 5 + 50.

Unknown keys are rejected; errors name the field path and the file (exit 2).

Bounds (no NaN or infinity anywhere, no bool or string for a number; see ``juice.spec.base``):

==============================  ===============  ==============================================
field                           range            why
==============================  ===============  ==============================================
``seed``                        0..2**31-1       every RNG accepts it (run r uses seed + r)
``repetitions``                 1..1,000
``sites`` (each)                1..250           the most sites a lab has
``wan``                         see juice.spec.wan: one-way delays 0..10,000 ms, jitter
                                0..10,000 ms, loss 0..100 %
``runner.times``                1..10,000,000    iterations per driver
``runner.concurrency``          1..10,000        iterations in flight per driver (closed loop)
``runner.rate``                 0.01..10,000/s   open loop; below 0.01/s a run is hours per
                                                 iteration, above 10,000/s one driver cannot send
``runner.max_in_flight``        1..100,000       open loop: arrivals beyond are dropped
``runner.order``                as-written, shuffled, interleaved (default): the run order inside
                                                 each deployment, seeded by ``seed``
``runner.warmup_runs``          0..10            discarded runs of the first point before each
                                                 deployment's measured runs (default 1; 0 with a
                                                 target; juice.spec.warmup)
``runner.timeout_s``            1..86,400 s      per iteration (one iteration is >= 14
                                                 requests: under 1 s only times out)
``keystone.workers``            1..32            gunicorn workers per site
``keystone.write_attribution``  true/false       statements of each run by kind and table
                                                 (default false: on MariaDB/Galera it turns
                                                 performance_schema ON, off by default there)
``keystone.prewarm``            true/false       requests after deploying until every worker had
                                                 its first full garbage collection (default true;
                                                 docs/run-order.md)
``keystone.max_pool_size``      1..1,000         [database] max_pool_size per worker (oslo.db: 5)
``keystone.max_overflow``       -1..1,000        [database] max_overflow per worker (oslo.db: 50)
``database.max_connections``    1..100,000 each  an axis: mariadb, galera, postgres* (not cockroach)
``keystone.password_hash_rounds``  4..14         bcrypt cost: each round doubles a password
                                                 check (4: ~1 ms, 12: ~0.25 s, 14: ~0.9 s on
                                                 this host); the plan's estimate assumes cheap
                                                 hashing, so keep 4 to measure the control plane
``scenarios.*.contexts.users``  tenants and users_per_tenant 1..1,000 each, at most 10,000
                                users; resource_management_workers 1..100
``description``                 at most 2,000 characters
==============================  ===============  ==============================================

Every axis lists each value once (a duplicate would be the same runs twice); scenario names,
arguments and contexts are checked when the spec is read (so ``juice plan`` reports them);
arguments and contexts are plain data (no NaN or infinity). A spec has at most 10,000 runs and
at most 30 days of work (``work_bound_s``: the plan estimate's model with the costliest
scenario, an upper bound of what ``juice plan`` prints): a longer study is several specs.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Annotated, Any, Literal

from annotated_types import Interval, Le
from pydantic import Field, StringConstraints, field_validator, model_validator

from juice.errors import UserError
from juice.faults.spec import Fault, check_sites
from juice.profile.spec import Profile
from juice.sla.criteria import IterationSla
from juice.spec import warmup as spec_warmup
from juice.spec.base import (
    MAX_PLAN_S,
    MAX_RUNS,
    FiniteFloat,
    NonNegativeInt,
    PositiveInt,
    Seconds,
    SiteCount,
    Strict,
    StrictBool,
    StrictStr,
    no_duplicates,
    plain_data,
)
from juice.spec.study import TargetStudySpec
from juice.spec.wan import Wan, WanPoint, wan_points
from juice.spec.warmup import WarmupRuns
from juice.sweep.order import ORDER_DOC
from juice.util.validation import validate

RDBMS = ("mariadb", "galera", "postgres", "postgres-readlocal", "cockroach")
LAB_ONLY = ("rdbms", "sites", "wan", "keystone", "check_wan", "database")
REMOTE_RDBMS = ("mariadb", "galera")
LIGHT: tuple[Literal["light", "high"], ...] = ("light",)
MAX_USERS = 10_000
ResultsPath = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=4096,
                                               pattern=r"^[^\x00]+$")]


class ScenarioRef(Strict):
    """A scenario, its arguments, and Rally's contexts (default: users 1 tenant × 1 user)."""

    name: StrictStr = Field(max_length=200, description="a Keystone scenario (KeystoneBasic.<op>, <op>...)")
    args: dict[str, Any] = Field(default_factory=dict, description="the scenario's arguments")
    contexts: dict[str, Any] = Field(default_factory=dict, description="Rally contexts (users)")

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        from juice.studies.keystone import catalog

        try:
            catalog.canonical(v)
        except UserError as e:
            raise ValueError(str(e).removeprefix("scenario: ")) from None
        return v

    @field_validator("args", "contexts")
    @classmethod
    def _plain(cls, v: dict[str, object]) -> dict[str, object]:
        plain_data(v)
        return v

    @model_validator(mode="after")
    def _buildable(self) -> ScenarioRef:
        """The scenario accepts these arguments and contexts (nothing is contacted)."""
        from juice.studies.keystone import catalog

        users = self.contexts.get("users")
        if users is not None and not isinstance(users, dict):
            raise ValueError("contexts.users: expected a mapping (tenants, users_per_tenant, ...)")
        if isinstance(users, dict):
            for k, hi in (("tenants", 1000), ("users_per_tenant", 1000),
                          ("resource_management_workers", 100)):
                n = users.get(k)
                if isinstance(n, int) and not isinstance(n, bool) and n > hi:
                    raise ValueError(f"contexts.users.{k}: at most {hi}, got {n}")
            t, u = users.get("tenants", 1), users.get("users_per_tenant", 1)
            if isinstance(t, int) and isinstance(u, int) and t * u > MAX_USERS:
                raise ValueError(f"contexts.users: {t} tenants x {u} users = {t * u} users; "
                                 f"at most {MAX_USERS} (made before every run)")
        try:
            catalog.get(self.name, dict(self.args), dict(self.contexts))
        except UserError as e:
            raise ValueError(str(e).removeprefix(f"{catalog.canonical(self.name)}.")) from None
        except (TypeError, ValueError) as e:
            raise ValueError(f"args: not accepted by the scenario ({e})") from None
        return self


class Runner(Strict):
    """Closed loop (``times`` × ``concurrency``) unless ``rate`` is set (open loop)."""

    times: Annotated[PositiveInt, Le(10_000_000)] = Field(default=10, description="iterations per driver, "
                                                                                "1..10,000,000")
    concurrency: Annotated[PositiveInt, Le(10_000)] = Field(default=1, description="closed loop: in flight, "
                                                                                   "1..10,000")
    rate: Annotated[FiniteFloat, Interval(ge=0.01, le=10_000)] | None = Field(
        default=None, description="open loop: iterations per second, 0.01..10,000")
    arrival: Literal["constant", "poisson"] = "constant"
    max_in_flight: Annotated[PositiveInt, Le(100_000)] = Field(
        default=1000, description="open loop: arrivals beyond are dropped, 1..100,000")
    timeout_s: Annotated[Seconds, Interval(ge=1, le=86_400)] = Field(
        default=300.0, description="per-iteration bound, 1..86,400 s")
    warmup: Annotated[NonNegativeInt, Le(1_000_000)] | None = Field(
        default=None, description="iterations per driver before the measured window (stored, "
                                  "tagged, left out of statistics), 0..1,000,000")
    warmup_s: Annotated[Seconds, Interval(ge=0, le=3_600)] | None = Field(
        default=None, description="or: seconds of load before the measured window, 0..3,600")
    stop_on_sla: bool = Field(default=False, description="end the load as soon as an sla: criterion "
                              "can no longer pass (juice.sla.stop)")
    order: Literal["as-written", "shuffled", "interleaved"] = Field(
        default="interleaved", description=ORDER_DOC)
    # a fresh deployment's first run is slow even after keystone.prewarm (issue 38): one
    # discarded run per deployment costs one run of its first point (quickstart: 2 x ~6 s)
    warmup_runs: WarmupRuns = spec_warmup.field(1)

    @model_validator(mode="after")
    def _one_warmup(self) -> Runner:
        if self.warmup and self.warmup_s:
            raise ValueError("warmup: give iterations (warmup) or seconds (warmup_s), not both")
        return self

    def key_dump(self) -> dict[str, object]:
        """What run keys hash: the fields, without the ones added later while unset (so runs
        stored before them keep their keys), and never ``order`` nor ``warmup_runs`` (where a run
        stands in the order, and what ran before it on its deployment, is not what it is: a
        resumed sweep in another order, or with other warm-up runs, skips it; both are in its
        manifest's ``order``)."""
        return {k: v for k, v in self.model_dump(mode="json").items()
                if not (k in ("warmup", "warmup_s", "stop_on_sla") and not v)
                and k not in ("order", "warmup_runs")}


class KeystoneAxis(Strict):
    cache: list[StrictBool] = Field(default_factory=lambda: [True], min_length=1,
                                    description="Keystone's cache on/off (an axis)")
    workers: Annotated[PositiveInt, Le(32)] = Field(default=1, description="gunicorn workers per site, 1..32")
    password_hash_rounds: Annotated[PositiveInt, Interval(ge=4, le=14)] = Field(
        default=4, description="bcrypt cost, 4..14")
    write_attribution: StrictBool = Field(
        default=False, description="statements per run by kind and table "
        "(juice.services.databases.attribution); on MariaDB/Galera it turns performance_schema ON, "
        "a deviation from the server's defaults")
    max_pool_size: Annotated[PositiveInt, Le(1000)] | None = Field(
        default=None, description="[database] max_pool_size of each worker (unset: oslo.db's 5)")
    max_overflow: Annotated[int, Interval(ge=-1, le=1000)] | None = Field(
        default=None, description="[database] max_overflow of each worker (unset: oslo.db's 50)")
    prewarm: StrictBool = Field(
        default=True, description="after deploying, requests until every Keystone worker had its first "
        "full garbage collection, a one-time ~0.1-0.2 s pause (juice.services.openstack.keystone_warm)")

    def server(self) -> dict[str, int]:
        """The pool options set (run keys hash them; unset ones are left out)."""
        return {k: v for k in ("max_pool_size", "max_overflow") if (v := getattr(self, k)) is not None}

    @field_validator("cache")
    @classmethod
    def _once(cls, v: list[bool]) -> list[bool]:
        no_duplicates(v)
        return v


class DatabaseOptions(Strict):
    """The database server's options under their upstream names (unset: the shipped default)."""

    max_connections: list[Annotated[PositiveInt, Le(100_000)]] | None = Field(
        default=None, min_length=1, description="an axis: max_connections (MariaDB/Galera ship 151, "
        "PostgreSQL 100)")

    @field_validator("max_connections")
    @classmethod
    def _once(cls, v: list[int] | None) -> list[int] | None:
        if v is not None:
            no_duplicates(v)
        return v


class Experiment(TargetStudySpec[IterationSla]):
    """A Keystone study. See the module doc for the meaning and bounds of every field; name,
    description, seed, repetitions (1..1,000), sla, provider and target are the frame's
    (juice.spec.study). Its WAN is its own ``wan`` field (zones and matrices too)."""

    workload: Literal["keystone"] = Field(default="keystone", description="the study (the default)")
    rdbms: list[StrictStr] = Field(default_factory=list, description=f"an axis: {', '.join(RDBMS)}")
    sites: list[SiteCount] = Field(default_factory=list, description="an axis of site counts, 1..250 each")
    wan: Wan = Field(default_factory=lambda: Wan(delay_ms=[0.0]))
    load: list[Literal["light", "high"]] = Field(default_factory=lambda: list(LIGHT), min_length=1)
    scenarios: list[ScenarioRef] = Field(min_length=1)
    runner: Runner = Field(default_factory=Runner)
    keystone: KeystoneAxis = Field(default_factory=KeystoneAxis)
    database: DatabaseOptions = Field(default_factory=DatabaseOptions, description=(
        "the database server's options (docs/server-settings.md)"))
    check_wan: StrictBool = Field(default=True, description="ping every pair after each WAN change")
    results: ResultsPath | None = Field(default=None, description="results root (default results/<name>)")
    faults: list[Fault] = Field(default_factory=list, max_length=100,
                                description="events applied during every run (see juice.faults.spec)")
    profile: Profile = Field(default_factory=Profile, description="resource sampling (juice.profile.spec)")

    @field_validator("scenarios", mode="before")
    @classmethod
    def _scenario_shorthand(cls, v: object) -> object:
        if isinstance(v, list):
            return [{"name": s} if isinstance(s, str) else s for s in v]
        return v

    @field_validator("rdbms")
    @classmethod
    def _known_rdbms(cls, v: list[str]) -> list[str]:
        for i, r in enumerate(v):
            if r not in RDBMS:
                raise ValueError(f"{i}: unknown rdbms {r!r} (choose from {', '.join(RDBMS)})")
        no_duplicates(v)
        return v

    @field_validator("sites", "load")
    @classmethod
    def _once(cls, v: list[Hashable]) -> list[Hashable]:
        no_duplicates(v)
        return v

    def lab_sites(self) -> int | None:
        return max(self.sites) if self.sites and self.target is None else None

    @model_validator(mode="after")
    def _lab_or_target(self) -> Experiment:
        if self.target is None:
            for k in ("rdbms", "sites"):
                if not getattr(self, k):
                    raise ValueError(f"{k}: required field is missing (a lab study names its rdbms and "
                                     "sites; a study of an existing cloud gives target: instead)")
            return self
        lab_only = [k for k in (*LAB_ONLY, "provider") if k in self.model_fields_set]
        if lab_only:
            raise ValueError(f"{lab_only[0]}: not with a target (an existing cloud has its own "
                             f"database, sites and WAN; Juice measures the RTT to it instead)")
        if self.faults:
            raise ValueError("faults: not with a target (Juice injects faults only into its own labs)")
        return self

    @model_validator(mode="after")
    def _max_connections(self) -> Experiment:
        if self.database.max_connections is not None and "cockroach" in self.rdbms:
            raise ValueError("database.max_connections: cockroach has no max_connections (remove "
                             "cockroach from rdbms or the option)")
        return self

    @model_validator(mode="after")
    def _rdbms_on_hosts(self) -> Experiment:
        if self.provider.kind == "local":
            return self
        bad = [r for r in self.rdbms if r not in REMOTE_RDBMS]
        if bad:
            raise ValueError(f"rdbms: {bad[0]} is not deployed on SSH hosts yet (provider kind enoslib "
                             f"supports {', '.join(REMOTE_RDBMS)})")
        return self

    @model_validator(mode="after")
    def _wan_fits_sites(self) -> Experiment:
        for i, z in enumerate(self.wan.zones):
            for n in self.sites:
                if z.count > n:
                    raise ValueError(f"wan.zones.{i}.count: {z.count} zones need at least "
                                     f"{z.count} sites, but sites has {n}")
        for i, m in enumerate(self.wan.matrices):
            if any(len(m) != n for n in self.sites):
                raise ValueError(f"wan.matrices.{i}: a {len(m)}×{len(m)} matrix needs sites: [{len(m)}]")
        return self

    @model_validator(mode="after")
    def _faults_fit_sites(self) -> Experiment:
        for n in self.sites:
            check_sites(self.faults, n)
        return self

    @model_validator(mode="after")
    def _scenarios_once(self) -> Experiment:
        from juice.studies.keystone import catalog

        seen = [(catalog.canonical(s.name), repr(s.args), repr(s.contexts)) for s in self.scenarios]
        for i, s in enumerate(seen):
            if s in seen[:i]:
                raise ValueError(f"scenarios.{i}: the same scenario as scenarios.{seen.index(s)}; "
                                 f"each once (repetitions repeats runs)")
        return self

    @model_validator(mode="after")
    def _size(self) -> Experiment:
        """At most MAX_RUNS runs and MAX_PLAN_S of work (``work_bound_s``)."""
        per_lab = len(self.load) * len(self.scenarios) * self.repetitions
        labs = len(self.sites) * len(self.rdbms) * len(self.keystone.cache) * len(wan_points(self.wan))
        runs = per_lab if self.target is not None else labs * per_lab
        if runs > MAX_RUNS:
            raise ValueError(f"{runs} runs (sites × rdbms × cache × wan × load × scenarios × "
                             f"repetitions); at most {MAX_RUNS} in one spec: split it")
        total = work_bound_s(self)
        if not total <= MAX_PLAN_S:
            raise ValueError(f"estimated at {total / 86400:.0f} days of runs; at most "
                             f"{MAX_PLAN_S / 86400:.0f} days in one spec: fewer or shorter runs "
                             f"(runner.times, sites, wan), or split it")
        return self


# The plan's estimate (juice.studies.keystone.estimate) depends on this module, so the spec
# bounds it with the same model, taken at its most expensive: the costliest scenario (23 HTTP
# requests and 6 commits per iteration), zones at their larger delay, one core.
# tests/spec/test_bounds.py checks that this stays above the estimate.
_REQUESTS, _COMMITS, _REQUEST_S, _REQUEST_CPU_S = 23, 6, 0.012, 0.010
_CENTRAL = ("mariadb", "postgres", "postgres-readlocal")


def _rtt_s(w: WanPoint) -> float:
    if w.delay_ms is not None:
        return 2 * w.delay_ms / 1000
    if w.zones is not None:
        return 2 * max(w.zones[1], w.zones[2]) / 1000
    if w.matrix is not None:
        return 2 * max(max(r) for r in w.matrix) / 1000
    return 0.0


def work_bound_s(exp: Experiment) -> float:
    """Seconds of work of the whole spec: an upper bound of the plan's estimate (see above)."""
    r = exp.runner
    wans = wan_points(exp.wan)
    runs_per_load = len(exp.scenarios) * exp.repetitions
    total = 0.0
    if exp.target is not None:  # every request of every driver through the rate cap (per region)
        n = r.times + (r.warmup or 0)
        run_s = 3.0 + (r.warmup_s or 0.0) + n * _REQUESTS / exp.target.max_rps
        return 10.0 + len(exp.load) * runs_per_load * run_s
    for sites in exp.sites:
        total += 1.0 + 0.05 * sites  # the lab
        # every database.max_connections value is a deployment of its own, with its runs
        conns = len(exp.database.max_connections or [0])
        for rdbms in exp.rdbms:
            for cache in [c for c in exp.keystone.cache for _ in range(conns)]:
                total += 10.0 + 2.0 * sites + 10 * _rtt_s(wans[0]) + 8.0 + 1.5 * sites  # deployment
                # WAN changes and checks: one per WAN point; interleaved passes turn back at the
                # last point, so (repetitions - 1) x (points - 1) more (juice.sweep.order)
                changes = len(wans) + (max(exp.repetitions - 1, 0) * (len(wans) - 1)
                                       if r.order == "interleaved" else 0)
                total += changes * (2.0 + 0.02 * sites * sites)
                one_run = 0.0
                for w in wans:
                    rtt = _rtt_s(w)
                    for load in exp.load:
                        it = _REQUESTS * _REQUEST_S
                        if rdbms == "galera":
                            it += _COMMITS * 1.5 * rtt
                        elif rdbms in _CENTRAL and load == "high" and sites > 1:
                            it += _REQUESTS * (7.0 if cache else 60.0) * rtt
                        n = r.times + (r.warmup or 0)  # warm-up iterations cost like the others
                        window = n / r.rate if r.rate else n / r.concurrency * it
                        cpu = (sites if load == "high" else 1) * n * _REQUESTS * _REQUEST_CPU_S
                        one_run = max(one_run, 3.0 + (r.warmup_s or 0.0) + max(window, cpu))
                        total += runs_per_load * (3.0 + (r.warmup_s or 0.0) + max(window, cpu))
                total += r.warmup_runs * one_run  # the deployment's discarded warm-up runs
    return total


def parse(data: Mapping[str, object], source: str = "spec") -> Experiment:
    return validate(Experiment, data, source, expected="a mapping of keys (name, rdbms, sites, ...)",
                    unknown_key_hint="see the examples/ directory for the spec format")
