"""The bounds of every number of every spec (lab, Keystone experiment, WAN, scheduler-db): both
ends accepted, just outside rejected naming the field, and no NaN, infinity, bool or string
anywhere a number is expected. Also: valid values keep their run keys (an int stays the same
key as the float it is)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from juice.errors import UserError
from juice.lab import spec as labspec
from juice.studies.keystone import catalog, estimate, matrix
from juice.studies.keystone import spec as ksspec
from juice.studies.schedulerdb import spec as sdbspec
from juice.studies.schedulerdb import study as sdbstudy

ROOT = Path(__file__).resolve().parents[2]
KEYSTONE: dict[str, Any] = {"name": "t", "rdbms": ["mariadb"], "sites": [3], "wan": {"delay_ms": [0]},
                            "scenarios": ["authenticate_user_and_validate_token"],
                            "runner": {"times": 4, "concurrency": 2, "warmup_runs": 0}}
SDB: dict[str, Any] = {"workload": "scheduler-db", "backends": ["mariadb"], "tracks": ["modern"],
                       "nodes": [1000], "schedulers": [1], "updates": [False]}
LAB: dict[str, Any] = {"sites": 3, "delay_ms": 5}
PAIRS: dict[str, Any] = {"sites": 3, "delay_ms": 5, "pairs": [{"a": 1, "b": 2}]}
Parse = Callable[[dict[str, Any], str], Any]

# (spec, path, low, high, integer?)
BOUNDS: list[tuple[str, str, float, float, bool]] = [
    ("keystone", "seed", 0, 2**31 - 1, True),
    ("keystone", "repetitions", 1, 1000, True),
    ("keystone", "sites.0", 1, 250, True),
    ("keystone", "wan.delay_ms.0", 0, 10_000, False),
    ("keystone", "wan.jitter_ms", 0, 10_000, False),
    ("keystone", "wan.loss_pct", 0, 100, False),
    ("keystone", "runner.times", 1, 10_000_000, True),
    ("keystone", "runner.concurrency", 1, 10_000, True),
    ("keystone", "runner.rate", 0.01, 10_000, False),
    ("keystone", "runner.max_in_flight", 1, 100_000, True),
    ("keystone", "runner.timeout_s", 1, 86_400, False),
    ("keystone", "runner.warmup_runs", 0, 10, True),
    ("keystone", "keystone.workers", 1, 32, True),
    ("keystone", "keystone.password_hash_rounds", 4, 14, True),
    ("lab", "sites", 1, 250, True),
    ("lab", "delay_ms", 0, 10_000, False),
    ("lab", "jitter_ms", 0, 10_000, False),
    ("lab", "loss_pct", 0, 100, False),
    ("pairs", "pairs.0.delay_ms", 0, 10_000, False),
    ("pairs", "pairs.0.jitter_ms", 0, 10_000, False),
    ("pairs", "pairs.0.loss_pct", 0, 100, False),
    ("scheduler-db", "nodes.0", 1, 200_000, True),
    ("scheduler-db", "stats_per_node", 0, 100, True),
    ("scheduler-db", "schedulers.0", 1, 64, True),
    ("scheduler-db", "repetitions", 1, 1000, True),
    ("scheduler-db", "warmup_s", 0, 60, False),
    ("scheduler-db", "update_workers", 1, 64, True),
    ("scheduler-db", "candidates", 1, 200_000, True),
    ("scheduler-db", "lab.sites", 1, 9, True),
    ("scheduler-db", "lab.delay_ms", 0, 500, False),
    ("scheduler-db", "threshold_s", 0.1, 86_400, False),
    ("scheduler-db", "read_timeout_s", 1, 86_400, False),
    ("scheduler-db", "seed", 0, 2**31 - 1, True),
]
SPECS: dict[str, tuple[dict[str, Any], Parse]] = {
    "keystone": (KEYSTONE, ksspec.parse), "lab": (LAB, labspec.parse), "pairs": (PAIRS, labspec.parse),
    "grid": ({"sites": 3}, labspec.parse),
    "scheduler-db": (SDB, sdbspec.parse)}
NOT_NUMBERS: list[Any] = [True, False, "5", "x", None, float("nan"), float("inf"), float("-inf"), [1],
                          {"a": 1}]


def with_value(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    parts: list[Any] = [int(p) if p.isdigit() else p for p in path.split(".")]
    node: Any = out
    for p in parts[:-1]:
        node = node.setdefault(p, {}) if isinstance(node, dict) else node[p]
    node[parts[-1]] = value
    return out


def cases() -> list[Any]:
    return [pytest.param(*b, id=f"{b[0]}:{b[1]}") for b in BOUNDS]


@pytest.mark.parametrize(("spec", "path", "low", "high", "integer"), cases())
def test_both_ends_are_valid(spec: str, path: str, low: float, high: float, integer: bool) -> None:
    data, parse = SPECS[spec]
    for v in (low, high):
        parse(with_value(data, path, int(v) if integer else v), "x.yaml")


@pytest.mark.parametrize(("spec", "path", "low", "high", "integer"), cases())
def test_just_outside_is_rejected_naming_the_field(spec: str, path: str, low: float, high: float,
                                                   integer: bool) -> None:
    data, parse = SPECS[spec]
    step = 1 if integer else 0.001
    for v in (low - step, high + step, 10**12, -(10**12)):
        with pytest.raises(UserError) as e:
            parse(with_value(data, path, int(v) if integer else float(v)), "x.yaml")
        assert str(e.value).startswith(f"x.yaml: {path}: "), str(e.value)
        assert "\n" not in str(e.value)


@pytest.mark.parametrize(("spec", "path", "low", "high", "integer"), cases())
def test_no_bool_string_null_nan_or_inf_for_a_number(spec: str, path: str, low: float, high: float,
                                                     integer: bool) -> None:
    data, parse = SPECS[spec]
    optional = path in ("runner.rate", "pairs.0.delay_ms", "pairs.0.jitter_ms", "pairs.0.loss_pct",
                        "delay_ms")
    bad = [v for v in NOT_NUMBERS if not (v is None and optional)]
    if integer:
        bad.append(float(low) + 0.5)  # a float is not an integer
    for v in bad:
        with pytest.raises(UserError) as e:
            parse(with_value(data, path, v), "x.yaml")
        assert str(e.value).startswith(f"x.yaml: {path}"), str(e.value)


def test_an_int_is_the_same_float_and_the_same_run_key() -> None:
    as_int = matrix.expand(ksspec.parse(with_value(KEYSTONE, "wan.delay_ms", [50]), "x"))
    as_float = matrix.expand(ksspec.parse(with_value(KEYSTONE, "wan.delay_ms", [50.0]), "x"))
    assert [p.key for p in as_int] == [p.key for p in as_float]
    assert as_int[0].wan.delay_ms == 50.0 and isinstance(as_int[0].wan.delay_ms, float)
    rate = ksspec.parse(with_value(KEYSTONE, "runner.rate", 50), "x")
    assert rate.runner.model_dump(mode="json")["rate"] == 50.0
    a = sdbspec.parse(with_value(SDB, "lab", {"sites": 3, "delay_ms": 10}), "x")
    b = sdbspec.parse(with_value(SDB, "lab", {"sites": 3, "delay_ms": 10.0}), "x")
    assert [sdbstudy.point_key(a, p) for p in a.points()] == [sdbstudy.point_key(b, p) for p in b.points()]
    assert a.lab.model_dump() == {"sites": 3, "delay_ms": 10.0}


@pytest.mark.parametrize(("spec", "path", "value", "message"), [
    ("keystone", "wan.delay_ms", [50, 50.0], "wan.delay_ms.1: 50 is listed twice"),
    ("keystone", "rdbms", ["mariadb", "mariadb"], "rdbms.1: 'mariadb' is listed twice"),
    ("keystone", "keystone", {"cache": [True, True]}, "keystone.cache.1: true is listed twice"),
    ("keystone", "scenarios", ["authenticate_user_and_validate_token",
                               "KeystoneBasic.authenticate_user_and_validate_token"],
     "scenarios.1: the same"),
    ("keystone", "scenarios", ["no_such_scenario"], "scenarios.0: unknown 'no_such_scenario'"),
    ("keystone", "scenarios", [{"name": "create_and_list_users", "args": {"bogus": 1}}],
     "scenarios.0.args: unknown argument(s) bogus"),
    ("keystone", "scenarios", [{"name": "create_and_list_users", "args": {"enabled": float("nan")}}],
     "scenarios.0.args.enabled: expected a finite number, got .nan"),
    ("keystone", "scenarios", [{"name": "create_and_list_users", "contexts": {"users": {"tenants": 5000}}}],
     "scenarios.0.contexts.users.tenants: at most 1000"),
    ("keystone", "scenarios", [{"name": "create_and_list_users", "contexts": {"users": [1]}}],
     "scenarios.0.contexts.users: expected a mapping"),
    ("keystone", "wan", {"matrices": [[[0, 1, 2], [1, 0, 2], [2, 2]]]}, "wan.matrices.0.2: has 2 columns"),
    ("keystone", "wan", {"matrices": [[[1, 1, 2], [1, 0, 2], [2, 2, 0]]]}, "wan.matrices.0.0.0: the delay"),
    ("keystone", "results", "a\x00b", "results: "),
    ("keystone", "runner", {"times": 10_000_000, "rate": 0.01, "warmup_runs": 0},
     "estimated at 11574 days of runs; at most 30"),
    ("keystone", "runner", {"times": 5_000_000, "concurrency": 1, "warmup_runs": 0}, None),  # ~16 days
    # the deployment's warm-up run (runner.warmup_runs, default 1) is a second such run
    ("keystone", "runner", {"times": 5_000_000, "concurrency": 1}, "estimated at 32 days of runs"),
    ("keystone", "repetitions", 1000, None),
    ("lab", "delay_ms", None, None),
    ("grid", "matrix", [[1, 2, 3], [2, 0, 3], [3, 3, 0]], "matrix.0.0: the delay of site 1 to itself"),
    ("scheduler-db", "nodes", {"start": 1, "stop": 200_000, "step": 1}, "nodes: 200000 combinations"),
    ("scheduler-db", "nodes", {"start": "1"}, "nodes.start: expected an integer, got '1'"),
    ("scheduler-db", "nodes", [1000, True], "nodes.1: expected an integer, got true"),
    ("scheduler-db", "backends", ["mariadb", "mariadb"], "backends.1: 'mariadb' is listed twice"),
    ("scheduler-db", "only", [{"backend": "postgres"}], "only: selects none"),
    ("scheduler-db", "only", [{"track": "bogus"}], "only.0.track: Input should be"),
])
def test_spec_level_checks(spec: str, path: str, value: Any, message: str | None) -> None:
    data, parse = SPECS[spec]
    if message is None:
        parse(with_value(data, path, value), "x.yaml")
        return
    with pytest.raises(UserError) as e:
        parse(with_value(data, path, value), "x.yaml")
    assert str(e.value).startswith(f"x.yaml: {message}"), str(e.value)


SPEC_FILES = sorted(ROOT.glob("examples/*.yaml")) + sorted(ROOT.glob("benchmarks/*.yaml"))
EXTREME_KEYSTONE: list[dict[str, Any]] = [
    {**KEYSTONE, "rdbms": list(ksspec.RDBMS), "sites": [1, 2, 9], "load": ["light", "high"],
     "keystone": {"cache": [True, False]}, "scenarios": [s.split(".")[-1] for s in catalog.names()],
     "wan": {"delay_ms": [0, 300], "zones": [{"count": 1, "intra_ms": 300, "inter_ms": 5}]}},
    {**KEYSTONE, "rdbms": ["mariadb", "galera"], "sites": [2], "load": ["high"],
     "wan": {"delay_ms": [10_000]}, "keystone": {"cache": [True, False]}},
    {**KEYSTONE, "rdbms": ["mariadb", "galera"], "sites": [2], "load": ["high"],
     "wan": {"matrices": [[[0, 10_000], [3, 0]]]}, "runner": {"times": 1000, "rate": 0.5}},
    {**KEYSTONE, "sites": [250], "load": ["high"], "runner": {"times": 1000, "concurrency": 10_000}},
]
EXTREME_SDB: list[dict[str, Any]] = [
    {"workload": "scheduler-db", "backends": ["mariadb", "galera", "postgres", "memcached", "redis"],
     "tracks": ["historical-2013.1", "historical-2013.2", "modern", "modern-all"],
     "nodes": [1, 200_000], "schedulers": [1, 2, 3, 64], "updates": [False, True],
     "clients": ["pymysql", "mysqlclient"], "repetitions": 3},
]


def _specs(kind: str) -> list[Any]:
    from juice import studies

    out = []
    for f in SPEC_FILES:
        study, spec, _ = studies.load_spec(f)
        if study.name == kind:
            out.append(spec)
    return out


def test_the_keystone_work_bound_stays_above_the_plan_estimate() -> None:
    """The spec caps work with its own copy of the estimate's model (the estimate imports the
    spec): recalibrating the estimate must keep it below the cap, or update the copy. The plan
    adds the deployments' warm-up runs (juice.sweep.warmup): the cap counts them too."""
    from juice.studies.keystone import STUDY
    from juice.sweep import warmup

    specs = _specs("keystone") + [ksspec.parse(d, "x") for d in EXTREME_KEYSTONE]
    specs += [ksspec.parse({**d, "runner": {**d.get("runner", {}), "warmup_runs": 10}}, "x")
              for d in EXTREME_KEYSTONE if "target" not in d]
    for s in specs:
        points = matrix.expand(s)
        est = estimate.total_s(points) + warmup.estimate_s(STUDY, points, warmup.runs_of(s))
        assert 0 < est <= ksspec.work_bound_s(s), s.name


def test_the_scheduler_db_work_bound_stays_at_or_above_the_plan_estimate() -> None:
    specs = _specs("scheduler-db") + [sdbspec.parse(d, "x") for d in EXTREME_SDB]
    for s in specs:
        for p in s.points():
            reps = sdbspec.reps_for(s, p)
            assert sdbstudy.estimate_s(p, reps) <= sdbspec.read_bound_s(p, reps), p
