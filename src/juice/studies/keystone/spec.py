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
    # runner: {rate: 50, times: 500, arrival: poisson}   # open loop
    keystone: {cache: [true], workers: 1, password_hash_rounds: 4}

Unknown keys are rejected; errors name the field path and the file (exit 2).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from juice.spec.base import NAME_RE, Strict
from juice.spec.wan import Wan
from juice.util.validation import validate

RDBMS = ("mariadb", "galera", "postgres", "postgres-readlocal", "cockroach")
LIGHT: tuple[Literal["light", "high"], ...] = ("light",)


class ScenarioRef(Strict):
    """A scenario, its arguments, and Rally's contexts (default: users 1 tenant × 1 user)."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    contexts: dict[str, Any] = Field(default_factory=dict)


class Runner(Strict):
    """Closed loop (``times`` × ``concurrency``) unless ``rate`` is set (open loop)."""

    times: int = Field(default=10, ge=1, le=10_000_000)
    concurrency: int = Field(default=1, ge=1, le=10_000)
    rate: float | None = Field(default=None, gt=0, description="open loop: iterations per second")
    arrival: Literal["constant", "poisson"] = "constant"
    max_in_flight: int = Field(default=1000, ge=1)
    timeout_s: float = Field(default=300.0, gt=0, description="per-iteration bound")


class KeystoneAxis(Strict):
    cache: list[bool] = Field(default_factory=lambda: [True], min_length=1)
    workers: int = Field(default=1, ge=1, le=32)
    password_hash_rounds: int = Field(default=4, ge=4, le=31)


class Experiment(Strict):
    """A Keystone study. See the module doc for the meaning of every field."""

    name: str = Field(pattern=NAME_RE)
    workload: Literal["keystone"] = "keystone"
    description: str = ""
    seed: int = 1
    repetitions: int = Field(default=1, ge=1, le=1000)
    rdbms: list[str] = Field(min_length=1)
    sites: list[int] = Field(min_length=1)
    wan: Wan = Field(default_factory=lambda: Wan(delay_ms=[0.0]))
    load: list[Literal["light", "high"]] = Field(default_factory=lambda: list(LIGHT), min_length=1)
    scenarios: list[ScenarioRef] = Field(min_length=1)
    runner: Runner = Field(default_factory=Runner)
    keystone: KeystoneAxis = Field(default_factory=KeystoneAxis)
    check_wan: bool = Field(default=True, description="ping every pair after each WAN change")
    results: str | None = Field(default=None, description="results root (default results/<name>)")

    @field_validator("scenarios", mode="before")
    @classmethod
    def _scenario_shorthand(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"name": s} if isinstance(s, str) else s for s in v]
        return v

    @field_validator("rdbms")
    @classmethod
    def _known_rdbms(cls, v: list[str]) -> list[str]:
        for r in v:
            if r not in RDBMS:
                raise ValueError(f"unknown rdbms {r!r} (choose from {', '.join(RDBMS)})")
        return v

    @field_validator("sites")
    @classmethod
    def _site_counts(cls, v: list[int]) -> list[int]:
        for n in v:
            if not 1 <= n <= 250:
                raise ValueError(f"a site count must be between 1 and 250, got {n}")
        return v

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


def parse(data: dict[str, Any], source: str = "spec") -> Experiment:
    return validate(Experiment, data, source, expected="a mapping of keys (name, rdbms, sites, ...)",
                    unknown_key_hint="see the examples/ directory for the spec format")
